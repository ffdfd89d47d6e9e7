import { LocalArtifactStore } from '../artifacts/artifact-store.ts';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { chown, open } from 'node:fs/promises';
import { join } from 'node:path';
import { silentLogger } from '../logger.ts';
import { runCold } from './cold-run.ts';
import { containerName } from './container-spec.ts';
import { artifactUrl, containerGone, docker, fixture, IMAGE, RecordingSink, SANDBOX_UID } from '../testing/docker.ts';

test('a cold run has a container of its own, labelled with its deployment and execution, removed afterwards', async (t) => {
  const f = await fixture(t);
  const job = f.job({ code: 'print("up", flush=True)\nopen("gate").readline()' });
  const dir = await f.workspaces.create(job.session_id);
  // The program waits on a FIFO until the test has looked at its container.
  execFileSync('mkfifo', [join(dir, 'gate')]);
  await chown(join(dir, 'gate'), SANDBOX_UID, SANDBOX_UID);
  const gate = await open(join(dir, 'gate'), constants.O_RDWR);
  t.after(() => gate.close());
  let labels: Promise<Record<string, string>> | undefined;
  const sink = new RecordingSink(() => {
    labels = docker
      .getContainer(containerName(job.execution_id))
      .inspect()
      .then((i) => i.Config.Labels);
    void labels.finally(() => gate.write('go\n'));
  });
  const settings = {
    image: IMAGE,
    runtime: undefined,
    user: '1000:1000',
    pidsLimit: 64,
    tmpfsBytes: 8 << 20,
    nofile: 256,
    deployment: f.deployment,
  };
  const r = await runCold(
    { docker, settings, maxOutputBytes: 1000, artifacts: new LocalArtifactStore(artifactUrl), log: silentLogger },
    job,
    dir,
    sink,
    new AbortController().signal,
  );
  assert.equal(r.state, 'completed', r.stderr);
  const seen = await labels;
  assert.deepEqual(
    [seen?.['org.sandgate.kind'], seen?.['org.sandgate.deployment'], seen?.['org.sandgate.execution']],
    ['execution', f.deployment, job.execution_id],
  );
  assert.equal(await containerGone(containerName(job.execution_id)), true);
  assert.deepEqual(sink.phases, ['running', 'harvesting']);
});

test('a one-shot sandbox caps its output at the source: a 100 MB flood sends the worker the cap and one byte', async (t) => {
  const finished: Record<string, unknown>[] = [];
  const logger = {
    ...silentLogger,
    info: (obj: object, msg?: string) => {
      if (msg === 'execution finished') finished.push(obj as Record<string, unknown>);
    },
  };
  const f = await fixture(t, { logger, maxOutputBytes: 1000 });
  const r = await f.run(
    f.job({ language: 'bash', code: 'head -c 100000000 /dev/zero | tr "\\0" x; echo done >&2; exit 3' }),
  );
  assert.deepEqual([r.state, r.exit_code], ['failed', 3]);
  assert.equal(r.stdout, 'x'.repeat(1000));
  assert.equal(r.stdout_truncated, true);
  assert.equal(r.stderr, 'done\n', 'stderr has a cap of its own and ends in full');
  assert.equal(finished.length, 1);
  assert.equal(finished[0]!.outputBytes, 1001 + 5, 'the worker got the cap plus one byte of stdout, and stderr');
});

test('a run that makes a thousand sparse 1 TiB files completes; they are left out of its artifacts, which says so', async (t) => {
  const f = await fixture(t);
  const r = await f.run(
    f.job({
      language: 'bash',
      code: 'for i in $(seq 1000); do truncate -s 1T "sparse-$i"; done; echo ok > small.txt',
    }),
  );
  assert.equal(r.state, 'completed', r.stderr);
  assert.deepEqual(
    r.artifacts.map((a) => a.path),
    ['small.txt'],
  );
  assert.equal(r.artifacts_truncated, true);
});
