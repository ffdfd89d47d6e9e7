"""Terminals: a login shell on a pseudo-terminal in the session's sandbox, as the sandbox user, for the gateway's
terminal websocket (GET /v1/sessions/{id}/terminal).

The gateway opens one on the services socket (sandgate_services.py) with {"op": "terminal", "cols", "rows", "max"}.
The agent answers one JSON line, {"ok": true, "pid"} or {"error": "too_many" | ..., "open"}, and from then on both
directions carry frames: one byte of type, four of length (big-endian), then the payload.
  gateway -> agent: DATA (keystrokes), RESIZE (cols and rows, two big-endian u16 each)
  agent -> gateway: DATA (what the terminal shows), EXIT ({"code"} once the shell has ended; the agent then closes)
The shell runs in a session of its own (setsid, the terminal its controlling tty), so what it starts survives the
end of a run as a service's processes do (Services.sids); a run cannot join that session. When the gateway closes
the connection, the whole session gets SIGHUP, then SIGKILL after HANGUP_GRACE_S: nothing a terminal started outlives
it. Every buffer is bounded: a frame is at most MAX_FRAME bytes; output is read MAX_FRAME bytes at a time and sent
before the next read, so a slow reader stalls the shell's writes, not the agent's memory.
"""
import fcntl
import json
import os
import select
import signal
import socket
import struct
import subprocess
import termios
import threading
import time

import sandgate_process
from sandgate_io import WORKDIR

DATA = 0
RESIZE = 1
EXIT = 2
HEADER = struct.Struct(">BI")
MAX_FRAME = 65536
MAX_SIDE = 1000
HANGUP_GRACE_S = 1.0
KILL_DEADLINE_S = 5.0
SHELL = ["setsid", "--ctty", "bash", "-l"]


class Terminals:
    def __init__(self, base_env):
        self.base_env = base_env
        # Shell pid (its session's id) -> its Popen, for every terminal open now.
        self.open = {}
        self.lock = threading.Lock()

    def sids(self):
        """The sessions of open terminals: their processes outlive the run that ends."""
        with self.lock:
            return set(self.open)

    def start(self, conn, msg, rest):
        """Starts a shell for the connection `conn` (whose header was msg; `rest` came after it) and relays it."""
        cols, rows = side(msg.get("cols"), 80), side(msg.get("rows"), 24)
        limit = msg.get("max") if isinstance(msg.get("max"), int) and msg.get("max") > 0 else 1
        with self.lock:
            if len(self.open) >= limit:
                return refuse(conn, {"error": "too_many", "open": len(self.open)})
            try:
                master, slave = os.openpty()
            except OSError as e:
                return refuse(conn, {"error": "no pseudo-terminal: %s" % e})
            set_size(slave, cols, rows)
            env = dict(self.base_env)
            env.update(TERM="xterm-256color", SHELL="/bin/bash")
            try:
                proc = subprocess.Popen(
                    sandgate_process.AS_USER + SHELL, cwd=WORKDIR, env=env, stdin=slave, stdout=slave, stderr=slave,
                    close_fds=True)
            except (OSError, ValueError) as e:
                os.close(master)
                return refuse(conn, {"error": "cannot start a shell: %s" % e})
            finally:
                os.close(slave)
            self.open[proc.pid] = proc
        try:
            conn.settimeout(None)
            conn.sendall((json.dumps({"ok": True, "pid": proc.pid}) + "\n").encode())
        except OSError:
            pass
        session = Session(self, conn, master, proc)
        threading.Thread(target=session.output, name="sandgate-terminal-out", daemon=True).start()
        threading.Thread(target=session.input, args=(rest,), name="sandgate-terminal-in", daemon=True).start()
        return None

    def ended(self, pid):
        with self.lock:
            self.open.pop(pid, None)


class Session:
    """One terminal: its connection, the pty's master side and the shell."""

    def __init__(self, terminals, conn, master, proc):
        self.terminals = terminals
        self.conn = conn
        self.master = master
        self.proc = proc
        self.send_lock = threading.Lock()
        self.closed = threading.Event()

    def send(self, kind, payload):
        with self.send_lock:
            self.conn.sendall(HEADER.pack(kind, len(payload)) + payload)

    def output(self):
        """Pty -> gateway, until the shell and everything holding its terminal are gone (EIO), then the exit code."""
        while True:
            # A process that left the shell's session may still hold the terminal: once the terminal was closed and
            # its shell has ended, that no longer keeps it open.
            if not select.select([self.master], [], [], 0.5)[0]:
                if self.closed.is_set() and self.proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(self.master, MAX_FRAME)
            except OSError:
                data = b""
            if not data:
                break
            try:
                self.send(DATA, data)
            except OSError:
                break
        self.hang_up()
        code = self.proc.wait()
        try:
            self.send(EXIT, json.dumps({"code": 128 - code if code < 0 else code}).encode())
        except OSError:
            pass
        self.finish()

    def input(self, rest):
        """Gateway -> pty: keystrokes and resizes, until the gateway closes (the terminal is closed: hang up)."""
        buf = bytearray(rest)
        try:
            while True:
                while len(buf) >= HEADER.size:
                    kind, size = HEADER.unpack_from(buf)
                    if size > MAX_FRAME:
                        raise ValueError("frame too large")
                    if len(buf) < HEADER.size + size:
                        break
                    payload = bytes(buf[HEADER.size:HEADER.size + size])
                    del buf[:HEADER.size + size]
                    if kind == DATA:
                        write_all(self.master, payload)
                    elif kind == RESIZE and size == 4:
                        cols, rows = struct.unpack(">HH", payload)
                        set_size(self.master, side(cols, 80), side(rows, 24))
                chunk = self.conn.recv(MAX_FRAME)
                if not chunk:
                    break
                buf += chunk
        except (OSError, ValueError):
            pass
        self.hang_up()

    def hang_up(self):
        """SIGHUP to the shell's session, SIGKILL to what is left after the grace (once per terminal)."""
        if self.closed.is_set():
            return
        self.closed.set()
        pid = self.proc.pid
        kill_session(pid, signal.SIGHUP)
        deadline = time.monotonic() + HANGUP_GRACE_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        # Until none is left: a process may fork between one pass and the next (a fork bomb does nothing else).
        deadline = time.monotonic() + KILL_DEADLINE_S
        while kill_session(pid, signal.SIGKILL) and time.monotonic() < deadline:
            time.sleep(0.01)

    def finish(self):
        self.terminals.ended(self.proc.pid)
        try:
            os.close(self.master)
        except OSError:
            pass
        try:
            self.conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


def side(value, default):
    return value if isinstance(value, int) and 0 < value <= MAX_SIDE else default


def set_size(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def refuse(conn, answer):
    try:
        conn.sendall((json.dumps(answer) + "\n").encode())
    except OSError:
        pass
    conn.close()


def kill_session(sid, sig):
    """Signals every process of session `sid`; answers how many there were."""
    found = 0
    for name in os.listdir("/proc"):
        if name.isdigit() and living_in(int(name), sid):
            found += 1
            try:
                os.kill(int(name), sig)
            except OSError:
                pass
    return found


def living_in(pid, sid):
    """Whether process `pid` is in session `sid` and not already dead (a zombie waits only to be collected)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            line = fh.read()
        fields = line[line.rindex(b")") + 2:].split()
        return fields[0] != b"Z" and int(fields[3]) == sid
    except (OSError, ValueError, IndexError):
        return False
