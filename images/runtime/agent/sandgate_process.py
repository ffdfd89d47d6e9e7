"""Process mode of the sandgate agent: each run is a new program (python3 -c / node -e / bash -c) in its
own process group, its output framed from pipes, the group killed on interrupt and when the program ends.

A python run can take a pre-started interpreter (a "zygote"): `python3 -c BOOT` started ahead with the
same cwd, environment and process group as a normal run, blocked on a pipe until it gets the code and the
job's environment, which it then runs as __main__ exactly as `python3 -c code` would (same sys.argv,
tracebacks from "<string>", exit status). That takes interpreter start-up (~15 ms) off the run."""
import marshal
import os
import signal
import subprocess
import threading

from sandgate_io import WORKDIR, StreamCap, drain_pipes, write_all

COMMANDS = {
    "python": ["python3", "-c"],
    "javascript": ["node", "-e"],
    "typescript": ["sandgate-ts"],
    "bash": ["bash", "-c"],
}

# What every program is started through when the agent runs as a uid of its own (pool and process-session
# sandboxes): choom puts it first in line for the OOM killer, so many small processes outgrowing the limit together
# do not take the agent with them; setpriv makes it the sandbox user with no capability left. Empty when the agent
# is the sandbox user itself (stateful sessions, whose interpreter is the agent).
AS_USER = []
# (uid, gid) of the sandbox user when the agent is another uid, else None.
RUN_AS = None


def run_as(user):
    """`user` is "uid:gid": programs are started as that user when this process is another one."""
    global RUN_AS
    uid, _, gid = user.partition(":")
    if int(uid) == os.getuid():
        return
    RUN_AS = (int(uid), int(gid or uid))
    AS_USER[:] = ["choom", "-n", "1000", "--", "setpriv", "--reuid=" + uid, "--regid=" + (gid or uid), "--clear-groups",
                  "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"]
# Variables Python reads only at start-up: a job that sets one gets a real new interpreter.
STARTUP_VARS = ("PYTHON", "LC_", "LANG")

# Only builtins are imported before the user's code runs, so nothing in /mnt/data (first on sys.path, as
# for any `python3 -c`) is executed early.
BOOT = r'''
def _sandgate_boot():
    import sys, os, marshal
    fd = int(sys.argv[1])
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    if not chunks:
        os._exit(0)
    request = marshal.loads(b"".join(chunks))
    os.environ.update(request["env"])
    sys.argv[:] = ["-c"] + list(request.get("args", []))
    scope = sys.modules["__main__"].__dict__
    del scope["_sandgate_boot"]
    try:
        code = compile(request["code"], "<string>", "exec")
    except (SyntaxError, ValueError) as e:
        e.__traceback__ = None  # as python3 -c reports it: where in the code, no traceback
        sys.excepthook(type(e), e, None)
        sys.exit(1)
    try:
        exec(code, scope)
    except SystemExit:
        raise
    except BaseException as e:
        # The hook prints the exception's own traceback, so it is trimmed there: minus this frame.
        e.__traceback__ = e.__traceback__.tb_next
        sys.excepthook(type(e), e, e.__traceback__)
        sys.exit(1)
_sandgate_boot()
'''


class Spawned:
    """A started program: its process, output pipes and, for a zygote, the pipe it takes its code from."""

    def __init__(self, argv, env, pass_fds=()):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                AS_USER + argv, cwd=WORKDIR, env=env, stdin=subprocess.PIPE, stdout=out_w, stderr=err_w,
                process_group=0, close_fds=True, pass_fds=pass_fds)
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        self.out_r, self.err_r = out_r, err_r
        self.request_w = None
        # First in line for the OOM killer, it and all it starts, so that many small processes outgrowing the
        # limit together do not take the agent with them (raising a score needs no privilege). Best effort: a
        # program that has started already runs at 0 until this lands; a zygote has it before any user code.
        # (Started through AS_USER, it has the score from choom already, and this write is not allowed.)
        try:
            with open("/proc/%d/oom_score_adj" % self.proc.pid, "w") as fh:
                fh.write("1000")
        except OSError:
            pass

    def discard(self):
        kill_group(self.proc.pid)
        for fd in (self.out_r, self.err_r, self.request_w):
            if fd is not None:
                os.close(fd)
        self.proc.stdin.close()
        self.proc.wait()


def spawn_zygote(base_env):
    request_r, request_w = os.pipe()
    try:
        zygote = Spawned(["python3", "-c", BOOT, str(request_r)], base_env, pass_fds=(request_r,))
    except BaseException:
        os.close(request_w)
        raise
    finally:
        os.close(request_r)
    zygote.request_w = request_w
    return zygote


class ProcessRunner:
    def __init__(self, proto, base_env, interrupted, prewarm):
        self.proto = proto
        self.base_env = base_env
        self.interrupted = interrupted
        # "never"; "fresh" (pool sandboxes: at start and after each reset, never in the wake of a run, whose
        # leftovers could reach it); "always" (session sandboxes: after every run)
        self.prewarm = prewarm
        self.lock = threading.Lock()
        self.child = None
        self.zygote = None
        self.killed = False
        # No run has happened since the start or the last reset.
        self.clean = True

    def warm_up(self):
        """Starts a zygote if this sandbox wants one and has none; failures just mean a cold start."""
        if self.zygote is not None or self.prewarm == "never" or (self.prewarm == "fresh" and not self.clean):
            return
        try:
            self.zygote = spawn_zygote(self.base_env)
        except (OSError, ValueError):
            self.zygote = None

    def forget_zygote(self):
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.discard()

    def interrupt(self):
        with self.lock:
            if self.child is not None and not self.killed:
                self.killed = True
                kill_group(self.child.proc.pid)

    def run(self, msg, cap):
        self.clean = False
        try:
            child, go = self._start(msg)
        except (OSError, ValueError, KeyError) as e:
            self.proto.send({"t": "err", "d": "sandgate: cannot start the program: %s\n" % e})
            return {"code": 127}
        with self.lock:
            self.child, self.killed = child, False
        try:
            return self._follow(child, go, msg, cap)
        except BaseException:
            kill_group(child.proc.pid)
            raise
        finally:
            with self.lock:
                self.child = None

    def _follow(self, child, go, msg, cap):
        if self.interrupted.is_set():
            self.interrupt()
        # Every thread this run needs is started before its code is: code that forks up to the pids limit at once
        # must not leave the agent unable to follow it.
        threading.Thread(target=feed, args=(child.proc.stdin, msg.get("stdin")), daemon=True).start()
        wake_r, wake_w = os.pipe()

        def reap():
            child.proc.wait()
            # What the program left behind in its group goes with it, as when a container's main process
            # ends; what they had written is still in the pipes and is drained below.
            kill_group(child.proc.pid)
            os.close(wake_w)

        threading.Thread(target=reap, daemon=True).start()
        go()
        drain_pipes(self.proto, {child.out_r: StreamCap("out", cap), child.err_r: StreamCap("err", cap)}, wake_r)
        os.close(wake_r)
        with self.lock:
            killed = self.killed
        code = child.proc.returncode
        if killed:
            return {"code": -1}
        return {"code": 128 - code if code < 0 else code}

    def _start(self, msg):
        env = msg.get("env") or {}
        zygote, self.zygote = self.zygote, None
        usable = zygote is not None and zygote.proc.poll() is None
        argv = msg.get("argv") or ["python3", "-c"]
        # Only `python3 -c CODE`: another program (a test mode run's sandgate-test) is started as itself.
        # A run with tools is a program of its own too: the zygote started before its tool channel existed.
        if (usable and msg["language"] == "python" and argv[:2] == ["python3", "-c"] and "tools_fd" not in msg
                and not any(k.startswith(STARTUP_VARS) for k in env)):
            # python3 -c CODE ARG...: the arguments follow the code in argv.
            args = (msg.get("argv") or [])[3:]
            request = marshal.dumps({"code": msg["code"], "env": env, "args": args})
            fd, zygote.request_w = zygote.request_w, None

            def go():
                try:
                    write_all(fd, request)
                finally:
                    os.close(fd)

            return zygote, go
        if zygote is not None:
            zygote.discard()
        full_env = dict(self.base_env)
        full_env.update(env)
        argv = msg.get("argv") or COMMANDS[msg["language"]] + [msg["code"]]
        pass_fds = (msg["tools_fd"],) if isinstance(msg.get("tools_fd"), int) else ()
        return Spawned(argv, full_env, pass_fds), lambda: None


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def feed(pipe, text):
    """Writes the job's stdin (none: at once end of file) and closes it."""
    try:
        if text:
            pipe.write(text.encode("utf-8", "surrogateescape"))
    except OSError:
        pass  # the program exited or closed its stdin without reading it all
    finally:
        try:
            pipe.close()
        except OSError:
            pass
