import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstat, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionJob } from '@sandgate/contracts';
import { SubvolumeQuota, Workspaces } from '@sandgate/storage';
import { containerName } from './container-spec.ts';
import { sessionContainerName } from './agent-spec.ts';
import { DockerBackend } from './docker-backend.ts';
import {
  artifactUrl,
  newSessionId,
  RecordingSink,
  removeContainer,
  RUN_MODES,
  SANDBOX_UID,
} from '../testing/docker.ts';

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

test('[pooled] under disk quotas a pool sandbox serves its tenant again: each session keeps its files, within its quota', async (t) => {
  const q = await quotaBackend(t, 1);
  const WRITE =
    'import os\nos.makedirs("d", exist_ok=True)\nopen("d/one.txt", "w").write("one")\n' +
    'os.symlink("/etc/passwd", "link")\nprint(os.uname().nodename, sorted(os.listdir(".")))';
  const first = await q.run({ code: WRITE });
  assert.equal(first.result.state, 'completed', first.result.stderr);
  const [host] = first.result.stdout.split(' ');
  assert.deepEqual(
    first.result.artifacts.map((a) => a.path),
    ['d/one.txt'],
  );

  // The next one-shot of the tenant: the same sandbox, an empty /mnt/data of its own.
  const second = await q.run({
    code: 'import os\nprint(os.uname().nodename, sorted(os.listdir(".")))\nopen("two.txt", "w").write("two")',
  });
  assert.equal(second.result.state, 'completed', second.result.stderr);
  assert.equal(second.result.stdout.trim(), `${host} []`, 'served by the recycled sandbox, which held nothing');
  assert.equal(q.backend.poolStats().reused, 1);

  // Each session has its own files, in a subvolume limited to the quota; the symlink was kept, not followed.
  const firstDir = q.workspaces.dir(first.job.session_id);
  assert.deepEqual((await readdir(firstDir)).sort(), ['d', 'link']);
  assert.equal(await readFile(join(firstDir, 'd/one.txt'), 'utf8'), 'one');
  assert.equal(await readlink(join(firstDir, 'link')), '/etc/passwd');
  assert.equal((await lstat(firstDir)).uid, SANDBOX_UID);
  assert.deepEqual(await readdir(q.workspaces.dir(second.job.session_id)), ['two.txt']);
  assert.equal((await q.quota.usage(firstDir)).limit, QUOTA);
  assert.equal((await q.quota.usage(q.workspaces.dir(second.job.session_id))).limit, QUOTA);

  // A one-shot that leaves nothing: its session has no files, and gets a limited directory when one is needed.
  const third = await q.run({ code: 'print(len(__import__("os").listdir(".")))' });
  assert.deepEqual([third.result.state, third.result.stdout], ['completed', '0\n'], third.result.stderr);
  assert.equal(await q.workspaces.usedBytes(third.job.session_id), 0);
  const thirdDir = await q.workspaces.create(third.job.session_id);
  assert.deepEqual(await readdir(thirdDir), []);
  assert.equal((await q.quota.usage(thirdDir)).limit, QUOTA);
  assert.equal(q.backend.poolStats().reused, 2);

  // The first session, run again (cold now: it has files), still cannot pass its quota.
  const full = await q.run({ session_id: first.job.session_id, code: FILL });
  assert.deepEqual([full.result.state, full.result.reason], ['failed', 'disk_quota'], full.result.stderr);
  assert.equal(await readFile(join(firstDir, 'd/one.txt'), 'utf8'), 'one');
});

test('a limited subvolume is a ready blank renamed into place; an existing one is never replaced; an empty one is recycled', async (t) => {
  const made: { quota?: SubvolumeQuota } = {};
  const dataDir = await btrfsDataDir(t, async () => {
    await made.quota?.settled();
  });
  const quota = await SubvolumeQuota.forDataDir(dataDir, QUOTA);
  assert.ok(quota instanceof SubvolumeQuota, JSON.stringify(quota));
  made.quota = quota;
  const blanks = async () => (await readdir(join(dataDir, 'blanks'))).filter((n) => n.startsWith(`${QUOTA}-`));
  const a = join(dataDir, 'a');
  const b = join(dataDir, 'b');

  await quota.create(a);
  await quota.settled();
  assert.equal((await blanks()).length, 4, 'spare blanks are made after the first');
  const ready = await blanks();
  await quota.create(b);
  const left = await blanks();
  assert.ok(
    ready.some((name) => !left.includes(name)),
    'b is one of the blanks that were ready',
  );
  for (const dir of [a, b]) assert.equal((await quota.usage(dir)).limit, QUOTA);

  // Another process making the same directory at once: its rename fails, nothing of the first is lost.
  await writeFile(join(a, 'kept.txt'), 'kept');
  await quota.settled();
  await assert.rejects(quota.create(a));
  assert.equal(await readFile(join(a, 'kept.txt'), 'utf8'), 'kept');
  // Only an empty subvolume is recycled; one with files stays where it is.
  await assert.rejects(quota.recycle(a), /not empty/);
  assert.deepEqual(await readdir(a), ['kept.txt']);
  await quota.settled();
  await quota.recycle(b);
  await assert.rejects(lstat(b), { code: 'ENOENT' });
});
