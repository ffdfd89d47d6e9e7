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

from sandgate_io import WORKDIR, Pump, write_all
import sandgate_process

INTERPRETER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandgate_interpreter.py")
STOP = struct.Struct("!Q")
RECV_BYTES = 1 << 16
# An answer is a few fields and the value, whose characters JSON may write as up to 12 bytes each (a surrogate pair).
ANSWER_OVERHEAD = 4096
# Saved variables go to the worker in chunks of this many bytes (base64 in a frame).
STATE_CHUNK = 512 * 1024
# What a save or a load may name: this many variables, each name and reason this long.
MAX_NAMED = 1000
MAX_NAME = 256
MAX_REASON = 200
STATE_ANSWER_LIMIT = MAX_NAMED * 12 * (MAX_NAME + MAX_REASON + 8) + ANSWER_OVERHEAD


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
        # A load of saved variables in progress (its chunks come one message at a time).
        self.loading = None

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
            answer = self._answer(seq, 12 * (cap + 3) + ANSWER_OVERHEAD, lambda line: parse_answer(line, seq, cap)) \
                if sent else None
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

    def _answer(self, seq, limit, parse):
        """The interpreter's answer to `seq`, checked by `parse`; None if it died (or can no longer answer) first."""
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
                            answer = parse(bytes(pending))
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

    def _begin(self):
        with self.lock:
            self.seq += 1
            self.running = True
            return self.seq

    def _end(self, answer):
        """After a command: the answer, or (the interpreter gone or mute) the agent ends with it."""
        with self.lock:
            alive = answer is not None and not self.dead
            if alive:
                self.running = False
        if not alive:
            self._die()

    def save(self, msg, send, send_bytes):
        """Streams the interpreter's variables to the worker as bytes frames, at most `max` bytes, then a done frame
        naming what was left out. A variable dill fails on is found and left out, after a bytes frame with `restart`
        (the worker drops what came before it); a fresh interpreter has nothing to save."""
        request_id = msg.get("id") if isinstance(msg.get("id"), str) else None
        limit = msg.get("max") if isinstance(msg.get("max"), int) else 0
        done = {"t": "done", "id": request_id}
        if self.proc is None or self.dead:
            send(dict(done, ok=True, size=0, saved=0, unsaved=[]))
            return
        exclude = {}
        for attempt in range(2):
            answer, size, over = self._dump_once(request_id, exclude, limit, send_bytes)
            if over:
                send(dict(done, ok=False, error="state_too_large", size=size))
                return
            if answer["code"] == 0:
                send(dict(done, ok=True, size=size, saved=answer.get("saved", 0), unsaved=answer.get("unsaved", [])))
                return
            if answer.get("culprits") and attempt == 0:
                exclude.update({name: reason for name, reason in answer["culprits"]})
                send_bytes({"t": "bytes", "id": request_id, "restart": True}, b"")
                continue
            send(dict(done, ok=False, error=answer.get("error") or "the variables could not be saved"))
            return

    def _dump_once(self, request_id, exclude, limit, send_bytes):
        read_end, write_end = os.pipe()
        seq = self._begin()
        try:
            self._discard_unread()
            sent = self._send({"op": "dump", "seq": seq, "exclude": exclude}, write_end)
        finally:
            os.close(write_end)
        size, over = 0, False
        try:
            while sent:
                data = os.read(read_end, STATE_CHUNK)
                if not data:
                    break
                size += len(data)
                if size > limit:
                    over = True  # closing the pipe stops the interpreter's write (EPIPE), and so the dump
                    break
                send_bytes({"t": "bytes", "id": request_id}, data)
        finally:
            os.close(read_end)
        answer = self._answer(seq, STATE_ANSWER_LIMIT, lambda line: parse_state_answer(line, seq)) if sent else None
        self._end(answer)
        return answer, size, over

    def load_chunk(self, msg, data, send):
        """One chunk of saved variables, written on to the interpreter's load as it comes (so the worker waits while
        the interpreter is behind); after the last, a done frame with how many variables it has."""
        request_id = msg.get("id") if isinstance(msg.get("id"), str) else None
        if self.loading is not None and self.loading["id"] != request_id:
            self._finish_load(send)  # an earlier load the worker gave up on
        if self.loading is None:
            if self.proc is None:
                self.start()
            read_end, write_end = os.pipe()
            seq = self._begin()
            try:
                self._discard_unread()
                sent = self._send({"op": "load", "seq": seq}, read_end)
            finally:
                os.close(read_end)
            self.loading = {"id": request_id, "seq": seq, "pipe": write_end, "writing": sent, "sent": sent}
        if self.loading["writing"]:
            try:
                write_all(self.loading["pipe"], data)
            except OSError:
                self.loading["writing"] = False  # it stopped reading: its answer says why
        if msg.get("last"):
            self._finish_load(send)

    def _finish_load(self, send):
        entry, self.loading = self.loading, None
        os.close(entry["pipe"])
        seq = entry["seq"]
        answer = self._answer(seq, STATE_ANSWER_LIMIT, lambda line: parse_state_answer(line, seq)) \
            if entry["sent"] else None
        done = {"t": "done", "id": entry["id"]}
        if answer is None:
            send(dict(done, ok=False, error="the interpreter ended while loading its variables"))
        elif answer["code"] == 0:
            self.fresh = False  # its variables are back: the next run is no restart
            send(dict(done, ok=True, restored=answer.get("restored", 0)))
        else:
            send(dict(done, ok=False, error=answer.get("error") or "the variables could not be loaded"))
        self._end(answer)

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


def parse_state_answer(line, seq):
    """The interpreter's answer to a dump or load `seq`, its fields checked and bounded; None for anything else."""
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("t") != "done" or answer.get("seq") != seq:
        return None
    code = answer.get("code")
    if type(code) is not int or not 0 <= code <= 255:
        return None
    out = {"code": code}
    for key in ("saved", "restored"):
        if type(answer.get(key)) is int and answer[key] >= 0:
            out[key] = answer[key]
    for key in ("unsaved", "culprits"):
        named = answer.get(key)
        if isinstance(named, list):
            out[key] = [[n[:MAX_NAME], r[:MAX_REASON]] for n, r in
                        (e for e in named[:MAX_NAMED] if isinstance(e, list) and len(e) == 2)
                        if isinstance(n, str) and isinstance(r, str)]
    if isinstance(answer.get("error"), str):
        out["error"] = answer["error"][:MAX_REASON]
    return out
