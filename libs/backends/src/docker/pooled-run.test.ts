import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chown, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { containerGone, docker, fixture, newSessionId, RecordingSink, SANDBOX_UID } from './testing.ts';

/** The id of the container a run happened in, as the sandbox itself sees it (its cgroup). */
const WHOAMI = 'import re\nprint(re.search(r"[0-9a-f]{64}", open("/proc/self/cgroup").read()).group(0))';

test('the warm pool never hands the same sandbox to two executions, concurrent or sequential', async (t) => {
  const f = await fixture(t, { poolSize: 3 });
  await f.backend.poolReady();
  const concurrent = await Promise.all([0, 1, 2].map(() => f.run(f.job({ code: WHOAMI, session_id: newSessionId() }))));
  const sequential = [];
  for (let i = 0; i < 3; i++) {
    await f.backend.poolReady();
    sequential.push(await f.run(f.job({ code: WHOAMI })));
  }
  const ids = [...concurrent, ...sequential].map((r) => r.stdout.trim());
  assert.ok(ids.every((id) => /^[0-9a-f]{64}$/.test(id)), ids.join());
  assert.equal(new Set(ids).size, 6, 'six runs, six sandboxes');
  assert.deepEqual({ hits: f.backend.poolStats().hits, misses: f.backend.poolStats().misses }, { hits: 6, misses: 0 });
  await f.backend.poolSettled();
  for (const id of ids) assert.equal(await containerGone(id), true, 'each sandbox is removed after its one run');
});

test('a pooled sandbox carries no file or process from an earlier run, and sees only its own session\'s files', async (t) => {
  const f = await fixture(t, { poolSize: 1 });
  const [first, second] = [newSessionId(), newSessionId()];
  for (const [session, file] of [[first, 'first.txt'], [second, 'second.txt']] as const) {
    const dir = await f.workspaces.create(session);
    await writeFile(join(dir, file), session);
    await chown(join(dir, file), SANDBOX_UID, SANDBOX_UID);
  }
  await f.backend.poolReady();
  const leave = await f.run(f.job({ session_id: first, language: 'bash', code: 'echo secret > /tmp/left-behind; ls; setsid sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 & echo out > made.txt' }));
  assert.equal(leave.stdout, 'first.txt\n', 'the first run sees its session\'s upload');
  assert.deepEqual(leave.artifacts.map((a) => a.path), ['made.txt']);
  await f.backend.poolReady();
  const look = await f.run(f.job({ session_id: second, language: 'bash', code: 'ls -A /tmp; ps -eo args= | grep -c "^sleep" ; ls -A /mnt/data' }));
  assert.equal(look.state, 'completed', look.stderr);
  const [tmp, sleeps, data] = [look.stdout.split('\n')[0], look.stdout.split('\n')[1], look.stdout.split('\n').slice(2).join('\n')];
  assert.doesNotMatch(tmp ?? '', /left-behind/);
  assert.equal(sleeps, '0', 'no process of the earlier run');
  assert.equal(data, 'second.txt\n');
  assert.deepEqual((await readdir(f.workspaces.dir(first))).sort(), ['first.txt', 'made.txt'], 'the first run\'s files are in its session');
  assert.equal(await readFile(join(f.workspaces.dir(first), 'made.txt'), 'utf8'), 'out\n');
  assert.equal(f.backend.poolStats().hits, 2);
});

test('an empty pool falls back to a cold container; a run is never refused', async (t) => {
  const f = await fixture(t, { poolSize: 1 });
  await f.backend.poolReady();
  const hold = f.run(f.job({ code: 'import time\nprint("held", flush=True)\ntime.sleep(1)', session_id: newSessionId() }));
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
  assert.deepEqual(f.backend.poolStats(), { hits: 0, misses: 2, size: 0, ready: 0, starting: 0 });
});

test('a run that asks for other limits gets a warm sandbox resized to them, and the pool follows', async (t) => {
  const f = await fixture(t, { poolSize: 1, poolLimits: { memory_mb: 256, cpus: 1 } });
  await f.backend.poolReady();
  const r = await f.run(f.job({ memory_mb: 300, cpus: 0.5, language: 'bash', code: 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us' }));
  assert.equal(r.stdout, `${300 * 1024 * 1024}\n50000\n`);
  assert.equal(f.backend.poolStats().hits, 1);
  await f.backend.poolReady();
  const [next] = await docker.listContainers({ filters: { label: [`org.sandgate.deployment=${f.deployment}`, 'org.sandgate.kind=pool'] } });
  const info = await docker.getContainer(next!.Id).inspect();
  assert.deepEqual([info.HostConfig.Memory, info.HostConfig.NanoCpus], [300 * 1024 * 1024, 5e8], 'the pool follows the limits runs ask for');
});

test('a pooled run past its timeout or cancelled is killed and its sandbox removed', async (t) => {
  const f = await fixture(t, { poolSize: 1 });
  await f.backend.poolReady();
  const started = performance.now();
  const slow = await f.run(f.job({ code: `${WHOAMI.slice(0, -1)}, flush=True)\nimport time\ntime.sleep(60)`, timeout_ms: 1000 }));
  assert.equal(slow.state, 'timeout');
  assert.equal(slow.exit_code, -1);
  assert.ok(performance.now() - started < 5000);
  await f.backend.poolReady();
  const abort = new AbortController();
  const sink = new RecordingSink((text) => { if (text.includes('ready')) abort.abort(); });
  const cancelled = await f.run(f.job({ code: 'import time\nprint("ready", flush=True)\ntime.sleep(60)' }), sink, abort.signal);
  assert.equal(cancelled.state, 'cancelled');
  assert.deepEqual(sink.phases, ['starting', 'running', 'harvesting']);
  await f.backend.close();
  const left = await docker.listContainers({ all: true, filters: { label: [`org.sandgate.deployment=${f.deployment}`] } });
  assert.deepEqual(left, [], 'close() leaves no sandbox of this instance behind');
  assert.equal(await containerGone(slow.stdout.trim()), true);
});
