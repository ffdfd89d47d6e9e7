"""The interpreter of a stateful session: one globals dict for the life of the sandbox, like a notebook kernel.

A process of its own, started and driven by the agent (sandgate_stateful.py), as the sandbox user:

  python3 -u sandgate_interpreter.py CHANNEL_FD STOP_FD

It holds nothing of the platform's: not the agent's channel to the worker, not its environment. What it has is its
own end of a socket pair to the agent (CHANNEL_FD), the read end of a pipe of interrupts (STOP_FD), and fd 1/2, pipes
the agent frames as the run's output. All of it is reachable by the code it runs, so the agent believes nothing it
says beyond what the code could have chosen anyway (its value, its exit status), and takes the rest (when the run
started and ended, how long it took, whether it ran out of memory, the output caps) from what it sees itself.

The channel carries JSON lines. The agent sends one command at a time, each with a `seq` greater than the last, and
waits for the answer of that seq:
  {"op": "run", "seq", "code", "env", "stdin", "cap", "tools"}  ->  {"t": "done", "seq", "code", "value"?}
A run with tools has the run's tool socket (sandgate_tools.py) passed along with the command (SCM_RIGHTS); it is the
cell's as $SANDGATE_TOOLS_FD and closed when the cell ends. The cells' variables live in a module of their own,
registered as __main__ (so that what they define pickles by reference to it), which two more commands save and load
with dill (sandgate_state.py), each with the pipe it writes to or reads from passed along:
  {"op": "dump", "seq", "exclude"}  ->  {"t": "done", "seq", "code": 0, "saved", "unsaved"} or {"code": 1, "culprits"}
  {"op": "load", "seq"}             ->  {"t": "done", "seq", "code": 0, "restored"} or {"code": 1, "error"}

An interrupt is the run's seq written to STOP_FD (8 bytes, big-endian), then SIGINT: the interpreter raises
KeyboardInterrupt in the cell only when the seq is the running cell's, so one that crosses the end of its cell never
reaches the next one.
"""
import ast
import io
import json
import linecache
import os
import signal
import socket
import struct
import sys
import threading
import traceback
import types

import sandgate_plots
import sandgate_state

# Cells keep their source in linecache, so tracebacks show the offending lines; the oldest are forgotten.
KEPT_CELLS = 200
AGENT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
STOP = struct.Struct("!Q")
RECV_BYTES = 1 << 16


class Channel:
    """This interpreter's end of the socket pair: commands in (with the file descriptors passed along), answers out."""

    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        self.buffer = bytearray()
        self.fds = []
        self.lock = threading.Lock()
        # A child forked by a cell does not keep the channel: the agent hears from this process alone.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def receive(self):
        """The next command, or None once the agent has gone."""
        while True:
            nl = self.buffer.find(b"\n")
            if nl >= 0:
                line = bytes(self.buffer[:nl])
                del self.buffer[: nl + 1]
                return json.loads(line)
            data, fds, _, _ = socket.recv_fds(self.sock, RECV_BYTES, 4)
            self.fds.extend(fds)
            if not data:
                return None
            self.buffer += data

    def take_fd(self):
        return self.fds.pop(0) if self.fds else None

    def close_fds(self):
        while self.fds:
            close_quietly(self.fds.pop())

    def send(self, answer):
        # A newline first ends whatever a cell may have written to the channel without one, so it cannot swallow this.
        data = ("\n" + json.dumps(answer, separators=(",", ":")) + "\n").encode("ascii")
        with self.lock:
            self.sock.sendall(data)


class Interpreter:
    def __init__(self, channel, stop_fd):
        self.channel = channel
        self.stop_fd = stop_fd
        os.set_blocking(stop_fd, False)
        # The cells' module: what they define belongs to __main__, which is this module from now on.
        self.main = types.ModuleType("__main__")
        self.main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = self.main
        self.globals = self.main.__dict__
        self.cells = 0
        self.env_keys = {}
        self.seq = 0
        self.stopped = 0
        self.in_user_code = False
        self.ops = {"run": self.run, "dump": self.dump, "load": self.load}
        # The output pipes as the agent made them, put back before each cell should one have closed or moved them.
        self.std_fds = {1: os.dup(1), 2: os.dup(2)}
        # Like `python3 -c`: the working directory first on sys.path, so modules in /mnt/data import.
        sys.path[0] = ""
        signal.signal(signal.SIGINT, self._on_sigint)
        sandgate_plots.install()
        self._flush_on_exit()

    def serve(self):
        while True:
            try:
                command = self.channel.receive()
            except KeyboardInterrupt:
                continue  # only where a cell put Python's own SIGINT handler back
            except ValueError:
                continue
            if command is None:
                return
            op = self.ops.get(command.get("op")) if isinstance(command, dict) else None
            if op is None or not isinstance(command.get("seq"), int):
                self.channel.close_fds()
                continue
            self.seq = command["seq"]
            try:
                answer = op(command)
            finally:
                self.channel.close_fds()
            answer.update(t="done", seq=command["seq"])
            while True:
                try:
                    self.channel.send(answer)
                    break
                except KeyboardInterrupt:
                    continue

    def _read_stops(self):
        # The agent stops the command it is waiting for: this one, or the next while it is on its way. Anything else
        # in the pipe (a cell can reopen it for writing through /proc/self/fd) is dropped, so that it costs no later
        # cell anything.
        try:
            data = os.read(self.stop_fd, 4096 - 4096 % STOP.size)
        except (BlockingIOError, InterruptedError):
            return
        for i in range(0, len(data) - len(data) % STOP.size, STOP.size):
            seq = STOP.unpack_from(data, i)[0]
            if self.seq <= seq <= self.seq + 1:
                self.stopped = max(self.stopped, seq)

    def _on_sigint(self, signum, frame):
        # Runs on the main thread between bytecodes; only the cell the interrupt is for is interrupted.
        self._read_stops()
        if self.in_user_code and self.stopped == self.seq:
            raise KeyboardInterrupt

    def _flush_on_exit(self):
        # os._exit in a cell ends this process at once: what the cell printed through a stream of its own is flushed
        # first, as a dying program's pipes would still be read. (Not in forked children.)
        real_exit, pid = os._exit, os.getpid()

        def _exit(status):
            if os.getpid() == pid:
                flush()
            real_exit(status)

        os._exit = _exit

    def run(self, command):
        cap = command.get("cap") if isinstance(command.get("cap"), int) else 100_000
        env = command.get("env") if isinstance(command.get("env"), dict) else {}
        tools = self.channel.take_fd() if command.get("tools") is True else None
        if tools is not None:
            env = dict(env, SANDGATE_TOOLS_FD=str(tools))
        self._apply_env(env)
        sys.stdin = io.StringIO(command.get("stdin") or "")
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        for target, fd in self.std_fds.items():
            os.dup2(fd, target)
        try:
            code, value = self._execute(command.get("code") or "")
        finally:
            flush()
            if tools is not None:
                close_quietly(tools)
        answer = {"code": code}
        if value is not None:
            answer["value"] = value if len(value) <= cap else value[:cap] + "..."
        return answer

    def dump(self, command):
        """Writes the cells' variables to the pipe passed along (closed when done); names what it left out."""
        pipe = self.channel.take_fd()
        if pipe is None:
            return {"code": 1, "error": "no pipe to write to"}
        exclude = command.get("exclude") if isinstance(command.get("exclude"), dict) else {}
        return sandgate_state.dump(self.main, pipe, exclude)

    def load(self, command):
        """Reads variables saved by dump from the pipe passed along into the cells' module; imports are redone."""
        pipe = self.channel.take_fd()
        if pipe is None:
            return {"code": 1, "error": "no pipe to read from"}
        return sandgate_state.load(self.main, pipe)

    def _remember(self, source):
        self.cells += 1
        linecache.cache.pop("<cell-%d>" % (self.cells - KEPT_CELLS), None)
        filename = "<cell-%d>" % self.cells
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        return filename

    def _execute(self, source):
        filename = self._remember(source)
        try:
            tree = ast.parse(source, filename, "exec")
        except (SyntaxError, ValueError) as e:
            print_exception(e, skip=0)
            return 1, None
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        try:
            try:
                self.in_user_code = True
                self._read_stops()
                if self.stopped == self.seq:
                    raise KeyboardInterrupt
                exec(compile(tree, filename, "exec"), self.globals)
                result = None if last is None else eval(compile(last, filename, "eval"), self.globals)
            finally:
                self.in_user_code = False
            sandgate_plots.patch_loaded()
            return 0, None if result is None else safe_repr(result)
        except SystemExit as e:
            return exit_status(e), None
        except BaseException as e:  # the user's exception, KeyboardInterrupt included
            sandgate_plots.patch_loaded()
            print_exception(e, skip=1)
            return 1, None

    def _apply_env(self, env):
        # The previous run's variables go unless the code changed them; the new run's are set. Variables the
        # code set itself stay, as they would in a notebook.
        for key, value in self.env_keys.items():
            if os.environ.get(key) == value:
                del os.environ[key]
        env = {k: v for k, v in env.items() if isinstance(k, str) and isinstance(v, str)}
        os.environ.update(env)
        self.env_keys = env


def safe_repr(value):
    try:
        return repr(value)
    except BaseException as e:
        return "<repr failed: %s: %s>" % (type(e).__name__, e)


def exit_status(e):
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def print_exception(e, skip):
    """A normal traceback, minus this interpreter's own frames (the exec call, the SIGINT handler)."""
    tb = e.__traceback__
    for _ in range(skip):
        if tb is not None:
            tb = tb.tb_next
    try:
        te = traceback.TracebackException(type(e), e, tb)
        te.stack = traceback.StackSummary.from_list([f for f in te.stack if not f.filename.startswith(AGENT_DIR)])
        sys.stderr.write("".join(te.format()))
    except BaseException:
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))


def flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def close_quietly(fd):
    try:
        os.close(fd)
    except OSError:
        pass


def main(argv):
    # First in line for the OOM killer, before any cell runs: the agent outlives it and reports the kill.
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    channel_fd, stop_fd = int(argv[0]), int(argv[1])
    Interpreter(Channel(channel_fd), stop_fd).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
