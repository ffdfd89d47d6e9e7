import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chown, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { containerGone, docker, fixture, newSessionId, RecordingSink, SANDBOX_UID, until } from '../testing/docker.ts';

/** The id of the container a run happened in, as the sandbox itself sees it (its cgroup). */
const WHOAMI = 'import re\nprint(re.search(r"[0-9a-f]{64}", open("/proc/self/cgroup").read()).group(0))';

/**
 * What a run can see of the sandbox it runs in: other processes, scratch mounts (all of /tmp: every python start
 * seeds /tmp/matplotlib from the image), IPC objects, writable mounts.
 */
const PROBE = `
import json, os, re
me, agent = os.getpid(), os.getppid()
procs = []
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) not in (1, me, agent):
        try:
            procs.append(open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\\0", b" ").decode().strip())
        except OSError:
            pass
sysv = {k: len(open("/proc/sysvipc/" + k).read().splitlines()) - 1 for k in ("shm", "msg", "sem")}
mounts = [line.split()[1] for line in open("/proc/mounts")]
print(json.dumps({
    "container": re.search(r"[0-9a-f]{64}", open("/proc/self/cgroup").read()).group(0),
    "procs": procs, "tmp": sorted(os.path.relpath(os.path.join(d, n), "/tmp") for d, ds, fs in os.walk("/tmp") for n in ds + fs), "shm": sorted(os.listdir("/dev/shm")),
    "mqueue": sorted(os.listdir("/dev/mqueue")), "sysv": sysv, "data": sorted(os.listdir("/mnt/data")),
    "writable": sorted(m for m in mounts if os.path.isdir(m) and os.access(m, os.W_OK)),
}))
`;

interface Probe {
  container: string;
  procs: string[];
  tmp: string[];
  shm: string[];
  mqueue: string[];
  sysv: Record<'shm' | 'msg' | 'sem', number>;
  data: string[];
  writable: string[];
}

/** Leaves behind everything a run can: processes that escaped its group, scratch files, IPC objects. */
const LEAVE_BEHIND = `
set -e
echo secret > /tmp/left-behind
mkdir -p /tmp/locked/deep && touch /tmp/locked/deep/f && chmod 000 /tmp/locked/deep /tmp/locked
echo secret > /dev/shm/left-behind
ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null; ipcmk -S 1 >/dev/null
python3 -c 'import ctypes, os; assert ctypes.CDLL(None).mq_open(b"/left-behind", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0'
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
python3 -c '
import os, signal, time
r, w = os.pipe()
if os.fork():
    os.close(w); os.read(r, 1); os._exit(0)  # back once the daemon is up
os.setsid()
if os.fork():
    os._exit(0)
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
os.write(w, b"x")
while True:
    time.sleep(1)
' </dev/null >/dev/null 2>&1
echo out > made.txt
python3 -c '${PROBE.replaceAll("'", "'\\''")}'
`;

const probeOf = (stdout: string): Probe => JSON.parse(stdout.trim().split('\n').at(-1)!) as Probe;

test("the warm pool never hands one sandbox to two executions at once; a tenant's runs reuse them one after another", async (t) => {
  const f = await fixture(t, { poolSize: 3, concurrency: 3 });
  await f.backend.poolReady();
  const concurrent = await Promise.all([0, 1, 2].map(() => f.run(f.job({ code: PROBE, session_id: newSessionId() }))));
  const ids = concurrent.map((r) => probeOf(r.stdout).container);
  assert.equal(new Set(ids).size, 3, 'three runs at once, three sandboxes');
  for (let i = 0; i < 3; i++) {
    const again = probeOf((await f.run(f.job({ code: PROBE, session_id: newSessionId() }))).stdout).container;
    assert.ok(ids.includes(again), 'a later run of the tenant takes one of its reset sandboxes');
  }
  await f.backend.poolReady();
  const stranger = await f.run(f.job({ code: PROBE, tenant: 'someone-else', session_id: newSessionId() }));
  assert.ok(!ids.includes(probeOf(stranger.stdout).container), 'another tenant never gets them');
  const { hits, reused, misses } = f.backend.poolStats();
  assert.deepEqual({ hits, reused, misses }, { hits: 7, reused: 3, misses: 0 });
});

test("a reused sandbox carries no process, file or IPC object of the earlier run, and sees only its own session's files", async (t) => {
  const f = await fixture(t, { poolSize: 1 });
  const [first, second] = [newSessionId(), newSessionId()];
  for (const [session, file] of [
    [first, 'first.txt'],
    [second, 'second.txt'],
  ] as const) {
    const dir = await f.workspaces.create(session);
    await writeFile(join(dir, file), session);
    await chown(join(dir, file), SANDBOX_UID, SANDBOX_UID);
  }
  await f.backend.poolReady();
  const fresh = probeOf((await f.run(f.job({ session_id: newSessionId(), code: PROBE }))).stdout);
  const leave = await f.run(f.job({ session_id: first, language: 'bash', code: LEAVE_BEHIND }));
  assert.equal(leave.state, 'completed', leave.stderr);
  const before = probeOf(leave.stdout);
  // The leftovers are really there, so their absence below means something.
  assert.ok(
    before.procs.includes('sleep 1000') && before.procs.some((p) => p.startsWith('python3 -c')),
    before.procs.join('|'),
  );
  assert.equal(before.container, fresh.container);
  assert.ok(before.tmp.includes('left-behind') && before.tmp.includes('locked'), before.tmp.join());
  assert.deepEqual(
    [before.shm, before.mqueue, before.sysv],
    [['left-behind'], ['left-behind'], { shm: 1, msg: 1, sem: 1 }],
  );
  assert.deepEqual(before.data, ['first.txt', 'made.txt'], "the first run sees its session's upload");
  assert.deepEqual(
    leave.artifacts.map((a) => a.path),
    ['made.txt'],
  );

  const look = await f.run(f.job({ session_id: second, code: PROBE }));
  assert.equal(look.state, 'completed', look.stderr);
  const after = probeOf(look.stdout);
  assert.equal(after.container, before.container, 'the same sandbox, reset');
  assert.deepEqual(after, {
    container: before.container,
    procs: [],
    tmp: fresh.tmp,
    shm: [],
    mqueue: [],
    sysv: { shm: 0, msg: 0, sem: 0 },
    data: ['second.txt'],
    // Every writable place is one the reset empties or the host moves out: a new one would need a reset rule.
    writable: ['/dev/mqueue', '/dev/shm', '/mnt/data', '/tmp'],
  });
  assert.deepEqual(
    (await readdir(f.workspaces.dir(first))).sort(),
    ['first.txt', 'made.txt'],
    "the first run's files stay in its session",
  );
  assert.equal(await readFile(join(f.workspaces.dir(first), 'made.txt'), 'utf8'), 'out\n');
  assert.deepEqual((await readdir(f.workspaces.dir(second))).sort(), ['second.txt']);
  const { hits, reused } = f.backend.poolStats();
  assert.deepEqual({ hits, reused }, { hits: 3, reused: 2 });
});

test('a fork bomb left running is gone before the sandbox serves again', async (t) => {
  const f = await fixture(t, { poolSize: 1 });
  await f.backend.poolReady();
  const bomb = await f.run(
    f.job({
      language: 'bash',
      // Only builtins once the bomb is going: the pids limit leaves no fork to spare.
      code: `id=$(python3 -c '${WHOAMI.replaceAll('\n', '; ')}')\nsetsid bash -c 'b() { b | b & }; b' </dev/null >/dev/null 2>&1 &\nshopt -s nullglob\nuntil p=(/proc/[0-9]*); [ \${#p[@]} -ge 100 ]; do :; done\necho "$id"`,
    }),
  );
  assert.equal(bomb.state, 'completed', bomb.stderr);
  const after = probeOf((await f.run(f.job({ code: PROBE, session_id: newSessionId() }))).stdout);
  assert.equal(after.container, bomb.stdout.trim(), 'the same sandbox, reset');
  assert.deepEqual(after.procs, []);
});

test('a pool sandbox serves at most poolMaxRuns runs, then is removed', async (t) => {
  const f = await fixture(t, { poolSize: 1, poolMaxRuns: 2 });
  await f.backend.poolReady();
  const ids = [];
  for (let i = 0; i < 3; i++)
    ids.push(probeOf((await f.run(f.job({ code: PROBE, session_id: newSessionId() }))).stdout).container);
  assert.equal(ids[0], ids[1]);
  assert.notEqual(ids[2], ids[0]);
  assert.equal(await containerGone(ids[0]!), true);
});

test('poolMaxRuns 1 makes every pool sandbox single-use', async (t) => {
  const f = await fixture(t, { poolSize: 1, poolMaxRuns: 1 });
  const ids = [];
  for (let i = 0; i < 2; i++) {
    await f.backend.poolReady();
    ids.push(probeOf((await f.run(f.job({ code: PROBE, session_id: newSessionId() }))).stdout).container);
  }
  assert.notEqual(ids[0], ids[1]);
  assert.equal(f.backend.poolStats().hits, 2);
  assert.equal(await containerGone(ids[0]!), true);
});

test('a sandbox whose reset does not finish in time is killed before the harvest and removed, never reused', async (t) => {
  // 20,000 files in /tmp take the reset far longer than 5 ms to remove.
  const f = await fixture(t, { poolSize: 1, poolResetTimeoutMs: 5 });
  await f.backend.poolReady();
  const heavy = await f.run(
    f.job({
      code: `import os\nfor i in range(20000):\n    open("/tmp/f%d" % i, "w").close()\nopen("kept.txt", "w").write("k")\n${WHOAMI}`,
    }),
  );
  assert.equal(heavy.state, 'completed', heavy.stderr);
  assert.deepEqual(
    heavy.artifacts.map((a) => a.path),
    ['kept.txt'],
    'the run itself is unaffected',
  );
  const first = heavy.stdout.trim();
  await until('the sandbox is removed', () => containerGone(first));
  await f.backend.poolReady();
  const next = probeOf((await f.run(f.job({ code: PROBE, session_id: newSessionId() }))).stdout);
  assert.notEqual(next.container, first);
  assert.ok(!next.tmp.includes('f0'));
  assert.equal(f.backend.poolStats().reused, 0);
  // At least the heavy one: under load the probe's own reset can miss 5 ms too (and is then counted as well).
  assert.ok(f.backend.poolStats().resetFailed >= 1, 'counted for sandgate_pool_events_total{event="reset_failed"}');
});

test('an empty pool falls back to a cold container; a run is never refused', async (t) => {
  const f = await fixture(t, { poolSize: 1 });
  await f.backend.poolReady();
  const hold = f.run(
    f.job({ code: 'import time\nprint("held", flush=True)\ntime.sleep(1)', session_id: newSessionId() }),
  );
  const cold = await f.run(f.job({ code: 'print("cold")' }));
  assert.equal(cold.stdout, 'cold\n');
  assert.equal((await hold).stdout, 'held\n');
  const { hits, misses } = f.backend.poolStats();
  assert.deepEqual({ hits, misses }, { hits: 1, misses: 1 });
});

test('pool size 0 runs everything cold and counts misses', async (t) => {
  const f = await fixture(t, { poolSize: 0 });
  await f.backend.poolReady();
  for (let i = 0; i < 2; i++) assert.equal((await f.run(f.job({ code: 'print(2)' }))).stdout, '2\n');
  assert.deepEqual(f.backend.poolStats(), {
    hits: 0,
    reused: 0,
    misses: 2,
    size: 0,
    ready: 0,
    starting: 0,
    recycled: 0,
    resetFailed: 0,
  });
});

test("a run that asks for other limits gets a warm sandbox resized to them; the pool keeps the deployment's limits", async (t) => {
  const f = await fixture(t, { poolSize: 1, poolLimits: { memory_mb: 256, cpus: 1 } });
  await f.backend.poolReady();
  const r = await f.run(
    f.job({
      memory_mb: 300,
      cpus: 0.5,
      language: 'bash',
      code: 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us',
    }),
  );
  assert.equal(r.stdout, `${300 * 1024 * 1024}\n50000\n`);
  assert.equal(f.backend.poolStats().hits, 1);
  await f.backend.poolReady();
  const [next] = await docker.listContainers({
    filters: { label: [`org.sandgate.deployment=${f.deployment}`, 'org.sandgate.kind=pool'] },
  });
  const info = await docker.getContainer(next!.Id).inspect();
  assert.deepEqual(
    [info.HostConfig.Memory, info.HostConfig.NanoCpus],
    [256 * 1024 * 1024, 1e9],
    "one tenant's limits never become the pool's",
  );
  // A tiny limit one run asks for (16 MB: too small for the agent) does not make the refills fail either.
  const tiny = await f.run(f.job({ memory_mb: 16, code: 'print("small")' }));
  assert.notEqual(tiny.state, 'error', tiny.stderr);
  await f.backend.poolReady();
  const [after] = await docker.listContainers({
    filters: { label: [`org.sandgate.deployment=${f.deployment}`, 'org.sandgate.kind=pool'] },
  });
  assert.equal((await docker.getContainer(after!.Id).inspect()).HostConfig.Memory, 256 * 1024 * 1024);
  const next2 = await f.run(f.job({ code: 'print("pooled")' }));
  assert.equal(next2.stdout, 'pooled\n');
});

test('a pooled run past its timeout or cancelled is killed and its sandbox removed', async (t) => {
  const f = await fixture(t, { poolSize: 1 });
  await f.backend.poolReady();
  const started = performance.now();
  const slow = await f.run(
    f.job({ code: `${WHOAMI.slice(0, -1)}, flush=True)\nimport time\ntime.sleep(60)`, timeout_ms: 1000 }),
  );
  assert.equal(slow.state, 'timeout');
  assert.equal(slow.exit_code, -1);
  assert.ok(performance.now() - started < 5000);
  await f.backend.poolReady();
  const abort = new AbortController();
  const sink = new RecordingSink((text) => {
    if (text.includes('ready')) abort.abort();
  });
  const cancelled = await f.run(
    f.job({ code: 'import time\nprint("ready", flush=True)\ntime.sleep(60)' }),
    sink,
    abort.signal,
  );
  assert.equal(cancelled.state, 'cancelled');
  assert.deepEqual(sink.phases, ['starting', 'running', 'harvesting']);
  await f.backend.close();
  const left = await docker.listContainers({
    all: true,
    filters: { label: [`org.sandgate.deployment=${f.deployment}`] },
  });
  assert.deepEqual(left, [], 'close() leaves no sandbox of this instance behind');
  assert.equal(await containerGone(slow.stdout.trim()), true);
});
