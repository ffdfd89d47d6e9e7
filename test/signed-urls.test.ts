import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { readSse } from './sse-client.ts';

const KEY = 'signed-urls-key-0123456789abcdef';

test('download URLs are signed by the gateway when presented; workers hold no signing key', async (t) => {
  const s = await startStack({ apiKey: KEY, env: { SANDGATE_API_KEYS: `${KEY}:acme` } });
  t.after(() => s.close());
  const run = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'open("chart.txt", "w").write("data")',
  });
  assert.equal(run.body.state, 'completed', JSON.stringify(run.body.result));

  // What the worker wrote: the file's plain URL, which only an API key opens.
  const raw = await s.deps.redis.xrange(s.deps.executions.eventsKey(run.body.id), '-', '+');
  const stored = raw.map(([, fields]) => fields.join(' ')).filter((f) => f.includes('chart.txt'));
  assert.ok(stored.length >= 2, 'an artifact event and the result');
  for (const f of stored) assert.doesNotMatch(f, /sig=/, 'no signature is made by the worker');

  // What clients get: signed, so no key is needed, on every path that presents it.
  const urls: string[] = [run.body.result.artifacts[0].download_url];
  await readSse(run.body.links.events, {
    headers: { authorization: `Bearer ${KEY}` },
    onEvent: (ev) => {
      const data = JSON.parse(ev.data);
      if (ev.event === 'artifact') urls.push(data.artifact.download_url);
      if (ev.event === 'result') urls.push(data.result.artifacts[0].download_url);
      return ev.event !== 'result';
    },
  });
  assert.equal(urls.length, 3);
  for (const url of urls) {
    assert.match(url, /\/files\/sess_[0-9a-f]+\/chart\.txt\?expires=\d+&sig=/);
    const res = await fetch(url);
    assert.equal(res.status, 200, url);
    assert.equal(await res.text(), 'data');
  }
  const unsigned = urls[0]!.split('?')[0]!;
  assert.equal((await fetch(unsigned)).status, 401, 'the plain URL needs the key');
  assert.equal((await fetch(unsigned, { headers: { authorization: `Bearer ${KEY}` } })).status, 200);
});
