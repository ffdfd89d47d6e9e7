"""Runs one program with its stdout and stderr capped at the source, for a one-execution sandbox (which has no
agent): each stream passes through unchanged up to CAP bytes and one more, so the worker sees it was cut; the
rest is read and dropped here, so a flood never crosses the engine and the worker.

  python3 -I -S sandgate_capped.py CAP -- PROGRAM [ARG...]

The program keeps this process's stdin and environment; this process exits as the program did (the same code,
or the same signal). Uses the agent's own stream plumbing (sandgate_io).
"""
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sandgate_io import StreamCap, drain_pipes, write_all  # noqa: E402


class RawOut:
    """Writes each capped chunk back to this process's own fd 1 or 2, as the bytes it was."""

    FDS = {"out": 1, "err": 2}

    def send(self, frame):
        write_all(self.FDS[frame["t"]], frame["d"].encode("latin-1"))


def spawn(argv, out_w, err_w, closing):
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in closing:
                os.close(fd)
            # Python ignores these; the program gets the default dispositions, as from any shell.
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            # First in line for the OOM killer, so that this process outlives the program and reports it.
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("1000")
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, ("sandgate: cannot run %s: %s\n" % (argv[0], e.strerror)).encode())
            os._exit(127)
    return pid


def main(args):
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: sandgate_capped.py CAP -- PROGRAM [ARG...]")
    cap = int(args[0])
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = spawn(args[2:], out_w, err_w, (out_r, out_w, err_r, err_w))
    os.close(out_w)
    os.close(err_w)
    wake_r, wake_w = os.pipe()
    ended = {}

    def reap():
        ended["status"] = os.waitpid(pid, 0)[1]
        os.close(wake_w)

    threading.Thread(target=reap, daemon=True).start()
    drain_pipes(RawOut(), {out_r: StreamCap("out", cap), err_r: StreamCap("err", cap)}, wake_r)
    status = ended["status"]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1:])
