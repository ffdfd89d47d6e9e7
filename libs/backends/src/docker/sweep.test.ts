import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chown, mkdir, open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { LiveSet } from '../backend.ts';
import { ownershipLabels, poolLabels, sessionLabels } from '../housekeeping/labels.ts';
import {
  containerGone,
  docker,
  fixture,
  IMAGE,
  modeFixture,
  newSessionId,
  RecordingSink,
  removeContainer,
  RUN_MODES,
  SANDBOX_UID,
} from '../testing/docker.ts';

const id = (prefix: string): string => `${prefix}_${randomBytes(8).toString('hex')}`;
const live = (over: Partial<LiveSet> = {}): LiveSet => ({
  executions: new Set(),
  sessions: new Set(),
  workers: new Set(),
  ...over,
});

async function labelled(t: TestContext, labels: Record<string, string>, mount?: string): Promise<string> {
  const c = await docker.createContainer({
    Image: IMAGE,
    Cmd: ['sleep', '60'],
    Labels: labels,
    HostConfig: mount === undefined ? {} : { Mounts: [{ Type: 'bind', Source: mount, Target: '/mnt/data' }] },
  });
  t.after(() => removeContainer(c.id));
  await c.start();
  return c.id;
}

const execution = (deployment: string, executionId: string) =>
  ownershipLabels({ execution_id: executionId, session_id: 'sess_000000000000', tenant: 'test' }, deployment);

test('sweep removes execution containers no live execution owns, in its own deployment only', async (t) => {
  const f = await fixture(t);
  const [keep, dead] = [id('exec'), id('exec')];
  const keepId = await labelled(t, execution(f.deployment, keep));
  const deadId = await labelled(t, execution(f.deployment, dead));
  const otherDeployment = await labelled(t, execution(`${f.deployment}-other`, dead));
  const unmanaged = await docker.createContainer({ Image: IMAGE, Cmd: ['true'] });
  t.after(() => removeContainer(unmanaged.id));
  const { removed } = await f.backend.sweep(live({ executions: new Set([keep]) }));
  assert.deepEqual(removed, [dead]);
  assert.equal(await containerGone(deadId), true);
  assert.equal(await containerGone(keepId), false);
  assert.equal(await containerGone(otherDeployment), false, 'another deployment on the same engine is never touched');
  assert.equal(await containerGone(unmanaged.id), false);
});

test('sweep keeps session sandboxes of live sessions and pool sandboxes of live workers', async (t) => {
  const f = await fixture(t);
  const [liveSession, deadSession] = [newSessionId(), newSessionId()];
  const session = (s: string) => sessionLabels({ session_id: s, tenant: 'test', generation: 0 }, f.deployment, false);
  const liveSessionId = await labelled(t, session(liveSession));
  const deadSessionId = await labelled(t, session(deadSession));
  const slot = join(f.dataDir, 'pool', 'abandoned0001');
  await mkdir(slot, { recursive: true });
  const liveWorkerId = await labelled(t, poolLabels(f.deployment, 'worker-live'));
  const deadWorkerId = await labelled(t, poolLabels(f.deployment, 'worker-dead'), slot);
  const ownPoolId = await labelled(t, poolLabels(f.deployment, f.instanceId));
  const otherDeployment = await labelled(t, poolLabels(`${f.deployment}-other`, 'worker-dead'));

  const { removed } = await f.backend.sweep(
    live({ sessions: new Set([liveSession]), workers: new Set(['worker-live']) }),
  );
  assert.deepEqual(removed.sort(), [deadSession, 'worker-dead'].sort());
  assert.equal(await containerGone(deadSessionId), true);
  assert.equal(await containerGone(deadWorkerId), true);
  await assert.rejects(stat(slot), { code: 'ENOENT' }, "the dead pool sandbox's slot directory goes with it");
  for (const kept of [liveSessionId, liveWorkerId, ownPoolId, otherDeployment])
    assert.equal(await containerGone(kept), false);
});

test("sweep removes a live worker's pool sandbox once it has stopped (an engine restart stops them all)", async (t) => {
  const f = await fixture(t);
  const running = await labelled(t, poolLabels(f.deployment, 'worker-live'));
  const stopped = await labelled(t, poolLabels(f.deployment, 'worker-live'));
  const otherDeployment = await labelled(t, poolLabels(`${f.deployment}-other`, 'worker-other'));
  for (const c of [stopped, otherDeployment]) {
    await docker.getContainer(c).kill();
    await docker.getContainer(c).wait();
  }
  const { removed } = await f.backend.sweep(live({ workers: new Set(['worker-live']) }));
  assert.deepEqual(removed, ['worker-live']);
  assert.equal(await containerGone(stopped), true);
  assert.equal(
    await containerGone(otherDeployment),
    false,
    "another deployment's stopped pool sandbox is its own sweep's",
  );
  assert.equal(await containerGone(running), false, 'a running pool sandbox of a live worker is kept');
});

test('sweep keeps containers younger than its grace period', async (t) => {
  const f = await fixture(t, { sweepGraceMs: 60_000 });
  const young = await labelled(t, execution(f.deployment, id('exec')));
  assert.deepEqual((await f.backend.sweep(live())).removed, []);
  assert.equal(await containerGone(young), false);
});

for (const mode of RUN_MODES) {
  test(`[${mode}] sweep never removes the sandbox of a run in progress here, even when the caller omits it`, async (t) => {
    const f = await modeFixture(t, mode);
    const job = f.job({ code: 'print("up", flush=True)\nopen("gate").readline()\nprint("survived")' });
    // The program blocks on a FIFO the test holds open, so it is surely running while the sweep runs.
    const gate = join(await f.workspaces.create(job.session_id), 'gate');
    execFileSync('mkfifo', [gate]);
    await chown(gate, SANDBOX_UID, SANDBOX_UID);
    const writer = await open(gate, constants.O_RDWR); // O_RDWR: never blocks, and the sandbox's open finds a writer
    t.after(() => writer.close());
    let swept: Promise<{ removed: string[] }> | undefined;
    const sink = new RecordingSink((text) => {
      if (!text.includes('up')) return;
      swept = f.backend.sweep(live());
      void swept.then(() => writer.write('go\n'));
    });
    const r = await f.run(job, sink);
    assert.equal(r.stdout, 'up\nsurvived\n', r.stderr);
    assert.deepEqual((await swept)?.removed, []);
  });
}
