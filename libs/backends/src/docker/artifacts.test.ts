import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chown, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { artifactUrl, fixture, RecordingSink, SANDBOX_UID } from '../testing/docker.ts';

const sha256 = async (file: string): Promise<string> =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

test('files a run creates or changes are artifacts with host-verified hashes; untouched ones are not', async (t) => {
  const f = await fixture(t);
  const probe = f.job({ code: 'pass' });
  await f.run(probe); // makes the workspace
  const dir = f.workspaces.dir(probe.session_id);
  for (const name of ['keep.txt', 'edit.txt']) {
    await writeFile(join(dir, name), `${name}\n`);
    await chown(join(dir, name), SANDBOX_UID, SANDBOX_UID);
  }
  const sink = new RecordingSink();
  const job = f.job({
    code: `
import os
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [3, 1, 2])
plt.savefig("chart.png")
with open("data.csv", "w") as fh:
    fh.write("x,y\\n1,3\\n2,1\\n")
os.makedirs("out", exist_ok=True)
with open("out/nested.json", "w") as fh:
    fh.write("{}")
with open("edit.txt", "a") as fh:
    fh.write("more\\n")
`,
  });
  const r = await f.run(job, sink);
  assert.equal(r.state, 'completed', r.stderr);
  assert.deepEqual(
    r.artifacts.map((a) => a.path),
    ['chart.png', 'data.csv', 'edit.txt', 'out/nested.json'],
  );
  assert.deepEqual(sink.artifacts, r.artifacts);
  const mimes = Object.fromEntries(r.artifacts.map((a) => [a.path, a.mime_type]));
  assert.equal(mimes['chart.png'], 'image/png');
  assert.equal(mimes['data.csv'], 'text/csv');
  for (const a of r.artifacts) {
    const file = join(dir, a.path);
    assert.equal(a.sha256, await sha256(file), a.path);
    assert.equal(a.size_bytes, (await stat(file)).size, a.path);
    assert.equal(a.filename, a.path.split('/').at(-1));
    assert.equal(a.download_url, artifactUrl(job.session_id, a.path));
  }
  assert.deepEqual((await readFile(join(dir, 'chart.png'))).subarray(1, 4).toString(), 'PNG');
});

test('symlinks, FIFOs and hard links made in the sandbox are not artifacts', async (t) => {
  const f = await fixture(t);
  const r = await f.run(
    f.job({
      code: `
import os
os.symlink("/etc/passwd", "/mnt/data/x")
os.symlink("/etc", "/mnt/data/etc-dir")
os.mkfifo("/mnt/data/fifo")
with open("/mnt/data/a.txt", "w") as fh:
    fh.write("linked")
os.link("/mnt/data/a.txt", "/mnt/data/b.txt")
with open("/mnt/data/real.txt", "w") as fh:
    fh.write("real")
`,
    }),
  );
  assert.equal(r.state, 'completed', r.stderr);
  assert.deepEqual(
    r.artifacts.map((a) => a.path),
    ['real.txt'],
  );
});

test('a failed run reports no artifacts', async (t) => {
  const f = await fixture(t);
  const sink = new RecordingSink();
  const r = await f.run(f.job({ code: 'open("partial.csv", "w").write("a\\n")\nraise SystemExit(1)' }), sink);
  assert.equal(r.state, 'failed');
  assert.deepEqual(r.artifacts, []);
  assert.deepEqual(sink.artifacts, []);
});
