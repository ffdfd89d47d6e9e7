"""File events: what changes in the session's directory, for the gateway's GET /v1/sessions/{id}/files/events.

The gateway opens a watch on the services socket (sandgate_services.py) with
  {"op": "watch", "interval_ms", "max_events", "max_watches"}
The agent answers {"ok": true} (or {"error": "too_many"} when MAX_WATCHERS are open), then one JSON line per interval
in which something changed:
  {"events": [{"type": "created"|"modified"|"deleted", "path", "size", "mtime_ms"}, ...], "overflow": null|reason}
until the gateway closes the connection. Paths are relative to the session's directory; names starting with
".sandgate" (partial uploads, the agent's own files) are never reported.

inotify (through ctypes, no package): one instance per watch, a watch per directory, added for each new directory as
it appears (and its contents reported, since they may have been written before the watch was in place). Changes are
coalesced per path within an interval, and each is reported with the file's size and mtime at the end of it: a file
written in a thousand chunks is one event. Everything is bounded: at most `max_events` paths per interval and
`max_watches` directories; past either, or when the kernel's queue overflows (IN_Q_OVERFLOW), the interval's events
are dropped and the line says "overflow" with the reason, which tells the client to list the files instead.

Files the worker itself moves into a Kubernetes session Pod (sandgate_files.py) are copies of the store, whose
changes the gateway reported when they were uploaded: `expect` names them with the state they are left in, and
an event that finds a file in exactly that state is not reported.
"""
import ctypes
import ctypes.util
import errno
import json
import os
import select
import socket
import stat
import struct
import threading
import time

from sandgate_io import WORKDIR

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ONLYDIR
        | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
EVENT = struct.Struct("iIII")
READ_BYTES = 65536
RESERVED = ".sandgate"
# Hard ceilings over what the gateway asks for.
MAX_WATCHERS = 4
MAX_EVENTS = 100_000
MAX_WATCHES = 65_536
MIN_INTERVAL_MS = 10
MAX_INTERVAL_MS = 10_000
# Files the worker moved in, by path: remembered this long, and at most this many.
EXPECT_S = 30
MAX_EXPECTED = 20_000

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.inotify_init1.argtypes = [ctypes.c_int]
        _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    return _libc


class Expected:
    """States the worker leaves files in (None: removed): an event that finds a file so is the worker's, not news."""

    def __init__(self):
        self.lock = threading.Lock()
        self.states = {}

    def expect(self, path, state):
        with self.lock:
            now = time.monotonic()
            if len(self.states) >= MAX_EXPECTED:
                self.states = {p: s for p, s in self.states.items() if s[1] > now}
            if len(self.states) < MAX_EXPECTED:
                self.states[path] = (state, now + EXPECT_S)

    def has(self, path):
        with self.lock:
            entry = self.states.get(path)
            return entry is not None and entry[1] >= time.monotonic()

    def take(self, path, state):
        """True when `state` is what the worker left `path` in (the expectation is then used up)."""
        with self.lock:
            entry = self.states.get(path)
            if entry is None:
                return False
            if entry[1] < time.monotonic() or entry[0] != state:
                del self.states[path]
                return False
            del self.states[path]
            return True


EXPECTED = Expected()


def expect(path, size=None, mtime_ms=None, removed=False):
    EXPECTED.expect(path, None if removed else (size, mtime_ms))


def bounded(value, default, low, high):
    return max(low, min(high, value)) if isinstance(value, int) and not isinstance(value, bool) else default


class Watchers:
    """The open watches of the sandbox, bounded by MAX_WATCHERS."""

    def __init__(self, root=WORKDIR):
        self.root = root
        self.lock = threading.Lock()
        self.open = 0

    def start(self, conn, msg):
        with self.lock:
            if self.open >= MAX_WATCHERS:
                return refuse(conn, {"error": "too_many", "open": self.open})
            self.open += 1
        try:
            watch = Watch(self.root, bounded(msg.get("interval_ms"), 250, MIN_INTERVAL_MS, MAX_INTERVAL_MS),
                          bounded(msg.get("max_events"), 10_000, 1, MAX_EVENTS),
                          bounded(msg.get("max_watches"), 8192, 1, MAX_WATCHES))
        except OSError as e:
            self.ended()
            return refuse(conn, {"error": "cannot watch: %s" % e})
        threading.Thread(target=watch.serve, args=(conn, self.ended), name="sandgate-watch", daemon=True).start()
        return None

    def ended(self):
        with self.lock:
            self.open -= 1


class Watch:
    """One inotify instance over the session's directory, and the changes seen in the current interval."""

    def __init__(self, root, interval_ms, max_events, max_watches):
        self.root = root
        self.interval = interval_ms / 1000
        self.max_events = max_events
        self.max_watches = max_watches
        self.fd = libc().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self.dirs = {}  # wd -> path relative to root ("" for the root)
        self.pending = {}  # path -> created | modified | deleted, in the order first seen
        self.counted = 0  # of those, the ones that count against max_events
        self.overflow = None
        self.watch_tree("", report=False)

    def serve(self, conn, ended):
        try:
            conn.settimeout(None)
            conn.sendall(b'{"ok":true}\n')
            self.loop(conn)
        except OSError:
            pass
        finally:
            os.close(self.fd)
            conn.close()
            ended()

    def loop(self, conn):
        flush_at = None
        while True:
            timeout = None if flush_at is None else max(0.0, flush_at - time.monotonic())
            readable, _, _ = select.select([self.fd, conn], [], [], timeout)
            if conn in readable and not conn.recv(4096):
                return  # the gateway went away
            if self.fd in readable:
                self.read()
                if flush_at is None and (self.pending or self.overflow):
                    flush_at = time.monotonic() + self.interval
            if flush_at is not None and time.monotonic() >= flush_at:
                line = self.flush()
                flush_at = None
                if line is not None:
                    conn.sendall(line)

    def read(self):
        try:
            data = os.read(self.fd, READ_BYTES)
        except BlockingIOError:
            return
        offset = 0
        while offset + EVENT.size <= len(data):
            wd, mask, _, length = EVENT.unpack_from(data, offset)
            name = data[offset + EVENT.size:offset + EVENT.size + length].rstrip(b"\0")
            offset += EVENT.size + length
            self.event(wd, mask, os.fsdecode(name))

    def event(self, wd, mask, name):
        if mask & IN_Q_OVERFLOW:
            return self.overflowed("the kernel's event queue overflowed")
        if mask & IN_IGNORED:
            self.dirs.pop(wd, None)
            return None
        base = self.dirs.get(wd)
        if base is None or not name or name.startswith(RESERVED):
            return None
        path = base + "/" + name if base else name
        if mask & IN_ISDIR:
            if mask & (IN_CREATE | IN_MOVED_TO):
                self.watch_tree(path, report=True)
            elif mask & (IN_DELETE | IN_MOVED_FROM):
                self.note(path, "deleted")
            return None
        if mask & (IN_DELETE | IN_MOVED_FROM):
            self.note(path, "deleted")
        elif mask & (IN_CREATE | IN_MOVED_TO):
            self.note(path, "created")
        else:
            self.note(path, "modified")
        return None

    def note(self, path, kind):
        if self.overflow is not None:
            return
        previous = self.pending.get(path)
        if previous is None:
            # What the worker moves in is bounded by MAX_EXPECTED, and is not the sandbox's doing: it does not count.
            if not EXPECTED.has(path):
                if self.counted >= self.max_events:
                    self.overflowed(
                        "more than %d files changed within %d ms" % (self.max_events, self.interval * 1000))
                    return
                self.counted += 1
        if kind == "deleted" or previous is None:
            self.pending[path] = kind
        elif previous == "deleted":
            self.pending[path] = "modified"  # removed and made again: replaced

    def overflowed(self, reason):
        if self.overflow is None:
            self.overflow = reason
        self.pending.clear()
        self.counted = 0

    def watch_tree(self, path, report):
        """Watches `path` and every directory under it; with `report`, what is in them counts as created."""
        stack = [path]
        while stack:
            rel = stack.pop()
            if len(self.dirs) >= self.max_watches:
                self.overflowed("more than %d directories to watch" % self.max_watches)
                return
            full = os.path.join(self.root, rel) if rel else self.root
            wd = libc().inotify_add_watch(self.fd, os.fsencode(full), MASK)
            if wd < 0:
                e = ctypes.get_errno()
                if e == errno.ENOSPC:
                    self.overflowed("the kernel allows no more inotify watches")
                    return
                continue  # gone already, or not a directory any more
            self.dirs[wd] = rel  # a directory moved within the tree keeps its wd: its path is updated here
            try:
                entries = list(os.scandir(full))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(RESERVED):
                    continue
                child = rel + "/" + entry.name if rel else entry.name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    stack.append(child)
                elif report:
                    self.note(child, "created")

    def flush(self):
        """The interval's events as one line (None: nothing to say), each with the file's state now."""
        events = []
        for path, kind in self.pending.items():
            size, mtime_ms = 0, int(time.time() * 1000)
            if kind != "deleted":
                try:
                    st = os.lstat(os.path.join(self.root, path))
                except OSError:
                    kind = "deleted"
                else:
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    size, mtime_ms = st.st_size, st.st_mtime_ns // 1_000_000
            if EXPECTED.take(path, None if kind == "deleted" else (size, mtime_ms)):
                continue
            events.append({"type": kind, "path": path, "size": size, "mtime_ms": mtime_ms})
        overflow, self.overflow = self.overflow, None
        self.pending = {}
        self.counted = 0
        if not events and overflow is None:
            return None
        return (json.dumps({"events": events, "overflow": overflow}, separators=(",", ":")) + "\n").encode("utf-8")


def refuse(conn, answer):
    try:
        conn.settimeout(5)
        conn.sendall((json.dumps(answer) + "\n").encode("utf-8"))
    except OSError:
        pass
    conn.close()
