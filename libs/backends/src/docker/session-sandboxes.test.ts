import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { ExecutionJob } from '@sandgate/contracts';
import { silentLogger } from '../logger.ts';
import { sessionContainerName } from './agent-spec.ts';
import type { SandboxSettings } from './container-spec.ts';
import { SessionSandboxes } from './session-sandboxes.ts';
import { docker, fixture, IMAGE, removeContainer } from '../testing/docker.ts';

async function setup(
  t: TestContext,
): Promise<{ sessions: SessionSandboxes; job: ExecutionJob; dir: string; settings: SandboxSettings; dataDir: string }> {
  const f = await fixture(t);
  const job = f.job({ sandbox: 'session' });
  t.after(() => removeContainer(sessionContainerName(job.session_id)));
  const settings: SandboxSettings = {
    image: IMAGE,
    runtime: undefined,
    user: '1000:1000',
    pidsLimit: 64,
    tmpfsBytes: 8 << 20,
    nofile: 256,
    deployment: f.deployment,
  };
  return {
    sessions: new SessionSandboxes(docker, settings, silentLogger, 30_000, f.workspaces.dataDir),
    job,
    dir: await f.workspaces.create(job.session_id),
    settings,
    dataDir: f.workspaces.dataDir,
  };
}

test('a session sandbox is made on first use, then found by name and reused', async (t) => {
  const { sessions, job, dir } = await setup(t);
  const first = await sessions.acquire(job, dir);
  first.channel.close();
  assert.equal(first.replaces, false, 'a first use replaces nothing');
  const info = await first.container.inspect();
  assert.equal(info.Name, `/${sessionContainerName(job.session_id)}`);
  assert.equal(info.Config.Labels['org.sandgate.replaces'], undefined);
  // Another worker (another instance) finds the same sandbox by its name.
  const elsewhere = await setup(t);
  const other = new SessionSandboxes(docker, elsewhere.settings, silentLogger, 30_000, elsewhere.dataDir);
  const again = await other.acquire({ ...job }, dir).catch((e: unknown) => e);
  assert.ok(again instanceof Error, 'a sandbox of another deployment is never used');
  const same = await sessions.acquire(job, dir);
  same.channel.close();
  assert.equal((await same.container.inspect()).Id, info.Id);
});

test('a sandbox that vanished after this worker saw it, or had to be replaced, marks its first interpreter as a restart', async (t) => {
  const { sessions, job, dir } = await setup(t);
  const first = await sessions.acquire(job, dir);
  first.channel.close();
  await first.container.remove({ force: true });
  const second = await sessions.acquire(job, dir);
  second.channel.close();
  assert.equal(second.replaces, true);
  assert.equal((await second.container.inspect()).Config.Labels['org.sandgate.replaces'], 'true');
  // Forgotten (the session left the live set), it would count as a first use again.
  sessions.forget(new Set());
  await second.container.remove({ force: true });
  const third = await sessions.acquire(job, dir);
  third.channel.close();
  assert.equal(third.replaces, false);
});

test('a stopped sandbox is replaced; kill leaves it stopped for the next run to find', async (t) => {
  const { sessions, job, dir } = await setup(t);
  const first = await sessions.acquire(job, dir);
  first.channel.close();
  await sessions.kill(first);
  assert.equal((await first.container.inspect()).State.Running, false);
  await sessions.kill(first); // not running: fine
  const next = await sessions.acquire(job, dir);
  next.channel.close();
  assert.notEqual(
    (await next.container.inspect()).Id,
    (await first.container.inspect().catch(() => ({ Id: 'gone' }))).Id,
  );
  assert.equal(next.replaces, true);
});
