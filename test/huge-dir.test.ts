import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startStack } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

test('a session directory of 150,000 files is listed a page at a time, bounded, while the gateway keeps answering', async (t) => {
  const s = await startStack({ worker: noopBackend });
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const dir = s.deps.workspaces.dir(session);
  // Made on disk directly, as a run would (creating them through the API would take minutes).
  execFileSync('python3', [
    '-c',
    `
import os
os.chdir(${JSON.stringify(dir)})
for i in range(150_000):
    os.close(os.open("f%06d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
`,
  ]);
  const rssBefore = process.memoryUsage().rss;
  let answered = 0;
  let polling = true;
  const poll = (async () => {
    while (polling) {
      assert.equal((await s.api('GET', '/healthz')).status, 200);
      answered++;
    }
  })();
  const first = await s.api('GET', `/v1/sessions/${session}/files?limit=1000`);
  const second = await s.api(
    'GET',
    `/v1/sessions/${session}/files?limit=1000&cursor=${encodeURIComponent(first.body.next_cursor)}`,
  );
  polling = false;
  await poll;
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.equal(second.status, 200, JSON.stringify(second.body));
  assert.equal(first.body.files.length, 1000);
  assert.notEqual(first.body.next_cursor, null);
  assert.equal(second.body.files.length, 1000);
  assert.ok(second.body.files[0].path > first.body.files.at(-1).path, 'the second page goes on after the first');
  assert.ok(answered > 0, 'health probes were answered while the listing ran');
  const growth = process.memoryUsage().rss - rssBefore;
  assert.ok(growth < 256 * 1024 * 1024, `listing grew the gateway by ${growth} bytes`);
});
