import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startStack, type Stack } from './harness.ts';

/** A raw connection to the stack: what the server sent, and when (ms after opening) it closed the connection. */
async function open(s: Stack): Promise<{ socket: Socket; received: () => string; closed: Promise<number> }> {
  const { port } = new URL(s.url);
  const socket = connect(Number(port), '127.0.0.1');
  await new Promise<void>((r) => socket.once('connect', r));
  const t0 = Date.now();
  let text = '';
  socket.on('data', (c: Buffer) => {
    text += c.toString('latin1');
  });
  socket.on('error', () => {});
  const closed = new Promise<number>((r) => socket.once('close', () => r(Date.now() - t0)));
  return { socket, received: () => text, closed };
}

/** Writes `chunk` every `everyMs` until the server closes the connection; never past `maxMs`. */
function trickle(socket: Socket, chunk: string, everyMs: number, maxMs: number): void {
  const t0 = Date.now();
  const timer = setInterval(() => {
    if (socket.destroyed || Date.now() - t0 > maxMs) {
      clearInterval(timer);
      return;
    }
    socket.write(chunk);
  }, everyMs);
  socket.once('close', () => clearInterval(timer));
}

test('slow and abusive clients are cut off by timeouts and limits, and the gateway keeps serving', async (t) => {
  const s = await startStack({ worker: false, env: { SANDGATE_REQUEST_TIMEOUT_S: '3' } });
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;

  await t.test('slowloris headers: a header line a second is closed at the 3 s request deadline', async () => {
    const c = await open(s);
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    trickle(c.socket, 'X-Slow: 1\r\n', 1000, 60_000);
    const ms = await c.closed;
    // headersTimeout is min(10 s, request timeout); Node checks deadlines every second.
    assert.ok(ms >= 2500 && ms < 8000, `closed after ${ms} ms`);
    assert.match(c.received(), /^HTTP\/1\.1 408 /);
    assert.match(c.received(), /"code":"request_timeout"/);
  });

  await t.test('a slow upload body is cut at the request deadline and leaves no file', async () => {
    const c = await open(s);
    c.socket.write(
      `PUT /v1/sessions/${session}/files/slow.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n`,
    );
    trickle(c.socket, 'x', 500, 60_000);
    const ms = await c.closed;
    assert.ok(ms >= 2500 && ms < 8000, `closed after ${ms} ms`);
    const list = await s.api('GET', `/v1/sessions/${session}/files`);
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.files.map((f: { path: string }) => f.path),
      [],
    );
  });

  await t.test('a 1 GB Content-Length over the limit is refused before the body is read', async () => {
    for (const [path, method] of [
      [`/v1/sessions/${session}/files/big.bin`, 'PUT'],
      ['/v1/sessions', 'POST'],
    ] as const) {
      const c = await open(s);
      c.socket.write(
        `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n`,
      );
      c.socket.write('{"a":');
      const ms = await c.closed;
      assert.match(c.received(), /^HTTP\/1\.1 413 /, path);
      assert.match(c.received(), /"code":"payload_too_large"/);
      assert.ok(ms < 5000, `${path}: closed after ${ms} ms`);
    }
  });

  await t.test('a body far longer than its Content-Length ends the connection, not the server', async () => {
    const c = await open(s);
    c.socket.write(
      'POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    // What follows is no request at all: 64 MiB of it, written until the server hangs up.
    const junk = Buffer.alloc(1 << 20, 'A');
    let sent = 0;
    while (!c.socket.destroyed && sent < 64 << 20) {
      if (!c.socket.write(junk))
        await new Promise((r) => {
          c.socket.once('drain', r);
          c.socket.once('close', r);
        });
      sent += junk.length;
    }
    const ms = await c.closed;
    assert.match(c.received(), /^HTTP\/1\.1 400 /, 'what follows the body is a bad request');
    assert.match(c.received(), /"code":"bad_request"/);
    assert.ok(sent < 64 << 20 && ms < 5000, `the server hung up after ${sent >> 20} MiB, ${ms} ms`);
  });

  await t.test('deeply nested JSON is a 400 with a code, never a 500', async () => {
    const depth = 150_000;
    for (const body of [
      '['.repeat(depth) + ']'.repeat(depth),
      `{"metadata":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`,
    ]) {
      const r = await s.api('POST', '/v1/sessions', body);
      assert.equal(r.status, 400);
      assert.ok(['validation_failed', 'invalid_json'].includes(r.body.code), r.body.code);
    }
  });

  const healthy = await s.api('GET', '/healthz');
  assert.equal(healthy.status, 200);
});
