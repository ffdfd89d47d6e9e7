import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionJob } from '@sandgate/contracts';
import { SubvolumeQuota, Workspaces } from '@sandgate/storage';
import { containerName } from './container-spec.ts';
import { sessionContainerName } from './agent-spec.ts';
import { DockerBackend } from './docker-backend.ts';
import { artifactUrl, newSessionId, RecordingSink, removeContainer, RUN_MODES, SANDBOX_UID } from './testing.ts';

const QUOTA = 16 * 1024 * 1024;

/**
 * A 512 MiB btrfs filesystem on a loop device with quotas on: what scripts/setup.sh makes the data directory. It goes
 * after `before()` has run (hooks run in the order they are registered): a backend must be closed before its data
 * directory goes, or its warm pool refills into the mount point meanwhile.
 */
async function btrfsDataDir(t: TestContext, before: () => Promise<void>): Promise<string> {
  const base = await mkdtemp(join(tmpdir(), 'sandgate-quota-'));
  const image = join(base, 'data.btrfs');
  const dir = join(base, 'data');
  execFileSync('truncate', ['-s', '512M', image]);
  execFileSync('mkfs.btrfs', ['-q', '-f', image]);
  execFileSync('mkdir', [dir]);
  execFileSync('mount', ['-o', 'loop', image, dir]);
  t.after(async () => {
    await before();
    execFileSync('umount', [dir]);
    await rm(base, { recursive: true, force: true });
  });
  execFileSync('btrfs', ['quota', 'enable', dir]);
  return dir;
}

async function quotaBackend(t: TestContext, poolSize: number) {
  const made: { backend?: DockerBackend } = {};
  const dataDir = await btrfsDataDir(t, async () => {
    await made.backend?.close();
  });
  const quota = await SubvolumeQuota.forDataDir(dataDir, QUOTA);
  assert.ok(quota instanceof SubvolumeQuota, JSON.stringify(quota));
  const workspaces = new Workspaces({ dataDir, owner: { uid: SANDBOX_UID, gid: SANDBOX_UID }, quota });
  const backend = new DockerBackend({
    workspaces,
    artifactUrl,
    deployment: `test-${randomBytes(4).toString('hex')}`,
    poolSize,
    sweepGraceMs: 0,
  });
  made.backend = backend;
  const run = async (o: Partial<ExecutionJob>) => {
    const job: ExecutionJob = {
      execution_id: `exec_${randomBytes(8).toString('hex')}`,
      tenant: 'test',
      session_id: newSessionId(),
      language: 'python',
      code: 'print(1)',
      timeout_ms: 30_000,
      memory_mb: 256,
      cpus: 1,
      env: {},
      stdin: null,
      sandbox: 'oneshot',
      generation: 0,
      ...o,
    };
    t.after(() => removeContainer(containerName(job.execution_id)));
    t.after(() => removeContainer(sessionContainerName(job.session_id)));
    if (poolSize > 0) await backend.poolReady();
    return { job, result: await backend.execute(job, new RecordingSink(), new AbortController().signal) };
  };
  return { dataDir, quota, workspaces, backend, run };
}

const FILL =
  'with open("fill.bin", "wb") as fh:\n    for _ in range(64):\n        fh.write(b"x" * (1 << 20))\n        fh.flush()';

for (const mode of RUN_MODES) {
  test(`[${mode}] a run cannot write past its session's disk quota: it fails with reason disk_quota, nothing else is touched`, async (t) => {
    const q = await quotaBackend(t, mode === 'pooled' ? 1 : 0);
    const sandbox = mode === 'session' ? 'session' : 'oneshot';
    const { job, result } = await q.run({ sandbox, code: FILL });
    assert.equal(result.state, 'failed', result.stderr);
    assert.equal(result.reason, 'disk_quota', `${result.stderr} ${result.message}`);
    assert.match(result.message ?? '', new RegExp(`disk quota of ${QUOTA} bytes`));
    assert.match(result.stderr, /Disk quota exceeded/);
    const dir = q.workspaces.dir(job.session_id);
    const { used, limit } = await q.quota.usage(dir);
    assert.equal(limit, QUOTA);
    assert.ok(used <= QUOTA, `the session holds ${used} bytes, more than its quota`);

    // Another session on the same disk writes as it likes, within its own quota.
    const other = await q.run({ code: 'open("ok.bin", "wb").write(b"y" * (4 << 20))\nprint("written")' });
    assert.equal(other.result.state, 'completed', other.result.stderr);
    assert.equal(other.result.reason, undefined);
    // A run that fails for another reason at a roomy session is not blamed on the quota.
    const plain = await q.run({ code: 'raise SystemExit(3)' });
    assert.deepEqual([plain.result.state, plain.result.reason], ['failed', undefined]);

    await q.workspaces.remove(job.session_id);
    assert.deepEqual((await readdir(join(q.dataDir, 'sessions'))).includes(job.session_id), false);
  });
}
