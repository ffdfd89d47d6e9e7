"""sandgate's own seccomp filter, stacked on the engine's default profile (which stays in force: filters add up,
and the most restrictive answer wins).

The agent installs it on itself before it starts anything, so it holds for the agent and for every program it
runs. It closes what a run could otherwise do to the agent, which shares the run's uid and outlives it in pool
and session sandboxes:
- no ptrace and no reading or writing another process's memory (ptrace, process_vm_readv/writev, kcmp,
  pidfd_getfd);
- resource limits, priority, scheduling and I/O priority only of the caller itself: prlimit on the agent
  (RLIMIT_FSIZE 4096) or setpriority on it (nice 19) would otherwise carry into every later run.
Denied calls fail with EPERM. Only the native x86-64 ABI passes; a 32-bit or x32 system call kills the caller.

  python3 sandgate_seccomp.py    prints the rules (a check that libseccomp loads and knows every name)
"""
import ctypes
import ctypes.util
import errno

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_EPERM = 0x00050000 | errno.EPERM
SCMP_CMP_NE = 1
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1

# Denied whatever their arguments.
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd")
# (name, argument index, value it must have): any other value is denied. pid/who 0 means the caller itself.
ONLY_SELF = (
    ("prlimit64", 0, 0),
    ("setpriority", 0, PRIO_PROCESS),
    ("setpriority", 1, 0),
    ("sched_setaffinity", 0, 0),
    ("sched_setscheduler", 0, 0),
    ("sched_setparam", 0, 0),
    ("sched_setattr", 0, 0),
    ("ioprio_set", 0, IOPRIO_WHO_PROCESS),
    ("ioprio_set", 1, 0),
)


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class SeccompError(Exception):
    pass


def _lib():
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


def rules():
    """Every rule as (name, condition or None)."""
    return [(name, None) for name in DENIED] + [(name, (arg, value)) for name, arg, value in ONLY_SELF]


def install():
    """Loads the filter into this process (and so into all it starts); raises SeccompError if it cannot."""
    lib = _lib()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompError("seccomp_init failed")
    try:
        for name, cond in rules():
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                raise SeccompError("unknown system call %s" % name)
            if cond is None:
                rc = lib.seccomp_rule_add_array(ctx, SCMP_ACT_EPERM, nr, 0, None)
            else:
                cmp = ArgCmp(cond[0], SCMP_CMP_NE, cond[1], 0)
                rc = lib.seccomp_rule_add_array(ctx, SCMP_ACT_EPERM, nr, 1, ctypes.byref(cmp))
            if rc != 0:
                raise SeccompError("cannot add the rule for %s: %s" % (name, errno.errorcode.get(-rc, rc)))
        rc = lib.seccomp_load(ctx)
        if rc != 0:
            raise SeccompError("cannot load the filter: %s" % errno.errorcode.get(-rc, rc))
    finally:
        lib.seccomp_release(ctx)


if __name__ == "__main__":
    lib = _lib()
    for name, cond in rules():
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        print("%-20s %4d  %s" % (name, nr, "denied" if cond is None else "only arg%d == %d" % cond))
