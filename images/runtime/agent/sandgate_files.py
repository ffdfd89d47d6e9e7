"""The session's files, moved by the worker over the agent's channel (Kubernetes session Pods).

A session Pod's workspace is its own emptyDir; the session store lives with the workers. Before a run the worker
compares the store with `manifest` and sends what differs with `put` (and `delete`s what the store no longer has);
after it, it fetches what the run wrote with `get`. Every path is relative to the workspace and every component is
opened without following links: the workspace belongs to code that may have made any of them a link meanwhile.
The session's volumes are moved the same way by the Pod's volumes container (sandgate_volumes.py), whose requests
name the volume's mount path as their `root`.

  {"op":"manifest","id"}            -> {"t":"manifest","id","files":[[path,size,mtime_ms],...],"more"} ...
  {"op":"put","id","path","d","last","mtime_ms"?}   d: base64; the file takes its name with the last chunk
  {"op":"get","id","path","max"}    -> {"t":"chunk","id","d"} ... then {"t":"done","id","ok","size"?,"error"?}
  {"op":"delete","id","paths"}      -> {"t":"done","id","ok","error"?}
"""
import base64
import os
import stat

import sandgate_watch
from sandgate_io import WORKDIR, regular_files

# Files listed per manifest frame, and in all: what the worker looks at per walk.
MANIFEST_FRAME = 500
MAX_FILES = 10_000
GET_CHUNK = 512 * 1024
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
TEMP_PREFIX = ".sandgate-put-"


class FileError(Exception):
    pass


def segments(path):
    if not isinstance(path, str) or not path or path.startswith("/") or "\0" in path:
        raise FileError("invalid path %r" % (path,))
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise FileError("invalid path %r" % (path,))
    return parts


def open_parent(parts, create, root=WORKDIR):
    """The directory holding the last part, opened component by component without following links."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for name in parts[:-1]:
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def manifest(send, request_id, root=WORKDIR):
    """Regular, single-linked files, never following a link, in frames of MANIFEST_FRAME."""
    batch = []
    count = 0
    for rel, st in regular_files(root):
        if rel.startswith(TEMP_PREFIX) or "/" + TEMP_PREFIX in rel:
            continue
        if count >= MAX_FILES:
            send({"t": "manifest", "id": request_id, "files": batch, "more": False, "truncated": True})
            return
        batch.append([rel, st.st_size, st.st_mtime_ns // 1_000_000])
        count += 1
        if len(batch) >= MANIFEST_FRAME:
            send({"t": "manifest", "id": request_id, "files": batch, "more": True})
            batch = []
    send({"t": "manifest", "id": request_id, "files": batch, "more": False})


class Puts:
    """Files being received, by request id: a temp file in the target's directory until the last chunk."""

    def __init__(self):
        self.open = {}
        # Requests that failed: their later chunks are dropped, up to the last.
        self.failed = set()

    def chunk(self, msg, root=WORKDIR):
        """Writes one chunk; answers (a done frame) only after the last one, or the first failure."""
        request_id = msg.get("id")
        if request_id in self.failed:
            if msg.get("last"):
                self.failed.discard(request_id)
            return None
        entry = self.open.get(request_id)
        try:
            if entry is None:
                parts = segments(msg.get("path"))
                dir_fd = open_parent(parts, create=True, root=root)
                temp = TEMP_PREFIX + str(request_id)[:32]
                try:
                    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
                except BaseException:
                    os.close(dir_fd)
                    raise
                entry = self.open[request_id] = {"dir": dir_fd, "fd": fd, "temp": temp, "leaf": parts[-1]}
            data = base64.b64decode(msg.get("d") or "")
            view = memoryview(data)
            while view:
                view = view[os.write(entry["fd"], view):]
            if not msg.get("last"):
                return None
            mtime_ms = msg.get("mtime_ms")
            if isinstance(mtime_ms, int):
                os.utime(entry["fd"], ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
            if root == WORKDIR:
                # A copy of the store, whose change the gateway reported: the file watch does not report it again.
                st = os.fstat(entry["fd"])
                sandgate_watch.expect(msg.get("path"), st.st_size, st.st_mtime_ns // 1_000_000)
            os.rename(entry["temp"], entry["leaf"], src_dir_fd=entry["dir"], dst_dir_fd=entry["dir"])
            self.close(request_id)
            return {"t": "done", "id": request_id, "ok": True}
        except (OSError, ValueError, FileError) as e:
            self.close(request_id, unlink=True)
            if not msg.get("last") and len(self.failed) < 1000:
                self.failed.add(request_id)
            return {"t": "done", "id": request_id, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}

    def close(self, request_id, unlink=False):
        entry = self.open.pop(request_id, None)
        if entry is None:
            return
        os.close(entry["fd"])
        if unlink:
            try:
                os.unlink(entry["temp"], dir_fd=entry["dir"])
            except OSError:
                pass
        os.close(entry["dir"])


def get(send, msg, root=WORKDIR):
    """Sends one regular file, at most `max` bytes of it; O_NOFOLLOW and fstat, as the run may swap it for a link."""
    request_id = msg.get("id")
    limit = msg.get("max") if isinstance(msg.get("max"), int) else 0
    try:
        parts = segments(msg.get("path"))
        dir_fd = open_parent(parts, create=False, root=root)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                raise FileError("not a regular file")
            if st.st_size > limit:
                raise FileError("%d bytes, over the limit of %d" % (st.st_size, limit))
            left = st.st_size
            while left > 0:
                data = fh.read(min(GET_CHUNK, left))
                if not data:
                    break
                left -= len(data)
                send({"t": "chunk", "id": request_id, "d": base64.b64encode(data).decode("ascii")})
        send({"t": "done", "id": request_id, "ok": True, "size": st.st_size - left,
              "mtime_ms": st.st_mtime_ns // 1_000_000})
    except (OSError, FileError) as e:
        send({"t": "done", "id": request_id, "ok": False, "error": "%s: %s" % (type(e).__name__, e)})


def delete(send, msg, root=WORKDIR):
    request_id = msg.get("id")
    paths = msg.get("paths") if isinstance(msg.get("paths"), list) else []
    failed = []
    for path in paths:
        try:
            parts = segments(path)
            dir_fd = open_parent(parts, create=False, root=root)
            if root == WORKDIR:
                sandgate_watch.expect(path, removed=True)
            try:
                os.unlink(parts[-1], dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
        except FileNotFoundError:
            pass
        except (OSError, FileError) as e:
            failed.append("%s: %s" % (path, e))
    frame = {"t": "done", "id": request_id, "ok": not failed}
    if failed:
        frame["error"] = "; ".join(failed[:10])
    send(frame)
