"""Services: long-running programs of a session (a web app, a notebook server, a database) that outlive the run that
started them, until they exit, are stopped, or the session's sandbox ends.

A run with "service": NAME starts its program as a service instead: in a session of its own (its SID), as the sandbox
user, its stdout and stderr kept together in a ring of LOG_CAP bytes (older output drops out; offsets count every
byte ever written). The run itself ends as soon as the program has started. A run's leftovers are killed when it ends
(sandgate_agent.end_leftovers), except the processes in a live service's session: a program cannot join a session it
did not start, so no run can hide there.

The host reaches services through one Unix socket, SOCKET, in a directory mounted from the host (never the network:
the sandbox has none). The agent binds it at start; the host created the directory, and in process sessions only the
agent's own uid may enter it. A Kubernetes session Pod has no such directory: there the agent listens on TCP (the
agent's --services-port), which the chart's NetworkPolicy opens to the gateway only. Each connection opens with one JSON line carrying the token whose SHA-256 the agent got
in $SANDGATE_SERVICES_TOKEN_SHA256 (so code of a stateful session, which runs as the agent's uid, cannot use it
either), and one op:
  {"op":"status"}                          -> one JSON line: {"services": [status, ...], "terminals", "watches"}
  {"op":"logs","name","offset"}             -> one JSON line: {"data" (latin-1), "offset", "next_offset"} or {"error"}
  {"op":"stop","name","grace_ms"}           -> SIGTERM to its session, SIGKILL after grace_ms; answers once it ended
  {"op":"connect","port"}                   -> "ok\\n", then the connection is relayed to 127.0.0.1:port
  {"op":"terminal","cols","rows","max"}     -> a login shell on a pseudo-terminal (sandgate_terminal.py)
  {"op":"metrics"}                          -> one JSON line: the sandbox's cgroup figures (sandgate_metrics.py)
  {"op":"watch","interval_ms",...}          -> the session directory's file events (sandgate_watch.py)
Ports a service listens on are found in /proc/net/tcp{,6}: a port the sandbox user starts listening on while services
run belongs to the service started last. Listeners of other users (a container network's DNS resolver, say) and the
agent's own ports are never a service's.
"""
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import threading
import time

import sandgate_egress
import sandgate_metrics
import sandgate_process
import sandgate_reset
import sandgate_terminal
import sandgate_watch
from sandgate_io import WORKDIR

MOUNT = "/run/sandgate/services"
SOCKET = MOUNT + "/agent.sock"
TOKEN_ENV = "SANDGATE_SERVICES_TOKEN_SHA256"
LOG_CAP = 1 << 20
MAX_SERVICES = 16
HEADER_TIMEOUT_S = 2
MAX_HEADER_BYTES = 65536
PORT_SCAN_S = 0.25
MAX_GRACE_MS = 60_000
LISTEN = "0A"


class Service:
    def __init__(self, name, proc, command):
        self.name = name
        self.proc = proc
        self.command = command
        self.started_at = time.time()
        self.ended_at = None
        self.exit_code = None
        self.stopping = False
        self.ports = []
        self.ring = bytearray()
        self.written = 0
        self.lock = threading.Lock()

    @property
    def running(self):
        return self.exit_code is None

    def append(self, data):
        with self.lock:
            self.ring += data
            self.written += len(data)
            if len(self.ring) > LOG_CAP:
                del self.ring[:len(self.ring) - LOG_CAP]

    def logs(self, offset):
        with self.lock:
            first = self.written - len(self.ring)
            start = max(offset, first)
            data = bytes(self.ring[start - first:]) if start < self.written else b""
            return {"data": data.decode("latin-1"), "offset": start, "next_offset": self.written}

    def status(self):
        if self.running:
            state = "running"
        elif self.stopping:
            state = "stopped"
        else:
            state = "exited" if self.exit_code == 0 else "failed"
        return {
            "name": self.name,
            "state": state,
            "pid": self.proc.pid,
            "exit_code": self.exit_code,
            "ports": list(self.ports),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "log_bytes": self.written,
        }


class Services:
    def __init__(self, base_env, token_sha256, reserved_ports=()):
        self.base_env = base_env
        self.token_sha256 = token_sha256
        self.reserved = set(reserved_ports)
        self.services = {}
        self.lock = threading.Lock()
        self.scanner = None
        self.terminals = sandgate_terminal.Terminals(base_env)
        self.watchers = sandgate_watch.Watchers()

    def sids(self):
        """The sessions of live services and open terminals: their processes outlive the run that ends."""
        with self.lock:
            live = {s.proc.pid for s in self.services.values() if s.running}
        return live | self.terminals.sids()

    def pids(self):
        """Processes whose exit status a thread of ours waits for: the agent's reaper leaves them alone."""
        with self.lock:
            mine = {s.proc.pid for s in self.services.values()}
        return mine | self.terminals.sids()

    def start(self, msg):
        """Starts the run's program as service msg["service"]; the run's exit frame, at once."""
        name = msg["service"]
        with self.lock:
            old = self.services.get(name)
            if old is not None and old.running:
                return fail("a service named %s is running already" % name)
            if sum(1 for s in self.services.values() if s.running) >= MAX_SERVICES:
                return fail("this session runs %d services already" % MAX_SERVICES)
        env = dict(self.base_env)
        env.update(msg.get("env") or {})
        argv = msg.get("argv") or ["bash", "-c", msg["code"]]
        out_r, out_w = os.pipe()
        try:
            proc = subprocess.Popen(
                sandgate_process.AS_USER + argv, cwd=WORKDIR, env=env, stdin=subprocess.DEVNULL, stdout=out_w,
                stderr=out_w, start_new_session=True, close_fds=True)
        except (OSError, ValueError) as e:
            os.close(out_r)
            return fail("cannot start the program: %s" % e)
        finally:
            os.close(out_w)
        service = Service(name, proc, msg.get("code", ""))
        with self.lock:
            self.services[name] = service
        threading.Thread(target=self._follow, args=(service, out_r), daemon=True).start()
        self._scan_ports()
        return {"code": 0}

    def _follow(self, service, fd):
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            service.append(data)
        os.close(fd)
        code = service.proc.wait()
        # What the program left in its session goes with it.
        kill_session(service.proc.pid, signal.SIGKILL)
        service.exit_code = 128 - code if code < 0 else code
        service.ended_at = time.time()
        service.ports = []

    def stop(self, name, grace_ms):
        with self.lock:
            service = self.services.get(name)
        if service is None:
            return {"error": "no service named %s" % name}
        if service.running:
            service.stopping = True
            kill_session(service.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + min(max(grace_ms, 0), MAX_GRACE_MS) / 1000
            while service.running and time.monotonic() < deadline:
                time.sleep(0.02)
            if service.running:
                kill_session(service.proc.pid, signal.SIGKILL)
            while service.running:
                time.sleep(0.01)
        return service.status()

    def status(self):
        with self.lock:
            services = list(self.services.values())
        return {"services": [s.status() for s in services], "terminals": len(self.terminals.sids()),
                "watches": self.watchers.open}

    def logs(self, name, offset):
        with self.lock:
            service = self.services.get(name)
        if service is None:
            return {"error": "no service named %s" % name}
        return service.logs(offset if isinstance(offset, int) and offset >= 0 else 0)

    def _scan_ports(self):
        """Starts the port scanner, which runs while any service does."""
        with self.lock:
            if self.scanner is not None and self.scanner.is_alive():
                return
            self.scanner = threading.Thread(target=self._scan_loop, daemon=True)
            self.scanner.start()

    def _scan_loop(self):
        while True:
            with self.lock:
                live = sorted((s for s in self.services.values() if s.running), key=lambda s: s.started_at)
            if not live:
                return
            listening = listening_ports(services_uid()) - self.reserved
            owned = set()
            for s in live:
                s.ports = [p for p in s.ports if p in listening]
                owned.update(s.ports)
            fresh = sorted(listening - owned)
            if fresh:
                live[-1].ports = live[-1].ports + fresh
            time.sleep(PORT_SCAN_S)

    def serve(self, path=SOCKET, port=None):
        """Listens on TCP `port`, or on the host's socket if the host mounted its directory; a sandbox with neither
        (or no token) has no services."""
        if not self.token_sha256:
            return False
        if port is not None:
            server = socket.create_server(("", port), backlog=64)
        else:
            if not os.path.isdir(os.path.dirname(path)):
                return False
            try:
                os.unlink(path)
            except OSError:
                pass
            server = socket.socket(socket.AF_UNIX)
            server.bind(path)
            server.listen(64)
        threading.Thread(target=Ingress(server, self).serve, name="sandgate-services", daemon=True).start()
        return True

    def answer(self, conn, msg):
        """Serves one op; True when the connection is now a relay."""
        op = msg.get("op")
        if op == "status":
            reply(conn, self.status())
        elif op == "metrics":
            reply(conn, sandgate_metrics.sample())
        elif op == "logs":
            reply(conn, self.logs(msg.get("name"), msg.get("offset")))
        elif op == "stop":
            grace = msg.get("grace_ms") if isinstance(msg.get("grace_ms"), int) else 5000

            def stop():
                try:
                    reply(conn, self.stop(msg.get("name"), grace))
                finally:
                    conn.close()

            threading.Thread(target=stop, daemon=True).start()
            return "kept"
        else:
            reply(conn, {"error": "unknown op"})
        return None

    def authentic(self, msg):
        token = msg.get("token") if isinstance(msg, dict) else None
        if not isinstance(token, str):
            return False
        return hmac.compare_digest(hashlib.sha256(token.encode("utf-8")).hexdigest(), self.token_sha256)


class Ingress(sandgate_egress.Relay):
    """The host's socket: control ops, and connections relayed to a port on the sandbox's loopback."""

    def __init__(self, server, services):
        sandgate_egress.Relay.__init__(self, server, None)
        self.services = services

    def accept(self):
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        try:
            conn.settimeout(HEADER_TIMEOUT_S)
            header, rest = read_line(conn)
            msg = json.loads(header)
            if not self.services.authentic(msg):
                raise ValueError("wrong token")
        except (OSError, ValueError):
            conn.close()
            return
        if msg.get("op") == "terminal":
            self.services.terminals.start(conn, msg, rest)
            return
        if msg.get("op") == "watch":
            self.services.watchers.start(conn, msg)
            return
        if msg.get("op") != "connect":
            try:
                if self.services.answer(conn, msg) == "kept":
                    return
            except OSError:
                pass
            conn.close()
            return
        port = msg.get("port")
        valid = isinstance(port, int) and 0 < port < 65536 and port not in self.services.reserved
        upstream = connect_local(port) if valid else None
        if upstream is None:
            try:
                conn.sendall(b"refused\n")
            except OSError:
                pass
            conn.close()
            return
        try:
            conn.sendall(b"ok\n")
            if rest:
                upstream.sendall(rest)
        except OSError:
            conn.close()
            upstream.close()
            return
        self.pair(conn, upstream)


def read_line(conn):
    """The first line, and whatever came after it in the same reads."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            raise ValueError("no header")
        data += chunk
        if len(data) > MAX_HEADER_BYTES:
            raise ValueError("header too long")
    line, _, rest = data.partition(b"\n")
    return line, rest


def reply(conn, obj):
    conn.settimeout(30)
    conn.sendall((json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8"))


def connect_local(port):
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        s = socket.socket(family)
        s.settimeout(5)
        try:
            s.connect((host, port))
            s.settimeout(None)
            return s
        except OSError:
            s.close()
    return None


def services_uid():
    """The uid services run as: the sandbox user's."""
    return sandgate_process.RUN_AS[0] if sandgate_process.RUN_AS else os.getuid()


def listening_ports(uid):
    """The TCP ports `uid` listens on, IPv4 and IPv6."""
    ports = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as fh:
                next(fh, None)
                for line in fh:
                    fields = line.split()
                    if len(fields) > 7 and fields[3] == LISTEN and fields[7] == str(uid):
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports


def kill_session(sid, sig):
    """Signals every process in session `sid` (the service and all it started that stayed in its session)."""
    for name in os.listdir("/proc"):
        if name.isdigit() and sandgate_reset.session_of(int(name)) == sid:
            try:
                os.kill(int(name), sig)
            except OSError:
                pass


def fail(message):
    return {"code": 1, "error": message}
