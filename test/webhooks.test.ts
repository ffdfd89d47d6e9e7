import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { startWebhookDispatcher } from '@sandgate/gateway';
import { startStack, until, type Stack } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on loopback that answers with the statuses given, in turn (the last one thereafter). */
async function receiver(statuses: (number | 'hang')[]) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req
      .setEncoding('utf8')
      .on('data', (c: string) => {
        body += c;
      })
      .on('end', () => {
        received.push({ headers: req.headers, body });
        const status = statuses[Math.min(received.length - 1, statuses.length - 1)]!;
        if (status !== 'hang') res.writeHead(status).end();
      });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const KEY = 'webhook-tenant-key-0123456789';
const env = (extra: Record<string, string> = {}) => ({
  SANDGATE_API_KEYS: `${KEY}:tenantA`,
  SANDGATE_WEBHOOK_ALLOW: '127.0.0.1',
  SANDGATE_WEBHOOK_BACKOFF_MS: '100',
  SANDGATE_WEBHOOK_ATTEMPTS: '4',
  SANDGATE_WEBHOOK_TIMEOUT_S: '2',
  ...extra,
});
const webhookOf = async (s: Stack, id: string) => (await s.api('GET', `/v1/executions/${id}`)).body.webhook;
const ended = (s: Stack, id: string) =>
  until(`the webhook of ${id} to settle`, async () => {
    const w = await webhookOf(s, id);
    return w.state !== 'pending' && w;
  });

test('webhooks: the ended execution is POSTed to callback_url, signed, retried with backoff, recorded', async (t) => {
  const s = await startStack({ worker: noopBackend, apiKey: KEY, env: env() });
  t.after(() => s.close());

  await t.test(
    "delivered once, signed with the tenant's Standard Webhooks secret, the body as GET answers it",
    async () => {
      const hook = await receiver([200]);
      t.after(() => hook.close());
      const run = await s.api('POST', '/v1/executions?wait=30', {
        language: 'python',
        code: 'print(1)',
        callback_url: hook.url,
      });
      assert.equal(run.status, 200);
      assert.equal(run.body.callback_url, hook.url);
      const status = await ended(s, run.body.id);
      assert.equal(status.state, 'delivered');
      assert.equal(status.attempts.length, 1);
      assert.equal(status.attempts[0].status_code, 200);
      assert.equal(hook.received.length, 1);
      const [got] = hook.received;
      const { secret } = (await s.api('GET', '/v1/webhook-secret')).body;
      const verified = new Webhook(secret).verify(got!.body, got!.headers as Record<string, string>) as Record<
        string,
        any
      >;
      assert.equal(got!.headers['webhook-id'], run.body.id);
      assert.equal(verified.id, run.body.id);
      assert.equal(verified.state, 'completed');
      assert.deepEqual(verified.result, run.body.result);
      assert.throws(
        () => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(got!.body, got!.headers as never),
        'another secret does not verify it',
      );
      assert.throws(
        () => new Webhook(secret).verify(got!.body.replace('completed', 'failed'), got!.headers as never),
        'a changed body does not verify',
      );
    },
  );

  await t.test('a receiver failing twice gets a third attempt; every attempt is on the execution', async () => {
    const hook = await receiver([503, 500, 204]);
    t.after(() => hook.close());
    const run = await s.api('POST', '/v1/executions?wait=30', {
      language: 'python',
      code: 'print(1)',
      callback_url: hook.url,
    });
    const status = await ended(s, run.body.id);
    assert.equal(status.state, 'delivered');
    assert.deepEqual(
      status.attempts.map((a: { status_code: number }) => a.status_code),
      [503, 500, 204],
    );
    assert.match(status.attempts[0].error, /503/);
    const times = status.attempts.map((a: { at: string }) => Date.parse(a.at));
    assert.ok(times[1] - times[0] >= 100 && times[2] - times[1] >= 200, `exponential backoff from 100 ms: ${times}`);
  });

  await t.test('retries stop after SANDGATE_WEBHOOK_ATTEMPTS; a 4xx is not retried', async () => {
    const down = await receiver([503]);
    const gone = await receiver([410]);
    t.after(() => Promise.all([down.close(), gone.close()]));
    const a = await s.api('POST', '/v1/executions?wait=30', {
      language: 'python',
      code: 'print(1)',
      callback_url: down.url,
    });
    const b = await s.api('POST', '/v1/executions?wait=30', {
      language: 'python',
      code: 'print(1)',
      callback_url: gone.url,
    });
    const [sa, sb] = await Promise.all([ended(s, a.body.id), ended(s, b.body.id)]);
    assert.equal(sa.state, 'failed');
    assert.equal(sa.attempts.length, 4);
    assert.equal(sb.state, 'failed');
    assert.equal(sb.attempts.length, 1);
    assert.equal(gone.received.length, 1);
  });

  await t.test('a receiver that never answers does not delay the result', async () => {
    const hook = await receiver(['hang']);
    t.after(() => hook.close());
    const t0 = Date.now();
    const run = await s.api('POST', '/v1/executions?wait=30', {
      language: 'python',
      code: 'print(1)',
      callback_url: hook.url,
    });
    assert.equal(run.status, 200);
    assert.equal(run.body.state, 'completed');
    await until('the receiver to be called', async () => hook.received.length > 0);
    assert.equal(
      (await webhookOf(s, run.body.id)).state,
      'pending',
      'still pending while the receiver holds the request',
    );
    assert.ok(Date.now() - t0 < 10_000);
  });
});

test('webhooks: only to allowed hosts, and only to allowed addresses after DNS resolution', async (t) => {
  const s = await startStack({
    worker: noopBackend,
    apiKey: KEY,
    env: env({ SANDGATE_WEBHOOK_ALLOW: 'localhost,hooks.example.com' }),
  });
  t.after(() => s.close());
  const hook = await receiver([200]);
  t.after(() => hook.close());
  for (const url of [
    'http://10.0.0.1/hook',
    `http://127.0.0.1:${hook.port}/hook`,
    'http://169.254.169.254/latest',
    'http://user:pw@hooks.example.com/x',
    'http://evil.example.org/x',
  ]) {
    const r = await s.api('POST', '/v1/executions', { language: 'python', code: 'print(1)', callback_url: url });
    assert.equal(r.status, 400, url);
    assert.equal(r.body.code, 'webhook_not_allowed', url);
  }
  const ftp = await s.api('POST', '/v1/executions', {
    language: 'python',
    code: 'print(1)',
    callback_url: 'ftp://hooks.example.com/x',
  });
  assert.equal(ftp.body.code, 'validation_failed', 'the document says http(s) only');
  // `localhost` is a listed name, but it resolves to loopback, which is not listed: refused at delivery, never sent.
  const run = await s.api('POST', '/v1/executions?wait=30', {
    language: 'python',
    code: 'print(1)',
    callback_url: `http://localhost:${hook.port}/hook`,
  });
  assert.equal(run.status, 200);
  const status = await ended(s, run.body.id);
  assert.equal(status.state, 'failed');
  assert.equal(status.attempts.length, 1, 'not retried');
  assert.match(status.attempts[0].error, /loopback/);
  assert.equal(hook.received.length, 0);
});

test('webhooks: a delivery waiting for its retry survives the gateway that queued it', async (t) => {
  const s = await startStack({ worker: noopBackend, apiKey: KEY, env: env({ SANDGATE_WEBHOOK_BACKOFF_MS: '1500' }) });
  t.after(() => s.close());
  const hook = await receiver([503, 200]);
  t.after(() => hook.close());
  // The stack's own dispatcher stands for the first gateway; it stops right after its first attempt.
  const run = await s.api('POST', '/v1/executions?wait=30', {
    language: 'python',
    code: 'print(1)',
    callback_url: hook.url,
  });
  await until('the first attempt', async () => (await webhookOf(s, run.body.id)).attempts.length === 1);
  await s.stopWebhooks();
  const next = startWebhookDispatcher(s.deps, s.deps.log);
  t.after(() => next.close());
  const status = await ended(s, run.body.id);
  assert.equal(status.state, 'delivered');
  assert.deepEqual(
    status.attempts.map((a: { status_code: number }) => a.status_code),
    [503, 200],
  );
  assert.equal(hook.received.length, 2);
});
