import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { ApiError } from './api.ts';
import { compareEventIds, followEvents, type StreamEvent } from './event-stream.ts';

/*
 * The client side of the SSE protocol, against an HTTP server on loopback that plays the server's part
 * the way a test needs: cut the connection mid-stream, replay events the client already has, refuse.
 * (The browser tests run the same reader against a real gateway.)
 */
const frames = (from: number, to: number) =>
  Array.from(
    { length: to - from },
    (_, k) => `id: 1700000000000-${from + k}\nevent: stdout\ndata: {"text":"${from + k}"}\n\n`,
  ).join('');

async function serve(handler: (attempt: number, lastEventId: string | undefined, res: ServerResponse) => void) {
  let attempt = 0;
  const seen: (string | undefined)[] = [];
  const server = createServer((req, res) => {
    const last = req.headers['last-event-id'] as string | undefined;
    seen.push(last);
    handler(attempt++, last, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/events`;
  return {
    url,
    seen,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(r);
      }),
  };
}

test('ids of one stream order by time, then by sequence', () => {
  assert.ok(compareEventIds('1700000000000-9', '1700000000000-10') < 0);
  assert.ok(compareEventIds('1700000000001-0', '1700000000000-99') > 0);
  assert.equal(compareEventIds('5-5', '5-5'), 0);
});

test('a dropped connection resumes with Last-Event-ID, and replayed events are not delivered twice', async (t) => {
  const s = await serve((attempt, _last, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (attempt === 0) {
      res.write(frames(0, 3), () => res.destroy());
      return;
    } // cut mid-run, once sent
    // The second answer replays from an earlier point than asked: the client must skip what it has.
    res.end(`${frames(1, 6)}id: 1700000000000-6\nevent: result\ndata: {}\n\n`);
  });
  t.after(s.close);
  const got: StreamEvent[] = [];
  const states: string[] = [];
  await followEvents(s.url, {
    headers: () => ({ authorization: 'Bearer k' }),
    after: null,
    signal: new AbortController().signal,
    onEvent: (ev) => got.push(ev),
    onState: (state) => states.push(state),
  });
  assert.deepEqual(
    got.map((e) => (e.event === 'result' ? 'result' : JSON.parse(e.data).text)),
    ['0', '1', '2', '3', '4', '5', 'result'],
  );
  assert.deepEqual(s.seen, [undefined, '1700000000000-2']);
  assert.deepEqual(states, ['connecting', 'open', 'reconnecting', 'open', 'ended']);
});

test('a stream resumed from a kept id starts after it; a refused stream fails at once', async (t) => {
  const s = await serve((attempt, last, res) => {
    if (attempt === 0) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`${frames(Number(last!.split('-')[1]) + 1, 4)}id: 1700000000000-4\nevent: result\ndata: {}\n\n`);
      return;
    }
    res
      .writeHead(404, { 'content-type': 'application/problem+json' })
      .end('{"code":"execution_not_found","detail":"no such run"}');
  });
  t.after(s.close);
  const got: string[] = [];
  await followEvents(s.url, {
    headers: () => ({}),
    after: '1700000000000-1',
    signal: new AbortController().signal,
    onEvent: (e) => got.push(e.id),
  });
  assert.deepEqual(got, ['1700000000000-2', '1700000000000-3', '1700000000000-4']);
  await assert.rejects(
    followEvents(s.url, { headers: () => ({}), after: null, signal: new AbortController().signal, onEvent: () => {} }),
    (err: ApiError) => err instanceof ApiError && err.status === 404 && err.code === 'execution_not_found',
  );
});

test('resuming a stream whose run has ended (204: nothing left) ends at once, without reconnecting', async (t) => {
  const s = await serve((_attempt, _last, res) => res.writeHead(204).end());
  t.after(s.close);
  const states: string[] = [];
  await followEvents(s.url, {
    headers: () => ({}),
    after: '1700000000000-4',
    signal: AbortSignal.timeout(5000),
    onEvent: () => {},
    onState: (state) => states.push(state),
  });
  assert.deepEqual(s.seen, ['1700000000000-4'], 'one request');
  assert.equal(states.at(-1), 'ended');
});
