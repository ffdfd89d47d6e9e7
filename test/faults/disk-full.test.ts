import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, open, rm, statfs, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { api, startDeployment } from './processes.ts';

const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex');

/** A 64 MiB ext4 filesystem on a loop device, with no blocks reserved for root (the gateway runs as root here). */
async function smallDisk(): Promise<{ dir: string; unmount(): Promise<void> }> {
  const base = await mkdtemp(join(tmpdir(), 'sandgate-disk-'));
  const image = join(base, 'disk.img');
  const dir = join(base, 'data');
  execFileSync('truncate', ['-s', '64M', image]);
  execFileSync('mkfs.ext4', ['-q', '-m', '0', image]);
  execFileSync('mkdir', [dir]);
  execFileSync('mount', ['-o', 'loop', image, dir]);
  return {
    dir,
    async unmount() {
      execFileSync('umount', [dir]);
      await rm(base, { recursive: true, force: true });
    },
  };
}

/** Writes a filler file until the filesystem is full; answers its path. */
async function fill(dir: string): Promise<string> {
  const path = join(dir, 'filler');
  const f = await open(path, 'w');
  const chunk = Buffer.alloc(1 << 20);
  try {
    for (;;) await f.write(chunk);
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC');
  } finally {
    await f.close().catch(() => {});
  }
  // The last blocks, one small write at a time.
  const g = await open(path, 'a');
  try {
    for (;;) await g.write(Buffer.alloc(4096));
  } catch {
    /* full */
  } finally {
    await g.close().catch(() => {});
  }
  return path;
}

test('data disk full: uploads and runs fail with a clear code, existing files stay intact, service recovers', async (t) => {
  const disk = await smallDisk();
  t.after(() => disk.unmount());
  // The free-space floor (SANDGATE_MIN_FREE_BYTES) is low enough for this small disk to start with.
  const { gateway } = await startDeployment(t, { SANDGATE_DATA_DIR: disk.dir, SANDGATE_MIN_FREE_BYTES: '1MB' });

  const session = (await api(gateway.url, 'POST', '/v1/sessions', {})).body.id as string;
  const kept = randomBytes(256 << 10);
  const put = await fetch(`${gateway.url}/v1/sessions/${session}/files/kept.bin`, { method: 'PUT', body: kept });
  assert.equal(put.status, 201);
  const filler = await fill(disk.dir);
  assert.ok((await statfs(disk.dir)).bavail * (await statfs(disk.dir)).bsize < 64 << 10, 'the disk is full');

  const upload = await fetch(`${gateway.url}/v1/sessions/${session}/files/new.bin`, {
    method: 'PUT',
    body: randomBytes(1 << 20),
  });
  assert.equal(upload.status, 507);
  const problem = (await upload.json()) as { code: string };
  assert.equal(problem.code, 'insufficient_storage');

  const inline = await api(gateway.url, 'POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'print(1)',
    files: [{ path: 'in.bin', content_base64: randomBytes(1 << 20).toString('base64') }],
  });
  assert.equal(inline.status, 507, JSON.stringify(inline.body));
  assert.equal(inline.body.code, 'insufficient_storage');

  const run = await api(gateway.url, 'POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'open("out.bin", "wb").write(b"x" * 2**20)',
  });
  if (run.status === 507) {
    // Refused up front by the data directory's free-space check.
    assert.equal(run.body.code, 'insufficient_storage');
  } else {
    assert.equal(run.body.state, 'failed', JSON.stringify(run.body.result));
    assert.match(run.body.result.stderr, /No space left on device/);
  }

  const list = await api(gateway.url, 'GET', `/v1/sessions/${session}/files`);
  assert.deepEqual(
    list.body.files.map((f: { path: string }) => f.path).filter((p: string) => p !== 'out.bin'),
    ['kept.bin'],
    'no partial upload left',
  );
  const download = Buffer.from(await (await fetch(`${gateway.url}/files/${session}/kept.bin`)).arrayBuffer());
  assert.equal(sha(download), sha(kept), 'the file from before is intact');

  await unlink(filler);
  const again = await fetch(`${gateway.url}/v1/sessions/${session}/files/new.bin`, {
    method: 'PUT',
    body: randomBytes(1 << 20),
  });
  assert.equal(again.status, 201, 'uploads work again once there is space');
  const ok = await api(gateway.url, 'POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'open("out.bin", "wb").write(b"x" * 2**20)\nprint("written")',
  });
  assert.deepEqual([ok.body.state, ok.body.result?.stdout], ['completed', 'written\n']);
});
