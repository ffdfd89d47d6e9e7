import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chown, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sessionContainerName } from './agent-spec.ts';
import { docker, fixture, killAgentOf, RecordingSink, SANDBOX_UID } from '../testing/docker.ts';

/** The container a run happened in, and when its PID 1 started: both stay the same while a sandbox is reused. */
const WHOAMI =
  'import re\ncg = re.search(r"[0-9a-f]{64}", open("/proc/self/cgroup").read()).group(0)\nprint(cg, open("/proc/1/stat").read().split()[21])';

test('two executions of a session reuse one sandbox and its attach, labelled for its session', async (t) => {
  const f = await fixture(t);
  const first = await f.run(f.job({ sandbox: 'session', code: WHOAMI }));
  const afterFirstNs = BigInt(Date.now()) * 1_000_000n;
  const since = Math.floor(Date.now() / 1000) - 1;
  const second = await f.run(f.job({ sandbox: 'session', code: WHOAMI }));
  const events = await docker.getEvents({
    since,
    until: Math.ceil(Date.now() / 1000) + 1,
    filters: { container: [first.stdout.split(' ')[0]!], event: ['attach'] },
  });
  let attaches = '';
  for await (const chunk of events as NodeJS.ReadableStream) attaches += chunk.toString();
  const later = attaches
    .split('\n')
    .filter(Boolean)
    .filter((line) => BigInt((JSON.parse(line) as { timeNano: number | string }).timeNano) > afterFirstNs);
  assert.deepEqual(later, [], "the second run attaches no more: the first run's attach is kept");
  assert.equal(first.state, 'completed', first.stderr);
  assert.equal(second.stdout, first.stdout, 'same container, same PID 1');
  const info = await docker.getContainer(sessionContainerName(f.job().session_id)).inspect();
  assert.equal(info.Id, first.stdout.split(' ')[0]);
  assert.equal(info.State.Running, true, 'the sandbox outlives its runs');
  assert.deepEqual(
    [
      info.Config.Labels['org.sandgate.kind'],
      info.Config.Labels['org.sandgate.session'],
      info.Config.Labels['org.sandgate.deployment'],
      info.Config.Labels['org.sandgate.generation'],
      info.Config.Labels['org.sandgate.tenant'],
    ],
    ['session', f.job().session_id, f.deployment, '0', 'test'],
  );
});

test("a session sandbox removed or stopped behind sandgate's back is recreated, with the session's files", async (t) => {
  const f = await fixture(t);
  const made = await f.run(f.job({ sandbox: 'session', code: `open("kept.txt", "w").write("kept")\n${WHOAMI}` }));
  assert.deepEqual(
    made.artifacts.map((a) => a.path),
    ['kept.txt'],
  );
  const name = sessionContainerName(f.job().session_id);
  await docker.getContainer(name).remove({ force: true });
  const afterRemove = await f.run(f.job({ sandbox: 'session', code: `print(open("kept.txt").read())\n${WHOAMI}` }));
  assert.equal(afterRemove.state, 'completed', afterRemove.stderr);
  assert.equal(afterRemove.stdout.split('\n')[0], 'kept');
  assert.notEqual(afterRemove.stdout.split('\n')[1], made.stdout.trim());
  await docker.getContainer(name).kill();
  const afterKill = await f.run(f.job({ sandbox: 'session', code: 'print(open("kept.txt").read())' }));
  assert.equal(afterKill.stdout, 'kept\n');
});

test('a newer generation or other limits get a sandbox that fits: replaced, or resized in place', async (t) => {
  const f = await fixture(t);
  const limit = 'print(open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read().strip())';
  const g0 = await f.run(f.job({ sandbox: 'session', code: WHOAMI }));
  const resized = await f.run(f.job({ sandbox: 'session', code: `${WHOAMI}\n${limit}`, memory_mb: 300 }));
  assert.equal(resized.stdout.split('\n')[0], g0.stdout.trim(), 'resized in place');
  assert.equal(resized.stdout.split('\n')[1], String(300 * 1024 * 1024));
  const g1 = await f.run(f.job({ sandbox: 'session', code: WHOAMI, generation: 1 }));
  assert.notEqual(g1.stdout, g0.stdout, 'a restart gets a new sandbox');
  const info = await docker.getContainer(sessionContainerName(f.job().session_id)).inspect();
  assert.equal(info.Config.Labels['org.sandgate.generation'], '1');
  const stale = await f.run(f.job({ sandbox: 'session', code: WHOAMI, generation: 0 }));
  assert.equal(stale.stdout, g1.stdout, 'an older job does not undo the restart');
});

test('a session run past its timeout is stopped and the sandbox lives on', async (t) => {
  const f = await fixture(t);
  const before = await f.run(f.job({ sandbox: 'session', code: WHOAMI }));
  const started = performance.now();
  const slow = await f.run(
    f.job({ sandbox: 'session', language: 'bash', code: 'echo up; sleep 60', timeout_ms: 1000 }),
  );
  assert.equal(slow.state, 'timeout');
  assert.equal(slow.exit_code, -1);
  assert.equal(slow.stdout, 'up\n');
  assert.ok(performance.now() - started < 4000);
  assert.equal((await f.run(f.job({ sandbox: 'session', code: WHOAMI }))).stdout, before.stdout);
});

test('a session sandbox that dies mid-run is reported, and the next run gets a fresh one', async (t) => {
  const f = await fixture(t);
  const dir = await f.workspaces.create(f.job().session_id);
  await writeFile(join(dir, 'data.csv'), 'a\n');
  await chown(join(dir, 'data.csv'), SANDBOX_UID, SANDBOX_UID);
  // The agent dies mid-run (killed from outside: a run cannot, it is another uid), which ends the sandbox.
  const job = f.job({ sandbox: 'session', language: 'bash', code: 'echo before; sleep 30' });
  const sink = new RecordingSink((text) => {
    if (text.includes('before')) void killAgentOf(docker.getContainer(sessionContainerName(job.session_id)));
  });
  const died = await f.run(job, sink);
  assert.equal(died.state, 'failed');
  assert.match(died.message ?? '', /session sandbox died during this run/);
  const next = await f.run(f.job({ sandbox: 'session', language: 'bash', code: 'cat data.csv' }));
  assert.equal(next.stdout, 'a\n');
});

test('a program killed for memory is reported as oom; the session sandbox and its agent live on', async (t) => {
  const f = await fixture(t);
  const before = await f.run(f.job({ sandbox: 'session', code: WHOAMI, memory_mb: 128 }));
  const bomb = await f.run(
    f.job({
      sandbox: 'session',
      code: 'chunks = []\nwhile True:\n    chunks.append(b"\\x01" * (1 << 20))',
      memory_mb: 128,
    }),
  );
  assert.deepEqual([bomb.state, bomb.reason, bomb.exit_code], ['failed', 'oom', 137]);
  assert.equal((await f.run(f.job({ sandbox: 'session', code: WHOAMI, memory_mb: 128 }))).stdout, before.stdout);
});
