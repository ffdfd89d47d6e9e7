"""Reset of a pool sandbox between two one-shot runs: afterwards nothing of the earlier run is left in it.

What a run as the sandbox user can leave behind, and how each goes:
- processes (daemons, setsid, stopped ones): SIGKILL to every process but PID 1 (the init, which runs as root)
  and this agent, until /proc shows none. The agent is not dumpable and its seccomp filter (sandgate_seccomp.py)
  denies ptrace and changing another process's limits or priority, so no program could reach into it.
- files: the root filesystem is read-only; the writable mounts are /mnt/data (the session's directory,
  which the host moves out of the sandbox itself), and /tmp, /dev/shm and /dev/mqueue, emptied here.
- System V shared memory, message queues and semaphores, which outlive their processes: removed.

A reset that cannot prove all of that raises ResetError; the host then destroys the sandbox instead.
"""
import ctypes
import os
import signal
import stat
import time

SCRATCH = ("/tmp", "/dev/shm", "/dev/mqueue")
IPC_RMID = 0
KILL_DEADLINE_S = 2.0


class ResetError(Exception):
    pass


def reset(user=None):
    """`user`: (uid, gid) of the sandbox user when this agent is another uid: the files and IPC objects a run left
    are then removed by a forked copy of the agent that has become their owner (only an owner may remove them)."""
    kill_all_others()
    if user is None:
        return clean()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        status = 0
        try:
            os.setgroups([])
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])
            clean()
        except BaseException as e:
            os.write(w, ("%s: %s" % (type(e).__name__, e)).encode()[:4000])
            status = 1
        os._exit(status)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        why = fh.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise ResetError("cleaning as the sandbox user failed: %s" % (why or status))


def clean():
    for path in SCRATCH:
        empty(path)
    remove_sysv_ipc()


def kill_all_others(spare_sessions=frozenset(), spare_pids=()):
    """Every process but init and the caller; with `spare_sessions` (SIDs) or `spare_pids`, every one outside those
    sessions but those processes (a stateful session's interpreter: what it starts is not spared)."""
    if spare_sessions or spare_pids:
        return kill_all_but(spare_sessions, spare_pids)
    deadline = time.monotonic() + KILL_DEADLINE_S
    while True:
        try:
            # Every process this uid may signal, except init and the caller; a fork racing with it is
            # refused by the kernel (the parent has a fatal signal pending), so a loop cannot outrun it.
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        left = living_others()
        if not left:
            return
        if time.monotonic() > deadline:
            raise ResetError("%d processes outlived SIGKILL: %s" % (len(left), left[:10]))
        time.sleep(0.002)


def kill_all_but(sessions, pids=()):
    """Kills, one by one, each process outside `sessions` but `pids`; each is stopped first, so none forks while its
    turn comes. No process can enter a session it did not start (setsid makes a new one), so none can hide in a spared
    one; a spared process's children are not spared."""
    deadline = time.monotonic() + KILL_DEADLINE_S
    while True:
        left = [pid for pid in living_others() if pid not in pids and session_of(pid) not in sessions]
        if not left:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in left:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        if time.monotonic() > deadline:
            raise ResetError("%d processes outlived SIGKILL: %s" % (len(left), left[:10]))
        time.sleep(0.002)


def session_of(pid):
    """The session (SID) of a process; None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            line = fh.read()
        return int(line[line.rindex(b")") + 2:].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def living_others():
    me = os.getpid()
    left = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        if alive(int(name)):
            left.append(int(name))
    return left


def alive(pid):
    """True unless the process is gone or a zombie (a leader whose other threads all ended too)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            line = fh.read()
        if line[line.rindex(b")") + 2:][:1] != b"Z":
            return True
        return len(os.listdir("/proc/%d/task" % pid)) > 1
    except (FileNotFoundError, ProcessLookupError):
        return False


def empty(root):
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    for name in names:
        remove(os.path.join(root, name))
    left = os.listdir(root)
    if left:
        raise ResetError("%s is not empty: %s" % (root, left[:10]))


def remove(path):
    # Iterative, deepest first: a deep tree cannot exhaust the recursion limit.
    stack = [(path, False)]
    while stack:
        current, listed = stack.pop()
        st = os.lstat(current)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(current)
        elif listed:
            os.rmdir(current)
        else:
            # The program may have left its directories unreadable or unwritable; they are still its own.
            os.chmod(current, 0o700)
            stack.append((current, True))
            stack.extend((os.path.join(current, name), False) for name in os.listdir(current))


def remove_sysv_ipc():
    libc = ctypes.CDLL(None, use_errno=True)
    removers = {
        "shm": lambda ident: libc.shmctl(ident, IPC_RMID, None),
        "msg": lambda ident: libc.msgctl(ident, IPC_RMID, None),
        "sem": lambda ident: libc.semctl(ident, 0, IPC_RMID),
    }
    for kind, rm in removers.items():
        for ident in sysv_ids(kind):
            # The creator keeps the right to remove, whatever owner IPC_SET gave the object since.
            if rm(ident) != 0 and ctypes.get_errno() not in (22, 43):  # EINVAL, EIDRM: gone already
                raise ResetError("cannot remove System V %s %d: errno %d" % (kind, ident, ctypes.get_errno()))
        left = sysv_ids(kind)
        if left:
            raise ResetError("System V %s objects left: %s" % (kind, left[:10]))


def sysv_ids(kind):
    try:
        with open("/proc/sysvipc/" + kind) as fh:
            next(fh, None)  # the header
            return [int(line.split()[1]) for line in fh if line.strip()]
    except OSError as e:
        # Objects that cannot be listed cannot be proved gone: the sandbox is not reused.
        raise ResetError("cannot list System V %s objects: %s" % (kind, e))

