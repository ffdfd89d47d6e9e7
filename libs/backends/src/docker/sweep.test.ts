import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chown, open } from 'node:fs/promises';
import { join } from 'node:path';
import { executionOf, MANAGED_SELECTOR, ownershipLabels } from '../shared/labels.ts';
import { containerGone, docker, fixture, IMAGE, RecordingSink, removeContainer, SANDBOX_UID } from './testing.ts';

async function labelled(t: TestContext, executionId: string): Promise<string> {
  const labels = ownershipLabels({ execution_id: executionId, session_id: 'sess_000000000000', tenant: 'test' });
  const c = await docker.createContainer({ Image: IMAGE, Cmd: ['sleep', '60'], Labels: labels });
  t.after(() => removeContainer(c.id));
  await c.start();
  return c.id;
}

/**
 * The engine is shared with other test suites: every other execution sandgate owns right now counts as
 * live, so a sweep here can only remove what this test means it to.
 */
async function everyoneElse(except: string): Promise<string[]> {
  const managed = await docker.listContainers({ all: true, filters: { label: [MANAGED_SELECTOR] } });
  return managed.map((c) => executionOf(c.Labels)).filter((id): id is string => id !== undefined && id !== except);
}

test('sweep removes managed containers of executions that are not live and keeps the live ones', async (t) => {
  const f = await fixture(t);
  const live = `exec_${randomBytes(8).toString('hex')}`;
  const dead = `exec_${randomBytes(8).toString('hex')}`;
  const liveId = await labelled(t, live);
  const deadId = await labelled(t, dead);
  const unmanaged = await docker.createContainer({ Image: IMAGE, Cmd: ['true'] });
  t.after(() => removeContainer(unmanaged.id));
  const { removed } = await f.backend.sweep(new Set([live, ...(await everyoneElse(dead))]));
  assert.deepEqual(removed, [dead]);
  assert.equal(await containerGone(deadId), true);
  assert.equal(await containerGone(liveId), false);
  assert.equal(await containerGone(unmanaged.id), false);
});

test('sweep never removes an execution running in this backend, even when the caller omits it', async (t) => {
  const f = await fixture(t);
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
    swept = everyoneElse(job.execution_id).then((others) => f.backend.sweep(new Set(others)));
    void swept.then(() => writer.write('go\n'));
  });
  const r = await f.run(job, sink);
  assert.equal(r.stdout, 'up\nsurvived\n', r.stderr);
  assert.deepEqual((await swept)?.removed, []);
});
