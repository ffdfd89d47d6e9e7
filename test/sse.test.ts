import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { readSse, type SseEvent } from './sse-client.ts';
import { noopBackend } from './noop-backend.ts';

const stdoutOf = (evs: SseEvent[]) =>
  evs
    .filter((e) => e.event === 'stdout')
    .map((e) => JSON.parse(e.data).text as string)
    .join('');

test('SSE: a client that drops after line 20 resumes with Last-Event-ID and gets every remaining event exactly once', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const code = 'import time\nfor i in range(1, 51):\n    print(f"line {i}")\n    time.sleep(0.06)\n';
  const created = await s.api('POST', '/v1/executions', { language: 'python', code });
  assert.equal(created.status, 202);
  assert.equal(created.body.state, 'queued');
  const eventsUrl = created.body.links.events as string;

  const first = await readSse(eventsUrl, {
    onEvent: (ev) => !(ev.event === 'stdout' && /line 20\n/.test(JSON.parse(ev.data).text)),
  });
  assert.equal(first.status, 200);
  assert.match(first.contentType ?? '', /^text\/event-stream/);
  assert.ok(
    first.events.every((e) => e.id),
    'every event carries an id',
  );
  assert.deepEqual(
    first.events.filter((e) => e.event === 'phase').map((e) => JSON.parse(e.data).phase),
    ['queued', 'starting', 'running'],
  );
  assert.ok(!first.events.some((e) => e.event === 'result'), 'disconnected before the end');

  const lastId = first.events.at(-1)!.id!;
  const rest = await readSse(eventsUrl, { headers: { 'last-event-id': lastId } });
  assert.equal(rest.events.at(-1)!.event, 'result', 'the stream ends with the result');
  const ids = [...first.events, ...rest.events].map((e) => e.id);
  assert.equal(new Set(ids).size, ids.length, 'no event is delivered twice');

  const expected = Array.from({ length: 50 }, (_, i) => `line ${i + 1}\n`).join('');
  assert.equal(stdoutOf(first.events) + stdoutOf(rest.events), expected, 'every line exactly once, in order');
  const result = JSON.parse(rest.events.at(-1)!.data).result;
  assert.equal(result.state, 'completed');
  assert.equal(result.stdout, expected);
  assert.deepEqual(
    rest.events.filter((e) => e.event === 'phase').map((e) => JSON.parse(e.data).phase),
    ['harvesting', 'done'],
  );

  // A late subscriber replays the whole finished stream, and ?last_event_id= works where headers can't be set.
  const replay = await readSse(eventsUrl);
  assert.deepEqual(
    replay.events.map((e) => e.id),
    ids,
  );
  const tail = await readSse(`${eventsUrl}?last_event_id=${encodeURIComponent(lastId)}`);
  assert.deepEqual(
    tail.events.map((e) => e.id),
    rest.events.map((e) => e.id),
  );

  const bad = await s.api('GET', `/v1/executions/${created.body.id}/events`, undefined, {
    'last-event-id': 'nonsense',
  });
  assert.equal(bad.status, 400);
});

test('SSE: many subscribers on one execution all receive every event', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const created = await s.api('POST', '/v1/executions', {
    language: 'python',
    code: 'import time\nfor i in range(10):\n    print(i)\n    time.sleep(0.05)\n',
  });
  const readers = Array.from({ length: 50 }, () => readSse(created.body.links.events));
  const all = await Promise.all(readers);
  const reference = all[0]!.events.map((e) => e.id);
  assert.equal(all[0]!.events.at(-1)!.event, 'result');
  for (const r of all)
    assert.deepEqual(
      r.events.map((e) => e.id),
      reference,
    );
  assert.equal(stdoutOf(all[0]!.events), Array.from({ length: 10 }, (_, i) => `${i}\n`).join(''));
});

test('SSE: resuming an ended run after its result answers 204 at once, so an EventSource stops reconnecting', async (t) => {
  const s = await startStack({ worker: noopBackend });
  t.after(() => s.close());
  const run = await s.api('POST', '/v1/executions?wait=30', { language: 'python', code: 'print(1)' });
  assert.equal(run.status, 200);
  const url = run.body.links.events as string;
  const all = (await readSse(url)).events;
  const [done, result] = all.slice(-2);
  assert.equal(result!.event, 'result');

  // What every EventSource sends ~2 s after the stream closed: it must not be held open with heartbeats.
  const again = await fetch(url, { headers: { 'last-event-id': result!.id! }, signal: AbortSignal.timeout(5000) });
  assert.equal(again.status, 204);
  assert.equal(await again.text(), '');
  const byQuery = await fetch(`${url}?last_event_id=${result!.id}`, { signal: AbortSignal.timeout(5000) });
  assert.equal(byQuery.status, 204);
  // Resuming just before the end still gets what is left, then the stream ends.
  const rest = await readSse(url, { headers: { 'last-event-id': done!.id! } });
  assert.deepEqual(
    rest.events.map((e) => e.event),
    ['result'],
  );
});
