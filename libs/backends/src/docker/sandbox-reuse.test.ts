import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AGENT_UID } from './agent-spec.ts';
import { modeFixture, newSessionId, RUN_MODES } from '../testing/docker.ts';

/**
 * What a run tries against what outlives it: PID 1 (the init, holding the container's stdio, which is the
 * worker's channel to an agent) and the agent. Each probe prints 0 when it succeeds, else the errno.
 */
const ATTACK = String.raw`
import ctypes, json, os, resource
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE, PRIO_USER = 0x4206, 2
def agent_pid():
    for name in os.listdir("/proc"):
        try:
            cmdline = open("/proc/%s/cmdline" % name, "rb").read()
            if name.isdigit() and cmdline.startswith(b"python3") and b"sandgate_agent.py" in cmdline:
                return int(name)
        except OSError:
            pass
def errno_of(fn):
    try:
        rc = fn()
        return ctypes.get_errno() if rc == -1 else 0
    except OSError as e:
        return e.errno
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def vm_read(pid):
    buf = ctypes.create_string_buffer(8)
    local, remote = IoVec(ctypes.addressof(buf), 8), IoVec(0x400000, 8)
    return libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
targets = {"init": 1}
agent = agent_pid()
if agent is not None:
    targets["agent"] = agent
out = {"init_uid": os.stat("/proc/1").st_uid, "agent_uid": agent and int(open("/proc/%d/status" % agent).read().split("Uid:")[1].split()[0])}
for what, pid in targets.items():
    out[what] = {
        "ptrace": errno_of(lambda: libc.ptrace(PTRACE_SEIZE, pid, 0, 0)),
        "vm_read": errno_of(lambda: vm_read(pid)),
        "fd0": errno_of(lambda: os.close(os.open("/proc/%d/fd/0" % pid, os.O_RDONLY))),
        "mem": errno_of(lambda: os.close(os.open("/proc/%d/mem" % pid, os.O_RDONLY))),
        "prlimit": errno_of(lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, (4096, 4096))),
        "nice": errno_of(lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
    }
# Every process of this uid at once, the agent included.
out["nice_user"] = errno_of(lambda: os.setpriority(PRIO_USER, 0, 19))
out["own_limit"] = errno_of(lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
out["host"] = os.uname().nodename
print(json.dumps(out))
`;

const AFTER = String.raw`
import json, os, resource
with open("/tmp/big", "wb") as fh:
    fh.write(b"x" * 100_000)
print(json.dumps({"fsize": resource.getrlimit(resource.RLIMIT_FSIZE), "nice": os.getpriority(os.PRIO_PROCESS, 0),
  "host": os.uname().nodename}))
`;

const EPERM = 1;
const EACCES = 13;

for (const mode of RUN_MODES) {
  test(`[${mode}] a run can neither trace nor read nor limit PID 1 or the agent; the next run starts as clean`, async (t) => {
    const f = await modeFixture(t, mode);
    const tenant = 'tenant-reuse';
    const session = mode === 'session' ? { session_id: newSessionId() } : {};
    const a = await f.run(f.job({ tenant, code: ATTACK, ...session }));
    assert.equal(a.state, 'completed', a.stderr);
    const out = JSON.parse(a.stdout);
    assert.equal(out.init_uid, 0, 'the init runs as root, a uid no sandboxed program has');
    if (mode !== 'cold') assert.equal(out.agent_uid, AGENT_UID, 'the agent runs as a uid of its own');
    const denied = (errno: number) => errno === EPERM || errno === EACCES;
    for (const what of mode === 'cold' ? ['init'] : ['init', 'agent']) {
      assert.ok(out[what], `${what} found: ${a.stdout}`);
      for (const [probe, errno] of Object.entries(out[what] as Record<string, number>)) {
        assert.ok(denied(errno), `${probe} on ${what} must fail with EPERM or EACCES, got ${errno}: ${a.stdout}`);
      }
    }
    if (mode !== 'cold') assert.ok(denied(out.nice_user), `setpriority(PRIO_USER) must fail, got ${out.nice_user}`);
    assert.equal(out.own_limit, 0, 'a run still sets its own limits');

    const b = await f.run(f.job({ tenant, code: AFTER, ...session }));
    assert.equal(b.state, 'completed', b.stderr);
    const after = JSON.parse(b.stdout);
    if (mode !== 'cold') assert.equal(after.host, out.host, 'the second run is served by the same sandbox');
    assert.deepEqual(after.fsize, [-1, -1], 'no file size limit carried over');
    assert.equal(after.nice, 0, 'no priority carried over');
  });
}

const DAEMONS = String.raw`
import os, subprocess
subprocess.Popen(["sleep", "1000"], start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(fd, n)
        os.execvp("sleep", ["sleep", "1001"])
    os._exit(0)
os.wait()
print("started")
`;

const SLEEPERS = String.raw`
import json, os
found = []
for name in os.listdir("/proc"):
    try:
        if name.isdigit() and open("/proc/%s/cmdline" % name, "rb").read().startswith(b"sleep"):
            found.append(int(name))
    except OSError:
        pass
print(json.dumps(found))
`;

for (const sandbox of ['session', 'stateful'] as const) {
  test(`[${sandbox}] daemons a run starts (setsid, double fork) end with the run; the session lives on`, async (t) => {
    const f = await modeFixture(t, 'session');
    const session_id = newSessionId();
    const first = await f.run(f.job({ sandbox, session_id, code: `${DAEMONS}\nx = 41` }));
    assert.equal(first.state, 'completed', first.stderr);
    assert.equal(first.stdout, 'started\n');
    const next = await f.run(f.job({ sandbox, session_id, code: SLEEPERS }));
    assert.equal(next.state, 'completed', next.stderr);
    assert.deepEqual(JSON.parse(next.stdout), [], 'no process of the earlier run is left');
    if (sandbox === 'stateful') {
      const kept = await f.run(f.job({ sandbox, session_id, code: 'print(x + 1)' }));
      assert.equal(kept.stdout, '42\n', "the session's interpreter and its state stay");
    }
  });
}
