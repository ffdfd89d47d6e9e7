"""Output plumbing of the sandgate agent: pipes in, capped out/err frames out."""
import json
import os
import selectors
import stat
import threading

# Where the session's files are inside the sandbox: every program's working directory.
WORKDIR = "/mnt/data"
READ_CHUNK = 65536
# Reads after a run has ended: what is already in the pipes, but not forever from a process that escaped
# its group and keeps writing.
MAX_DRAIN_READS = 64


def regular_files(root):
    """The regular, single-linked files under `root`, never following a link, in path order: (relative path, lstat)."""
    for top, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(top, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                yield os.path.relpath(full, root), st


class Protocol:
    """The private protocol fd: whole frames, one writer at a time."""

    def __init__(self, fd):
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, frame):
        data = (json.dumps(frame, separators=(",", ":")) + "\n").encode("ascii")
        with self.lock:
            write_all(self.fd, data)

    def send_bytes(self, frame, data):
        """A frame announcing `n` raw bytes, and those bytes right after its line (no base64 to pay on either side)."""
        head = (json.dumps(dict(frame, n=len(data)), separators=(",", ":")) + "\n").encode("ascii")
        with self.lock:
            write_all(self.fd, head)
            write_all(self.fd, data)


def oom_kills():
    """The memory cgroup's OOM kill counter (v1 or v2), or None where the sandbox cannot read it."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


class StreamCap:
    """Frames one stream's bytes up to its cap. One byte past the cap is still sent, so the worker sees
    that the stream was cut (its collector flags truncation); the rest is read and dropped here, so a
    flood costs a local read instead of a trip through Docker."""

    def __init__(self, kind, cap):
        self.kind = kind
        self.left = max(0, cap) + 1

    def frame(self, data):
        if self.left <= 0:
            return None
        data = data[: self.left]
        self.left -= len(data)
        return {"t": self.kind, "d": data.decode("latin-1")}


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def forward(proto, cap, data):
    """Frames what was read, within the stream's cap; without a cap (no run active) it is dropped."""
    if cap is not None:
        frame = cap.frame(data)
        if frame is not None:
            proto.send(frame)


def read_into(proto, fd, cap):
    """Reads what one non-blocking pipe holds now. Returns False at end of file."""
    try:
        data = os.read(fd, READ_CHUNK)
    except BlockingIOError:
        return True
    except InterruptedError:
        return True
    if not data:
        return False
    forward(proto, cap, data)
    return True


def drain_available(proto, fd, cap):
    """Reads a pipe until it is empty right now (or ended), within MAX_DRAIN_READS."""
    for _ in range(MAX_DRAIN_READS):
        try:
            data = os.read(fd, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            return
        forward(proto, cap, data)


def drain_pipes(proto, caps, wake_r):
    """Frames the pipes in `caps` ({fd: StreamCap}) until `wake_r` reaches end of file (the program has
    exited), then what is left in them; closes them. A program that closes its output and lives on is
    waited for; one whose leftovers keep the pipes open does not hold the run."""
    sel = selectors.DefaultSelector()
    for fd in caps:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    done = False
    while not done:
        for key, _ in sel.select():
            if key.fd == wake_r:
                done = True
            elif not read_into(proto, key.fd, caps[key.fd]):
                sel.unregister(key.fd)
    for fd in caps:
        drain_available(proto, fd, caps[fd])
        os.close(fd)
    sel.close()


class Pump:
    """Pipes read by a thread of their own and framed while a run is active (between begin and end), dropped
    otherwise: a stateful session's interpreter's output (sandgate_stateful.py), which its threads may write to at
    any time."""

    def __init__(self, proto):
        self.proto = proto
        self.lock = threading.Lock()
        self.caps = None
        self.readers = []

    def follow(self, readers):
        """Reads the pipes [(fd, "out" | "err")] from now on."""
        for r, _ in readers:
            os.set_blocking(r, False)
        self.readers = list(readers)
        threading.Thread(target=self._loop, daemon=True).start()

    def begin(self, cap):
        with self.lock:
            self.caps = {r: StreamCap(kind, cap) for r, kind in self.readers}

    def end(self):
        """Frames everything written so far, then stops framing: called once the code's streams are flushed, so every
        byte of the run goes out before its exit frame."""
        with self.lock:
            for r, _ in self.readers:
                drain_available(self.proto, r, self._cap(r))
            self.caps = None

    def _cap(self, fd):
        return None if self.caps is None else self.caps[fd]

    def _loop(self):
        sel = selectors.DefaultSelector()
        for r, _ in self.readers:
            sel.register(r, selectors.EVENT_READ)
        while sel.get_map():
            for key, _ in sel.select():
                with self.lock:
                    if not read_into(self.proto, key.fd, self._cap(key.fd)):
                        sel.unregister(key.fd)
        sel.close()
