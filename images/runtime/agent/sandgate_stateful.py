"""The agent's side of a stateful session: it starts the session's interpreter (sandgate_interpreter.py) as a process
of its own, as the sandbox user, and drives it.

The interpreter runs the user's code, so it is as hostile as that code: it holds no descriptor of the agent's channel
to the worker (close_fds, and the agent's own descriptors are not inheritable), cannot read the agent's memory or
descriptors through /proc (the agent is not dumpable, and where the sandbox lets it, another uid), nor trace it
(sandgate_seccomp.py). What it tells the agent is data: a line of at most a bounded size, valid JSON, of the command's
seq, an exit status in 0..255 and a value of at most the cap, else it is dropped. When the run started and ended, its
output within the caps, an OOM kill, the interpreter's death: the agent sees those itself. What a cell can still do is
lie about its own value and status (which it chooses anyway), or answer for its cell before the cell has ended, which
gives it nothing a thread it starts would not: the next command waits in the channel until the interpreter reads it.

The interpreter's life is the session sandbox's: when it dies (os._exit, an OOM kill, a crash) the agent frames what
it printed and exits with its status, so the host sees the sandbox end as it did when the interpreter was the agent,
reports the death, and replaces the sandbox for the next run.
"""
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import threading

from sandgate_io import WORKDIR, Pump
import sandgate_process

INTERPRETER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandgate_interpreter.py")
STOP = struct.Struct("!Q")
RECV_BYTES = 1 << 16
# An answer is a few fields and the value, whose characters JSON may write as up to 12 bytes each (a surrogate pair).
ANSWER_OVERHEAD = 4096


class Interpreter:
    def __init__(self, proto, base_env, interrupted):
        self.proto = proto
        self.base_env = base_env
        self.interrupted = interrupted
        self.lock = threading.Lock()
        self.proc = None
        self.seq = 0
        self.running = False
        self.dead = False
        self.fresh = True

    def start(self):
        """Starts the interpreter. Its first run reports `restarted`: a fresh interpreter, no variables."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        stop_r, stop_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # A socket pair rather than a pipe: where the sandbox user may reopen the agent's descriptors through /proc
        # (gVisor, whose /proc ignores that the agent is not dumpable), a socket cannot be reopened.
        dead_r, dead_w = socket.socketpair()
        # It starts with SIGINT ignored (kept across exec) until it has its own handler: an interrupt that comes while
        # it starts up waits in the stop pipe for the cell, instead of ending the interpreter.
        agent_handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.proc = subprocess.Popen(
                sandgate_process.AS_USER + ["python3", "-u", INTERPRETER, str(theirs.fileno()), str(stop_r)],
                cwd=WORKDIR, env=self.base_env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                process_group=0, close_fds=True, pass_fds=(theirs.fileno(), stop_r))
        except BaseException:
            for fd in (stop_w, out_r, err_r):
                os.close(fd)
            for s in (ours, dead_r, dead_w):
                s.close()
            raise
        finally:
            signal.signal(signal.SIGINT, agent_handler)
            theirs.close()
            for fd in (stop_r, out_w, err_w):
                os.close(fd)
        self.channel = ours
        self.stop_w = stop_w
        os.set_blocking(stop_w, False)
        self.dead_r, self.dead_w = dead_r, dead_w
        self.selector = selectors.DefaultSelector()
        self.selector.register(ours, selectors.EVENT_READ)
        self.selector.register(dead_r, selectors.EVENT_READ)
        self.pump = Pump(self.proto)
        self.pump.follow([(out_r, "out"), (err_r, "err")])
        self.fresh = True
        threading.Thread(target=self._watch, daemon=True).start()

    def pids(self):
        """The interpreter's process, which outlives every run (and no other process: what a cell starts does not)."""
        return () if self.proc is None else (self.proc.pid,)

    def _watch(self):
        self.proc.wait()
        with self.lock:
            self.dead = True
            if not self.running:
                # Between runs: the agent ends with its interpreter at once, as the sandbox did when they were one.
                os._exit(self.status())
        self.dead_w.close()  # the run in progress sees it, frames what is left of the output, and ends the agent

    def status(self):
        code = self.proc.returncode
        return 128 - code if code < 0 else code & 0xFF

    def interrupt(self):
        with self.lock:
            if not self.running:
                return
            try:
                os.write(self.stop_w, STOP.pack(self.seq))
                os.kill(self.proc.pid, signal.SIGINT)
            except OSError:
                pass  # gone already, or its interrupts unread by the thousand: the host's grace period ends it

    def run(self, msg, cap):
        if self.proc is None:
            self.start()
        with self.lock:
            self.seq += 1
            seq = self.seq
            self.running = True
        tools = msg.get("tools_fd") if isinstance(msg.get("tools_fd"), int) else None
        command = {"op": "run", "seq": seq, "code": msg.get("code", ""), "env": msg.get("env") or {},
                   "stdin": msg.get("stdin"), "cap": cap, "tools": tools is not None}
        self._discard_unread()
        self.pump.begin(cap)
        try:
            sent = self._send(command, tools)
            if sent and self.interrupted.is_set():
                self.interrupt()
            answer = self._answer(seq, cap) if sent else None
        except BaseException:
            with self.lock:
                self.running = False
            raise
        with self.lock:
            alive = answer is not None and not self.dead
            if alive:
                self.running = False
        if not alive:
            self._die()  # still "running": the watcher leaves the end to it
        self.pump.end()
        restarted, self.fresh = self.fresh, False
        frame = {"code": answer["code"], "restarted": restarted}
        if "value" in answer:
            frame["value"] = answer["value"]
        return frame

    def _send(self, command, fd):
        data = (json.dumps(command, separators=(",", ":")) + "\n").encode("ascii")
        try:
            n = socket.send_fds(self.channel, [data], [fd]) if fd is not None else 0
            self.channel.sendall(data[n:])
            return True
        except OSError:
            return False

    def _discard_unread(self):
        """What the interpreter wrote between runs is no answer to the next one."""
        while True:
            try:
                if not self.channel.recv(RECV_BYTES, socket.MSG_DONTWAIT):
                    return
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return

    def _answer(self, seq, cap):
        """The interpreter's answer to `seq`, checked; None if it died (or can no longer answer) first."""
        limit = 12 * (cap + 3) + ANSWER_OVERHEAD
        pending = bytearray()
        skipping = False
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.dead_r:
                    return None
                try:
                    data = self.channel.recv(RECV_BYTES)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    return None  # it closed its end of the channel: it cannot be driven any more
                start = 0
                for nl in iter_newlines(data):
                    if not skipping:
                        pending += data[start:nl]
                        if pending and len(pending) <= limit:
                            answer = parse_answer(bytes(pending), seq, cap)
                            if answer is not None:
                                return answer
                    pending.clear()
                    skipping = False
                    start = nl + 1
                if not skipping:
                    pending += data[start:]
                    if len(pending) > limit:
                        pending.clear()
                        skipping = True

    def _die(self):
        """The interpreter is gone, or can no longer be driven: the agent frames what it printed and ends with it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        self.pump.end()
        os._exit(self.status())


def iter_newlines(data):
    i = data.find(b"\n")
    while i >= 0:
        yield i
        i = data.find(b"\n", i + 1)


def parse_answer(line, seq, cap):
    """The interpreter's answer to `seq` as {"code", "value"?}, or None for anything else."""
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("t") != "done" or type(answer.get("seq")) is not int:
        return None
    if answer["seq"] != seq:
        return None
    code, value = answer.get("code"), answer.get("value")
    if type(code) is not int or not 0 <= code <= 255:
        return None
    if value is None:
        return {"code": code}
    if not isinstance(value, str):
        return None
    return {"code": code, "value": value if len(value) <= cap + 3 else value[:cap] + "..."}
