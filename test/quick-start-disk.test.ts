import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, until } from './harness.ts';

/**
 * One-shots as the quick start runs them: the data directory on btrfs with per-session disk quotas and a warm pool.
 * A pool sandbox serves the tenant's next one-shot with an empty /mnt/data, and every session keeps its own files.
 */
test('on the quick start data disk a pool sandbox serves the tenant again, and every one-shot keeps its own files', async (t) => {
  const s = await startStack({ diskQuotas: true, env: { SANDGATE_POOL_SIZE: '1' } });
  t.after(() => s.close());
  const oneShot = async (code: string) => {
    const r = await s.api('POST', '/v1/executions?wait=60', { language: 'python', code });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.result.state, 'completed', r.body.result.stderr);
    return r.body;
  };
  const LIST = 'import os\nprint(os.uname().nodename, sorted(os.listdir(".")))';
  const pool = async () => (await s.api('GET', '/v1/system/stats')).body.pool;
  await until('a warm pool sandbox', async () => (await pool()).ready >= 1, 60_000);

  const first = await oneShot(`${LIST}\nopen("report.csv", "w").write("a,b\\n1,2\\n")`);
  const [host, before] = first.result.stdout.trim().split(' ');
  assert.equal(before, '[]');
  const second = await oneShot(LIST);
  assert.equal(second.result.stdout.trim(), `${host} []`, "the same sandbox, and nothing of the first run's files");
  const third = await oneShot(LIST);
  assert.equal(third.result.stdout.trim(), `${host} []`);

  // The operator's figures (published with the worker's heartbeat) count the two reuses.
  await until('two pool reuses in the stats', async () => (await pool()).reused === 2, 20_000);
  // The first run's file is its session's, downloadable after the sandbox served two more runs.
  const [artifact] = first.result.artifacts;
  assert.equal(artifact.path, 'report.csv');
  const download = await fetch(artifact.download_url);
  assert.equal(download.status, 200);
  assert.equal(await download.text(), 'a,b\n1,2\n');
  // A session whose one-shot left nothing takes files afterwards, like any other.
  const put = await fetch(`${s.url}/v1/sessions/${second.session_id}/files/later.txt`, {
    method: 'PUT',
    body: 'later',
  });
  assert.equal(put.status, 201, await put.text());
  const listed = await s.api('GET', `/v1/sessions/${second.session_id}/files`);
  assert.deepEqual(
    listed.body.files.map((f: { path: string }) => f.path),
    ['later.txt'],
  );
  const reuse = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python',
    session_id: second.session_id,
    code: 'print(open("later.txt").read())',
  });
  assert.equal(reuse.body.result?.stdout, 'later\n', JSON.stringify(reuse.body));
});
