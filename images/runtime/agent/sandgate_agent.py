"""sandgate agent: runs code on request inside a long-lived sandbox (warm pool or session).

Protocol (JSON lines). In, on the container's stdin: {"op":"run", "id", "language", "code", "env",
"stdin", "mode":"process"|"stateful", "cap"}, {"op":"interrupt"}, {"op":"ping","id"} and
{"op":"reset","id"}. Out, on the agent's ORIGINAL fd 1 only:
{"t":"ready"} once, then per run {"t":"started","id"} (the run was taken: anything after it may have
run), {"t":"out","d"} and {"t":"err","d"} (at most cap+1 bytes of each stream), {"t":"exit","id","code",
"value"?, "restarted"?, "oom"?}. "d" carries raw bytes, one code point per byte (latin-1), so output that is not
UTF-8 or splits a character across reads crosses unchanged. A reset (pool sandboxes, between two runs;
see sandgate_reset.py) is answered with {"t":"reset","id","ok", "error"?}. Runs and resets are taken one
at a time, in order.
A stateful session's variables (sandgate_stateful.py, sandgate_state.py): {"op":"save_state","id","max"} is answered
with {"t":"bytes","id","n"} frames, each followed by n raw bytes (one with "restart": true drops those before it), and
then {"t":"done","id","ok","size","saved","unsaved":[[name, reason], ...]} or {"ok": false, "error"};
{"op":"load_state","id","n","last"}, each line followed by n raw bytes as saved, is answered after the last with
{"t":"done","id","ok","restored"|"error"}.
A ping is answered at once, even during a run, with {"t":"pong","id"}: Docker starts relaying a new
attach's output a moment after it has answered the attach, so a client pings until a pong comes back
before it sends anything whose answer it must not miss.

  python3 -u sandgate_agent.py [--prewarm=never|fresh|always|interpreter]
                                                                 (pre-started python for process mode; or the
                                                                 stateful interpreter, started at once)
                                [--listen=PORT]                  (Kubernetes session Pods, see below)
                                [--services-port=PORT]           (Kubernetes session Pods: sandgate_services.py)

With --listen the channel is a TCP connection instead of stdin/stdout (Kubernetes gives no attach): a client
first sends {"op":"hello","token"} with the token whose SHA-256 is in $SANDGATE_AGENT_TOKEN_SHA256 (read and removed
from the environment at start, so no program sees even the hash), then speaks the protocol above on that
connection; a newer authenticated connection takes the place of the older one. Such a Pod's workspace is its own:
the worker also moves the session's files over the channel (sandgate_files.py).

Anything a program prints lands on fd 1/2 of that program, which are pipes this agent reads and frames:
nothing it writes, even with os.write(1, ...) from C, can forge or corrupt a frame. A stateful run's code runs in
the session's interpreter, a process of its own that this agent drives (sandgate_stateful.py), never in the agent.
"""
import ctypes
import json
import os
import hashlib
import hmac
import queue
import signal
import socket
import sys
import threading

from sandgate_io import Protocol, oom_kills, write_all
import sandgate_egress
import sandgate_files
from sandgate_tools import ToolBridge
from sandgate_process import ProcessRunner
import sandgate_process
import sandgate_reset
import sandgate_seccomp
import sandgate_services
import sandgate_stateful


def harden():
    # Before anything is started: every program the agent runs inherits the filter (sandgate_seccomp.py). Without
    # it the agent does not serve; the host then discards the sandbox.
    sandgate_seccomp.install()
    # Not dumpable: a program of the same uid can then neither ptrace this agent nor open
    # /proc/<agent>/fd/<protocol fd> to write frames of its own.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass
    # Harmless no-op handlers rather than SIG_IGN: handlers reset to default across exec, so programs
    # we start still die of these signals, while a stray one sent to the agent does not end it.
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM"):
        signal.signal(getattr(signal, name), lambda *_: None)


TOKEN_ENV = "SANDGATE_AGENT_TOKEN_SHA256"
HELLO_TIMEOUT_S = 10
MAX_HELLO_BYTES = 4096
# A peer that stops reading (gone without a FIN) must not hold the agent for TCP's retransmission timeout.
SEND_TIMEOUT_S = 30


class SocketProtocol(Protocol):
    """Frames to the current authenticated connection; dropped while there is none, as on a Docker detach."""

    def __init__(self):
        Protocol.__init__(self, None)
        self.conn = None

    def send(self, frame):
        self._sendall((json.dumps(frame, separators=(",", ":")) + "\n").encode("ascii"))

    def send_bytes(self, frame, data):
        head = (json.dumps(dict(frame, n=len(data)), separators=(",", ":")) + "\n").encode("ascii")
        self._sendall(head, data)

    def _sendall(self, *parts):
        with self.lock:
            if self.conn is None:
                return
            try:
                for data in parts:
                    self.conn.sendall(data)
            except OSError:
                self._drop(self.conn)

    def take(self, conn):
        with self.lock:
            if self.conn is not None:
                self._drop(self.conn)
            self.conn = conn

    def release(self, conn):
        with self.lock:
            if self.conn is conn:
                self._drop(conn)

    def _drop(self, conn):
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()
        if self.conn is conn:
            self.conn = None


class Agent:
    def __init__(self, prewarm, listen=None, services_port=None):
        harden()
        self.token_sha256 = os.environ.pop(TOKEN_ENV, "")
        services_token = os.environ.pop(sandgate_services.TOKEN_ENV, "")
        egress = os.environ.pop(sandgate_egress.ENV, "")
        via_agent = os.environ.pop(sandgate_egress.VIA_AGENT_ENV, "") == "1" and listen is not None
        # The relay of a Kubernetes session Pod, which takes the connections the worker parks here.
        self.egress = None
        if egress or via_agent:
            self.egress = sandgate_egress.start(egress or None)
            os.environ.update(sandgate_egress.proxy_env())
        self.base_env = dict(os.environ)
        # Long-running programs of the session (sandgate_services.py), reached by the host through its socket, or on
        # a Kubernetes session Pod by the gateway on services_port. The agent's own ports are never a service's.
        own = [p for p in (sandgate_egress.PORT if self.egress else None, listen, services_port) if p is not None]
        self.services = sandgate_services.Services(self.base_env, services_token, own)
        self.services.serve(port=services_port)
        self.listen = listen
        self.proto = SocketProtocol() if listen is not None else Protocol(os.dup(1))
        self.control = None if listen is not None else os.fdopen(os.dup(0), "rb", buffering=0)
        self.puts = sandgate_files.Puts()
        # The current run's tool channel, when its tenant has tools (sandgate_tools.py).
        self.tools = None
        # fd 0, 1 and 2 become /dev/null: nothing the agent itself prints (a library's warning, a crash of a thread)
        # can reach the protocol, and no program it starts has the protocol as a standard stream.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        # Set by an interrupt, cleared when the next run is queued: one that arrives before its run has
        # started its program still stops it.
        self.interrupted = threading.Event()
        # A stateful session's interpreter is started with the agent, so its start-up overlaps the worker's.
        self.start_interpreter = prewarm == "interpreter"
        self.process = ProcessRunner(self.proto, self.base_env, self.interrupted,
                                     "never" if self.start_interpreter else prewarm)
        self.stateful = sandgate_stateful.Interpreter(self.proto, self.base_env, self.interrupted)
        self.requests = queue.Queue()
        self.load_slots = threading.Semaphore(LOAD_CHUNKS_AHEAD)

    def read_control(self):
        self.read_messages(self.control)
        self.requests.put(None)

    def read_messages(self, lines):
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if msg.get("op") == "ping":
                self.proto.send({"t": "pong", "id": msg.get("id") if isinstance(msg.get("id"), str) else None})
            elif msg.get("op") == "interrupt":
                self.interrupted.set()
                self.process.interrupt()
                self.stateful.interrupt()
            elif msg.get("op") == "tool_result":
                tools = self.tools
                if tools is not None:
                    tools.answer(msg)
            elif msg.get("op") == "run":
                self.interrupted.clear()
                self.requests.put(msg)
            elif msg.get("op") == "save_state":
                self.requests.put(msg)
            elif msg.get("op") == "load_state":
                # Its bytes follow the line. They are loaded on the requests' thread, never here: unpickling runs the
                # session's own code (a __setstate__ may never return), and this thread must stay free to answer pings
                # and take interrupts. At most LOAD_CHUNKS_AHEAD chunks wait: past that this thread waits too, so the
                # sender waits while the interpreter is behind and the agent never holds much of the state at once.
                data = read_exactly(lines, msg.get("n"))
                if data is None:
                    return
                self.load_slots.acquire()
                self.requests.put(dict(msg, data=data))
            elif msg.get("op") in ("reset", "manifest", "put", "get", "delete") and self.listen is not None:
                self.requests.put(msg)
            elif msg.get("op") == "reset":
                self.requests.put(msg)

    def accept_loop(self):
        server = socket.create_server(("", self.listen), backlog=8)
        while True:
            conn, _ = server.accept()
            threading.Thread(target=self.serve_connection, args=(conn,), daemon=True).start()

    def serve_connection(self, conn):
        """One client: its hello must carry the token, then the connection is the channel until it ends. An
        "egress" hello instead parks the connection with the egress relay (sandgate_egress.ReverseRelay)."""
        try:
            conn.settimeout(HELLO_TIMEOUT_S)
            lines = conn.makefile("rb")
            hello = lines.readline(MAX_HELLO_BYTES)
            msg = json.loads(hello)
            op = msg.get("op") if isinstance(msg, dict) else None
            token = msg.get("token") if op in ("hello", "egress") else None
            if not isinstance(token, str) or not self.token_sha256:
                raise ValueError("no hello")
            digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
            if not hmac.compare_digest(digest, self.token_sha256):
                raise ValueError("wrong token")
            if op == "egress" and not isinstance(self.egress, sandgate_egress.ReverseRelay):
                raise ValueError("no egress here")
        except (OSError, ValueError):
            conn.close()
            return
        conn.settimeout(None)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if op == "egress":
            lines.close()  # the worker sends nothing after its hello until the connection is taken
            self.egress.park(conn)
            return
        # Frames are small and each is awaited: Nagle's algorithm would hold one back for the peer's delayed ACK.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, SEND_TIMEOUT_S.to_bytes(8, "little") + bytes(8))
        self.proto.take(conn)
        try:
            self.read_messages(lines)
        except OSError:
            pass
        finally:
            self.proto.release(conn)

    def serve(self):
        if self.listen is not None:
            threading.Thread(target=self.accept_loop, daemon=True).start()
        else:
            threading.Thread(target=self.read_control, daemon=True).start()
        if self.start_interpreter:
            self.stateful.start()
        self.proto.send({"t": "ready"})
        self.process.warm_up()
        while True:
            try:
                msg = self.requests.get()
                if msg is None:
                    return
                self.handle(msg)
            except KeyboardInterrupt:
                continue  # an interrupt that came just as a run ended: nothing left to stop

    def handle(self, msg):
        op = msg.get("op")
        if op == "reset":
            self.reset(msg)
        elif op == "manifest":
            sandgate_files.manifest(self.proto.send, msg.get("id"))
            return
        elif op == "put":
            answer = self.puts.chunk(msg)
            if answer is not None:
                self.proto.send(answer)
            return
        elif op == "get":
            sandgate_files.get(self.proto.send, msg)
            return
        elif op == "delete":
            sandgate_files.delete(self.proto.send, msg)
            return
        elif op == "save_state":
            self.stateful.save(msg, self.proto.send, self.proto.send_bytes)
            return
        elif op == "load_state":
            try:
                self.stateful.load_chunk(msg, msg.pop("data"), self.proto.send)
            finally:
                self.load_slots.release()
            return
        else:
            self.run(msg)
        self.process.warm_up()

    def reset(self, msg):
        frame = {"t": "reset", "id": msg.get("id") if isinstance(msg.get("id"), str) else None, "ok": True}
        try:
            self.process.forget_zygote()
            sandgate_reset.reset(sandgate_process.RUN_AS)
            if self.listen is not None:
                # A Pod's workspace is its own (no host moves the session's files out): it is emptied too.
                sandgate_reset.empty(sandgate_files.WORKDIR)
            self.process.clean = True
        except Exception as e:
            frame.update(ok=False, error="%s: %s" % (type(e).__name__, e))
        self.proto.send(frame)

    def end_leftovers(self):
        """Nothing a run started outlives it: daemons (setsid, double forks) would otherwise live on in a session
        sandbox for as long as the session, outside every run's limits. A stateful session's interpreter stays, with
        its state (what its cells started does not); a pre-started python is started afresh after the run."""
        self.process.forget_zygote()
        try:
            sandgate_reset.kill_all_others(spare_sessions=self.services.sids(), spare_pids=self.stateful.pids())
        except sandgate_reset.ResetError as e:
            self.proto.send({"t": "err", "d": "sandgate agent: %s\n" % e})
        reap(tuple(self.services.pids()) + self.stateful.pids())

    def run(self, msg):
        cap = msg.get("cap") if isinstance(msg.get("cap"), int) else 100_000
        run_id = msg.get("id") if isinstance(msg.get("id"), str) else None
        oom_before = oom_kills()
        tools = self.tools = ToolBridge(self.proto, run_id) if msg.get("tools") is True else None
        if tools is not None:
            msg = dict(msg, env=dict(msg.get("env") or {}, SANDGATE_TOOLS_FD=str(tools.fd())), tools_fd=tools.fd())
        self.proto.send({"t": "started", "id": run_id})
        try:
            if isinstance(msg.get("service"), str):
                frame = self.services.start(msg)
                if "error" in frame:
                    self.proto.send({"t": "err", "d": "sandgate: %s\n" % frame.pop("error")})
            elif msg.get("mode") == "stateful" and msg.get("language") == "python":
                frame = self.stateful.run(msg, cap)
            else:
                frame = self.process.run(msg, cap)
        except Exception as e:  # the agent's own failure (no threads or pids left, ...): the run still ends
            self.proto.send({"t": "err", "d": "sandgate agent: the run failed: %s: %s\n" % (type(e).__name__, e)})
            frame = {"code": 126}
        finally:
            if tools is not None:
                self.tools = None
                tools.close()
        self.end_leftovers()
        oom_after = oom_kills()
        if oom_before is not None and oom_after is not None and oom_after > oom_before:
            frame["oom"] = True
        frame["t"] = "exit"
        frame["id"] = run_id
        self.proto.send(frame)


MAX_BYTES_FRAME = 16 << 20
# Chunks of saved variables (1 MB each from the worker) read ahead of the interpreter's load.
LOAD_CHUNKS_AHEAD = 4


def read_exactly(lines, n):
    """The `n` raw bytes that follow a line; None when the stream ends first (or `n` is no size)."""
    if type(n) is not int or not 0 <= n <= MAX_BYTES_FRAME:
        return None
    parts = []
    while n > 0:
        data = lines.read(n)
        if not data:
            return None
        parts.append(data)
        n -= len(data)
    return b"".join(parts)


def reap(keep=()):
    """Collects every child that has ended. Where the agent is PID 1 (a Kubernetes session Pod) the orphans of every
    run are its children too, and would otherwise stay zombies for the life of the Pod. A service's own process (in
    `keep`) is left to the thread that follows it, which needs its exit status; the rest then waits for the next run."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == 0 or info.si_pid in keep:
            return
        try:
            os.waitpid(info.si_pid, os.WNOHANG)
        except ChildProcessError:
            return


def arg(argv, name, default):
    for a in argv:
        if a.startswith("--%s=" % name):
            return a.split("=", 1)[1]
    return default


def prewarm_arg(argv):
    for arg in argv:
        if arg.startswith("--prewarm="):
            return arg.split("=", 1)[1]
    return "never"


if __name__ == "__main__":
    user = arg(sys.argv[1:], "run-as", None)
    if user is not None:
        sandgate_process.run_as(user)
    port = arg(sys.argv[1:], "listen", None)
    services_port = arg(sys.argv[1:], "services-port", None)
    Agent(prewarm_arg(sys.argv[1:]), None if port is None else int(port),
          None if services_port is None else int(services_port)).serve()
