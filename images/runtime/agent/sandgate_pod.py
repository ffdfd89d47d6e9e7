"""The three steps of a sandbox Pod (the Kubernetes backend), run as its containers; python3 stdlib only.

  sandgate_pod.py stage               init container: fetches the session's files into the workspace
  sandgate_pod.py run CAP TIMEOUT_MS -- PROGRAM [ARG...]
                                      runner: runs the program, its output framed on stdout (the container log)
  sandgate_pod.py harvest WAIT_MS     sends back what the run wrote or removed, then one result line

stage and harvest read the execution's transfer grant (the gateway's URL and a token) from TRANSFER, a Secret volume
mounted into them only: the runner, where the user's code runs, never sees it. They talk to the gateway's
/internal/transfer endpoints, which check every path as a client's. The runner frames what the program prints as the
agent does (sandgate_io: {"t":"out"|"err","d"} lines, each stream capped at the source), then {"t":"exit","code",
"timed_out","oom"}; nothing the program writes to its own fds can forge a frame. Stage leaves the list of files it
fetched in HANDOFF, a volume the runner does not mount, so harvest knows which ones the run changed.
"""
import http.client
import json
import os
import signal
import stat
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sandgate_io import WORKDIR, Protocol, StreamCap, drain_pipes, oom_kills, regular_files  # noqa: E402

TRANSFER = "/sandgate/transfer"
HANDOFF = "/sandgate/handoff"
RUN = "/sandgate/run"
STAGED = os.path.join(HANDOFF, "staged.json")
EXIT = os.path.join(RUN, "exit.json")
STDIN = os.path.join(RUN, "stdin")
HEADER = "X-Sandgate-Transfer"
CHUNK = 1 << 20
# How long a connect, read or write may wait on the gateway unless the transfer Secret says (its `timeout`).
HTTP_TIMEOUT_S = 60
# The most files harvest looks at: as many as the gateway lists for one session.
MAX_FILES = 100_000
# The most failures a result line names (the count is always exact).
MAX_NAMED_FAILURES = 20


class PodProtocol(Protocol):
    """Frames on the container log, each line short: a container runtime splits lines past 16 KiB into pieces."""

    MAX_D = 2048

    def send(self, frame):
        d = frame.get("d")
        if d is None or len(d) <= self.MAX_D:
            return Protocol.send(self, frame)
        for i in range(0, len(d), self.MAX_D):
            Protocol.send(self, {"t": frame["t"], "d": d[i:i + self.MAX_D]})


def emit(frame):
    sys.stdout.write(json.dumps(frame, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Gateway:
    """The gateway's /internal/transfer endpoints, with this execution's token."""

    def __init__(self):
        with open(os.path.join(TRANSFER, "url")) as fh:
            url = urllib.parse.urlsplit(fh.read().strip())
        with open(os.path.join(TRANSFER, "token")) as fh:
            self.token = fh.read().strip()
        try:
            with open(os.path.join(TRANSFER, "timeout")) as fh:
                timeout = float(fh.read().strip())
        except (OSError, ValueError):
            timeout = HTTP_TIMEOUT_S
        cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        self.conn = cls(url.hostname, url.port, timeout=timeout)
        self.base = url.path.rstrip("/") + "/internal/transfer/files"

    def request(self, method, path="", body=None, length=None):
        headers = {HEADER: self.token}
        if length is not None:
            headers["Content-Length"] = str(length)
        target = self.base + ("/" + urllib.parse.quote(path) if path else "")
        for attempt in range(3):
            try:
                self.conn.request(method, target, body=body, headers=headers)
                return self.conn.getresponse()
            except (ConnectionError, http.client.HTTPException):
                # A keep-alive connection the gateway closed: a new one, unless the body was a stream already read.
                self.conn.close()
                if attempt == 2 or (body is not None and not isinstance(body, bytes)):
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise RuntimeError("unreachable")


def problem(resp):
    """A gateway refusal as (code, detail), from its problem+json body."""
    raw = resp.read()
    try:
        body = json.loads(raw)
        return body.get("code", str(resp.status)), body.get("detail", "")
    except ValueError:
        return str(resp.status), raw[:200].decode("utf-8", "replace")


def identity(st):
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def stage():
    try:
        gw = Gateway()
        resp = gw.request("GET")
        if resp.status != 200:
            code, detail = problem(resp)
            raise RuntimeError("listing the session's files: %s %s" % (code, detail))
        listing = json.loads(resp.read())
        staged = {}
        total = 0
        for entry in listing["files"]:
            path = entry["path"]
            resp = gw.request("GET", path)
            if resp.status != 200:
                code, detail = problem(resp)
                raise RuntimeError("fetching %s: %s %s" % (path, code, detail))
            target = os.path.join(WORKDIR, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                while True:
                    data = resp.read(CHUNK)
                    if not data:
                        break
                    os.write(fd, data)
                    total += len(data)
                staged[path] = identity(os.fstat(fd))
            finally:
                os.close(fd)
        if os.path.exists(os.path.join(TRANSFER, "stdin")):
            with open(os.path.join(TRANSFER, "stdin"), "rb") as src, open(STDIN, "wb") as dst:
                dst.write(src.read())
        with open(STAGED, "w") as fh:
            json.dump(staged, fh)
        emit({"t": "staged", "files": len(staged), "bytes": total})
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way: one line, exit 1
        emit({"t": "stage_failed", "error": "%s: %s" % (type(e).__name__, e)})
        sys.exit(1)


def run(args):
    if len(args) < 4 or args[2] != "--":
        sys.exit("usage: sandgate_pod.py run CAP TIMEOUT_MS -- PROGRAM [ARG...]")
    cap, timeout_ms, argv = int(args[0]), int(args[1]), args[3:]
    proto = PodProtocol(1)
    started = time.monotonic()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    stdin = os.open(STDIN if os.path.exists(STDIN) else os.devnull, os.O_RDONLY)
    oom_before = oom_kills()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.dup2(stdin, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (stdin, out_r, out_w, err_r, err_w):
                os.close(fd)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            # First in line for the OOM killer, so that this process outlives the program and reports it.
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("1000")
            os.execvpe(argv[0], argv, user_environment())
        except OSError as e:
            os.write(2, ("sandgate: cannot run %s: %s\n" % (argv[0], e.strerror)).encode())
            os._exit(127)
    for fd in (stdin, out_w, err_w):
        os.close(fd)
    wake_r, wake_w = os.pipe()
    ended = {}
    timed_out = threading.Event()

    def reap():
        ended["status"] = os.waitpid(pid, 0)[1]
        os.close(wake_w)

    def kill_at_timeout():
        if "status" not in ended:
            timed_out.set()
            kill_group(pid)

    timer = threading.Timer(timeout_ms / 1000, kill_at_timeout)
    timer.daemon = True
    timer.start()
    threading.Thread(target=reap, daemon=True).start()
    drain_pipes(proto, {out_r: StreamCap("out", cap), err_r: StreamCap("err", cap)}, wake_r)
    timer.cancel()
    # What the program left running in its group ends with it, as on every sandgate backend.
    kill_group(pid)
    status = ended["status"]
    code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)
    oom_after = oom_kills()
    oom = oom_before is not None and oom_after is not None and oom_after > oom_before
    frame = {
        "t": "exit", "id": None, "code": code, "timed_out": timed_out.is_set(), "oom": oom,
        "duration_ms": round((time.monotonic() - started) * 1000),
    }
    proto.send(frame)
    write_atomically(EXIT, json.dumps(frame))


def user_environment():
    """This container's environment without what the kubelet adds to every container even with service links off
    (KUBERNETES_SERVICE_*, KUBERNETES_PORT*): the code sees the image's variables and the job's, as on Docker."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_SERVICE_", "KUBERNETES_PORT"))}


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def write_atomically(path, text):
    temp = path + ".tmp"
    with open(temp, "w") as fh:
        fh.write(text)
    os.replace(temp, path)


def wait_for_exit(wait_ms):
    """The runner's exit frame once it has written it, or None after wait_ms."""
    deadline = time.monotonic() + wait_ms / 1000
    while time.monotonic() < deadline:
        try:
            with open(EXIT) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


def workspace_files():
    """Regular, single-linked files of the workspace (never following a link), as path → identity."""
    found = {}
    for rel, st in regular_files(WORKDIR):
        if len(found) >= MAX_FILES:
            return found, True
        found[rel] = identity(st)
    return found, False


def upload(gw, path):
    """Sends one file; O_NOFOLLOW and fstat, as hostile code may swap it for a link meanwhile."""
    fd = os.open(os.path.join(WORKDIR, path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            return "not_a_file", "no longer a regular file", 0
        resp = gw.request("PUT", path, body=LimitedReader(fh, st.st_size), length=st.st_size)
        if resp.status == 201:
            resp.read()
            return None, None, st.st_size
        code, detail = problem(resp)
        return code, detail, 0


class LimitedReader:
    """At most `size` bytes of a file that the run may still be growing: what Content-Length promised."""

    def __init__(self, fh, size):
        self.fh = fh
        self.left = size

    def read(self, n=-1):
        if self.left <= 0:
            return b""
        data = self.fh.read(min(self.left, CHUNK if n is None or n < 0 else n))
        self.left -= len(data)
        return data


def harvest(args):
    result = {"t": "harvest", "uploaded": 0, "removed": 0, "bytes": 0, "failures": 0, "failed": []}
    try:
        result["runner"] = wait_for_exit(int(args[0]))
        try:
            with open(STAGED) as fh:
                staged = json.load(fh)
        except FileNotFoundError:
            # No stage ran (the session was empty): every file is the run's.
            staged = {}
        now, result["truncated"] = workspace_files()
        gw = Gateway()

        def failed(path, code, detail):
            result["failures"] += 1
            if len(result["failed"]) < MAX_NAMED_FAILURES:
                result["failed"].append({"path": path, "code": code, "detail": detail})

        for path, ident in now.items():
            if staged.get(path) == ident:
                continue
            try:
                code, detail, size = upload(gw, path)
            except OSError as e:
                code, detail, size = "unreadable", str(e), 0
            if code is None:
                result["uploaded"] += 1
                result["bytes"] += size
            else:
                failed(path, code, detail)
        for path in staged:
            if path in now:
                continue
            resp = gw.request("DELETE", path)
            if resp.status in (204, 404):
                resp.read()
                result["removed"] += 1
            else:
                failed(path, *problem(resp))
    except Exception as e:  # noqa: BLE001 - harvest always prints its line and exits 0
        result["fatal"] = "%s: %s" % (type(e).__name__, e)
    emit(result)


def main(argv):
    step = argv[0] if argv else ""
    if step == "stage":
        stage()
    elif step == "run":
        run(argv[1:])
    elif step == "harvest":
        harvest(argv[1:])
    else:
        sys.exit("usage: sandgate_pod.py stage | run CAP TIMEOUT_MS -- PROGRAM [ARG...] | harvest WAIT_MS")


if __name__ == "__main__":
    main(sys.argv[1:])
