import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandgate, SandgateApiError } from '@sandgate/client';
import { mcpClient, toolsOf } from './mcp-client.ts';
import { readSse } from './sse-client.ts';
import { startStack, until, type Stack } from './harness.ts';

const ACME = 'metrics-acme-key-0123456789abcdef';
const GLOBEX = 'metrics-globex-key-0123456789abcdef';
const MEMORY_LIMIT = 512 << 20;
const DISK_LIMIT = 256 << 20;
const PER_SESSION = 2;
const PER_TENANT = 3;
/**
 * btrfs commits every 30 s by default, and a quota counts what was written at a commit: on a loaded machine it came
 * 31–46 s after a run on Kubernetes, whose files the worker writes without a sync.
 */
const BTRFS_COMMIT_MS = 90_000;

interface Metrics {
  session_id: string;
  state: string;
  sandbox: boolean;
  sampled_at: string;
  cpu_percent: number | null;
  memory_bytes: number | null;
  memory_limit_bytes: number | null;
  pids: number | null;
  disk_bytes: number;
  disk_limit_bytes: number | null;
}

test("a session's live metrics, once and as a stream", async (t) => {
  const s: Stack = await startStack({
    diskQuotas: true,
    env: {
      SANDGATE_API_KEYS: `${ACME}:acme,${GLOBEX}:globex`,
      SANDGATE_MEMORY_LIMIT: `${MEMORY_LIMIT >> 20}m`,
      SANDGATE_SESSION_DISK_BYTES: String(DISK_LIMIT),
      SANDGATE_MAX_METRIC_STREAMS_PER_SESSION: String(PER_SESSION),
      SANDGATE_MAX_METRIC_STREAMS_PER_TENANT: String(PER_TENANT),
    },
  });
  t.after(() => s.close());
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const newSession = async (): Promise<string> => {
    const r = await s.api('POST', '/v1/sessions', {}, as(ACME));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return (r.body as { id: string }).id;
  };
  const metrics = async (id: string, key = ACME): Promise<Metrics> => {
    const r = await s.api('GET', `/v1/sessions/${id}/metrics`, undefined, as(key));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as Metrics;
  };
  const run = async (id: string, code: string, language = 'bash') => {
    const r = await s.api('POST', '/v1/executions?wait=120', { session_id: id, language, code }, as(ACME));
    assert.equal(r.body.state, 'completed', JSON.stringify(r.body));
    return r.body as { result: { stdout: string } };
  };
  /** Starts a run that goes on (until cancelled); answers its id. */
  const start = async (id: string, code: string, language = 'bash'): Promise<string> => {
    const r = await s.api('POST', '/v1/executions', { session_id: id, language, code }, as(ACME));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return (r.body as { id: string }).id;
  };
  const cancel = async (executionId: string) => {
    await s.api('POST', `/v1/executions/${executionId}/cancel`, undefined, as(ACME));
    await until(`run ${executionId} to end`, async () => {
      const r = await s.api('GET', `/v1/executions/${executionId}`, undefined, as(ACME));
      return !['queued', 'running'].includes(r.body.state as string);
    });
  };

  const id = await newSession();
  await run(id, 'true');

  await t.test('memory rises within the limit while a run holds it', async () => {
    const before = await metrics(id);
    assert.equal(before.sandbox, true);
    assert.equal(before.state, 'idle', 'no run holds the session');
    assert.equal(before.memory_limit_bytes, MEMORY_LIMIT);
    assert.ok(before.memory_bytes !== null && before.memory_bytes < 100 << 20, JSON.stringify(before));
    const held = await start(
      id,
      'import time\nheld = b"x" * (200 << 20)\nprint("held", flush=True)\ntime.sleep(120)',
      'python',
    );
    const during = await until(
      'memory_bytes to rise by 150 MiB',
      async () => {
        const m = await metrics(id);
        return m.memory_bytes! > before.memory_bytes! + (150 << 20) && m;
      },
      60_000,
      250,
    );
    assert.ok(during.memory_bytes! <= during.memory_limit_bytes!, JSON.stringify(during));
    assert.equal(during.state, 'busy', 'the run holds the session');
    await cancel(held);
  });

  await t.test('cpu_percent shows a process burning CPU', async () => {
    const burn = await start(id, 'while :; do :; done');
    const busy = await until(
      'cpu_percent above 40',
      async () => {
        const m = await metrics(id);
        return m.cpu_percent !== null && m.cpu_percent > 40 && m;
      },
      60_000,
      250,
    );
    assert.ok(busy.cpu_percent! > 40);
    await cancel(burn);
    const calm = await until(
      'cpu_percent under 20 once it ended',
      async () => {
        const m = await metrics(id);
        return m.cpu_percent !== null && m.cpu_percent < 20 && m;
      },
      30_000,
      250,
    );
    assert.ok(calm.cpu_percent! < 20);
  });

  await t.test('pids counts a process tree', async () => {
    const before = await metrics(id);
    const tree = await start(id, 'for i in 1 2 3 4 5 6 7 8; do sleep 300 & done; sleep 300');
    const many = await until(
      'pids to rise by 9',
      async () => {
        const m = await metrics(id);
        return m.pids! >= before.pids! + 9 && m;
      },
      60_000,
      250,
    );
    assert.ok(many.pids! >= before.pids! + 9, JSON.stringify({ before, many }));
    await cancel(tree);
  });

  await t.test('disk_bytes rises after a file is written, within the quota', async () => {
    const before = await metrics(id);
    assert.equal(before.disk_limit_bytes, DISK_LIMIT);
    await run(id, 'head -c 8388608 /dev/urandom > big.bin && sync');
    // On Kubernetes the run's files reach the session's directory when it ends, written by the worker without a sync:
    // btrfs counts them at its next commit, within 30 s.
    const after = await until(
      'disk_bytes to rise by 8 MiB',
      async () => {
        const m = await metrics(id);
        return m.disk_bytes >= before.disk_bytes + (8 << 20) && m;
      },
      BTRFS_COMMIT_MS,
    );
    assert.ok(after.disk_bytes <= DISK_LIMIT);
  });

  await t.test("another tenant's session is not found, and nobody's without a key", async () => {
    const other = await s.api('GET', `/v1/sessions/${id}/metrics`, undefined, as(GLOBEX));
    assert.equal(other.status, 404);
    assert.equal(other.body.code, 'session_not_found');
    const stream = await readSse(`${s.url}/v1/sessions/${id}/metrics/stream`, { headers: as(GLOBEX) });
    assert.equal(stream.status, 404);
    assert.equal((await s.api('GET', `/v1/sessions/${id}/metrics`, undefined, {})).status, 401);
  });

  await t.test('a paused session answers its disk figures and nulls for its sandbox', async () => {
    const paused = await newSession();
    // btrfs counts a quota's bytes at its next commit (sync forces one; else within 30 s): docs/metrics.md.
    await run(paused, 'head -c 1048576 /dev/urandom > kept.bin && sync');
    assert.equal((await s.api('POST', `/v1/sessions/${paused}/pause`, undefined, as(ACME))).status, 200);
    let last: Metrics | undefined;
    const m = await until(
      'disk_bytes of the paused session',
      async () => {
        last = await metrics(paused);
        return last.disk_bytes >= 1 << 20 && last;
      },
      BTRFS_COMMIT_MS,
    ).catch((err: Error) => assert.fail(`${err.message}: ${JSON.stringify(last)}`));
    assert.equal(m.state, 'paused');
    assert.equal(m.sandbox, false);
    assert.deepEqual([m.cpu_percent, m.memory_bytes, m.memory_limit_bytes, m.pids], [null, null, null, null]);
    assert.equal(m.disk_limit_bytes, DISK_LIMIT);
  });

  await t.test('the stream: one event a sample, in order, ending when the session is deleted', async () => {
    const watched = await newSession();
    await run(watched, 'true');
    const events: Metrics[] = [];
    const streamed = readSse(`${s.url}/v1/sessions/${watched}/metrics/stream`, {
      headers: as(ACME),
      onEvent: (ev) => {
        if (ev.event === 'metrics') events.push(JSON.parse(ev.data) as Metrics);
      },
    });
    await until('three events', async () => events.length >= 3, 30_000);
    assert.equal((await s.api('DELETE', `/v1/sessions/${watched}`, undefined, as(ACME))).status, 204);
    const { status, events: all, contentType } = await streamed;
    assert.equal(status, 200);
    assert.match(contentType ?? '', /^text\/event-stream/);
    assert.equal(all.at(-1)?.event, 'end');
    assert.deepEqual(JSON.parse(all.at(-1)!.data), { reason: 'session_deleted' });
    const ids = all.filter((e) => e.event === 'metrics').map((e) => Number(e.id));
    assert.deepEqual(
      ids,
      ids.map((_, i) => i + 1),
      'ids count the events',
    );
    const times = events.map((e) => Date.parse(e.sampled_at));
    for (let i = 1; i < times.length; i += 1) assert.ok(times[i]! > times[i - 1]!, 'sampled_at increases');
    assert.ok(events.every((e) => e.session_id === watched && e.sandbox));
    assert.ok(
      events.slice(1).every((e) => e.cpu_percent !== null),
      'CPU from the second sample on',
    );
  });

  await t.test('through the client library: metrics() and watchMetrics()', async () => {
    const client = new Sandgate({ baseUrl: s.url, apiKey: ACME });
    const now = await client.metrics(id);
    assert.equal(now.session_id, id);
    assert.equal(now.sandbox, true);
    const ac = new AbortController();
    const seen: string[] = [];
    for await (const m of client.watchMetrics(id, { signal: ac.signal })) {
      seen.push(m.sampled_at);
      if (seen.length === 2) ac.abort();
    }
    assert.equal(seen.length, 2);
    assert.ok(Date.parse(seen[1]!) > Date.parse(seen[0]!));
    const stranger = new Sandgate({ baseUrl: s.url, apiKey: GLOBEX });
    await assert.rejects(stranger.metrics(id), (err: unknown) => err instanceof SandgateApiError && err.status === 404);
    await assert.rejects(
      async () => {
        for await (const m of stranger.watchMetrics(id)) assert.fail(`a stranger saw ${JSON.stringify(m)}`);
      },
      (err: unknown) => err instanceof SandgateApiError && err.code === 'session_not_found',
    );
  });

  await t.test('MCP: session_metrics answers the figures, and not for another tenant', async () => {
    const { client, transport } = await mcpClient(s, { apiKey: ACME });
    t.after(() => transport.close());
    const { ok } = toolsOf(client);
    const m = (await ok('session_metrics', { session_id: id })) as Metrics;
    assert.equal(m.session_id, id);
    assert.equal(m.sandbox, true);
    assert.equal(m.memory_limit_bytes, MEMORY_LIMIT);
    assert.ok(m.disk_bytes >= 8 << 20, 'the file written earlier');
    const stranger = await mcpClient(s, { apiKey: GLOBEX });
    t.after(() => stranger.transport.close());
    assert.equal(
      (await toolsOf(stranger.client).fail('session_metrics', { session_id: id })).error,
      'session_not_found',
    );
  });

  await t.test('streams are bounded per session and per tenant (too_many_metric_streams)', async () => {
    const a = await newSession();
    const b = await newSession();
    const held: AbortController[] = [];
    const hold = async (sessionId: string): Promise<void> => {
      const ac = new AbortController();
      held.push(ac);
      const r = await fetch(`${s.url}/v1/sessions/${sessionId}/metrics/stream`, {
        headers: as(ACME),
        signal: ac.signal,
      });
      assert.equal(r.status, 200);
    };
    t.after(() => held.forEach((ac) => ac.abort()));
    await hold(a);
    await hold(a);
    const third = await s.api('GET', `/v1/sessions/${a}/metrics/stream`, undefined, as(ACME));
    assert.equal(third.status, 429);
    assert.equal(third.body.code, 'too_many_metric_streams');
    assert.equal(third.headers.get('retry-after'), '10');
    await hold(b);
    const fourth = await s.api('GET', `/v1/sessions/${b}/metrics/stream`, undefined, as(ACME));
    assert.equal(fourth.status, 429);
    assert.match(fourth.body.detail as string, /tenant/);
    // A stream that closes gives its slot back.
    held.shift()!.abort();
    await until('a slot again', async () => {
      const ac = new AbortController();
      const r = await fetch(`${s.url}/v1/sessions/${a}/metrics/stream`, { headers: as(ACME), signal: ac.signal });
      if (r.status === 200) held.push(ac);
      else ac.abort();
      return r.status === 200;
    });
  });
});
