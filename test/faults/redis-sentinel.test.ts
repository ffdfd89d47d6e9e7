import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { keys } from '@sandgate/state';
import { until } from '../harness.ts';
import { api, startDeployment } from './processes.ts';
import { SENTINEL_NAME, startSentinelGroup } from './sentinel-group.ts';

/** One request the test made while the primary died, for the window of failed answers. */
interface Answer {
  at: number;
  what: string;
  status: number;
  code: string;
}

interface Followed {
  ids: string[];
  /** The `code` of each `error` event (a stream the gateway could not go on with: the client reconnects). */
  errors: string[];
  types: string[];
  stdout: string;
  result: any;
  connections: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A client tailing a run's events as a browser's EventSource does: when the stream drops or the gateway answers an
 * error, it reconnects with Last-Event-ID after a short pause, until the `result` event.
 */
async function follow(
  url: string,
  id: string,
  deadline: { at: number },
  { onOutput, dropEvery }: { onOutput?: () => void; dropEvery?: number } = {},
): Promise<Followed> {
  const seen: Followed = { ids: [], errors: [], types: [], stdout: '', result: null, connections: 0 };
  while (!seen.result && Date.now() < deadline.at) {
    const last = seen.ids.at(-1);
    try {
      const res = await fetch(`${url}/v1/executions/${id}/events`, {
        headers: { accept: 'text/event-stream', ...(last ? { 'last-event-id': last } : {}) },
      });
      if (res.status !== 200) {
        await res.body?.cancel();
        await sleep(100);
        continue;
      }
      seen.connections++;
      let read = 0;
      const reader = res
        .body!.pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream())
        .getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        // As an EventSource: an event without an id (an `error`) leaves Last-Event-ID as it was.
        if (value.event === 'error') seen.errors.push(JSON.parse(value.data).code);
        else {
          seen.ids.push(value.id!);
          seen.types.push(value.event!);
        }
        if (value.event === 'stdout') {
          seen.stdout += JSON.parse(value.data).text;
          onOutput?.();
        }
        if (value.event === 'result') seen.result = JSON.parse(value.data).result;
        // A client whose network drops now and then: it goes away and comes back with Last-Event-ID.
        if (dropEvery && ++read >= dropEvery && !seen.result) {
          await reader.cancel();
          break;
        }
      }
    } catch {
      await sleep(100);
    }
  }
  return seen;
}

test('the Redis primary SIGKILLed under runs, SSE clients and uploads: Sentinel fails over and nothing is lost or done twice', async (t) => {
  const group = await startSentinelGroup();
  t.after(() => group.close());
  const oldPrimary = await group.primaryPort();
  const { d, gateway, worker } = await startDeployment(t, {
    // With sentinels the URL's host and port are not used: the sentinels say where the primary is.
    REDIS_URL: 'redis://127.0.0.1:1',
    SANDGATE_REDIS_SENTINELS: group.sentinels,
    SANDGATE_REDIS_SENTINEL_NAME: SENTINEL_NAME,
    SANDGATE_MAX_SESSIONS: '100',
    SANDGATE_TENANT_RUNS_PER_MIN: '0',
  });
  const g = gateway.url;
  await until('/readyz to be ready', async () => (await api(g, 'GET', '/readyz')).status === 200, 30_000);
  const deadline = { at: Date.now() + 180_000 };
  let stop = false;
  t.after(() => {
    stop = true;
    deadline.at = 0;
  });
  /** Says where things stand when a wait fails: the runs' states and the processes' last words. */
  const explain = async (err: unknown, ids: string[]) => {
    const states = await Promise.all(
      ids.map(
        async (id) =>
          `${id}: ${JSON.stringify((await api(g, 'GET', `/v1/executions/${id}`).catch(() => null))?.body?.state)}`,
      ),
    );
    const tail = (s: string) => s.slice(-6000);
    return new Error(
      `${(err as Error).message}\n${states.join('\n')}\n--- gateway\n${tail(gateway.output())}\n--- worker\n${tail(worker!.output())}`,
    );
  };

  const answers: Answer[] = [];
  const record = (what: string, r: { status: number; body: any }) =>
    answers.push({ at: Date.now(), what, status: r.status, code: r.status >= 400 ? String(r.body?.code ?? '') : '' });

  // An upload acknowledged before the kill.
  const session = (await api(g, 'POST', '/v1/sessions', {})).body.id as string;
  const put = async (path: string, body: string) => {
    const res = await fetch(`${g}/v1/sessions/${session}/files/${path}`, {
      method: 'PUT',
      body,
      headers: { 'content-type': 'application/octet-stream' },
    }).catch(() => null);
    const parsed = res ? await res.json().catch(() => null) : null;
    const r = { status: res?.status ?? 0, body: parsed };
    record('upload', r);
    return r.status === 201;
  };
  assert.ok(await put('before.txt', 'uploaded before the kill'));

  // Two runs that are running when the primary dies, six queued behind them (the worker runs two at a time).
  const lines = 60;
  const slowCode = `import time\nfor i in range(${lines}):\n    print(i, flush=True)\n    time.sleep(0.1)`;
  const slow: string[] = [];
  for (let i = 0; i < 2; i++)
    slow.push((await api(g, 'POST', '/v1/executions', { language: 'python', code: slowCode })).body.id);
  const queued: string[] = [];
  for (let i = 0; i < 6; i++)
    queued.push((await api(g, 'POST', '/v1/executions', { language: 'python', code: `print("queued ${i}")` })).body.id);
  for (const id of [...slow, ...queued]) assert.ok(id, 'every run was accepted');

  // Three clients tail each running run (and two more that drop their connection every 5 events), one each queued
  // run.
  let tailing = 0;
  const clients = new Map<string, Promise<Followed>[]>();
  for (const id of slow) {
    clients.set(
      id,
      Array.from({ length: 3 }, () => {
        let counted = false;
        return follow(g, id, deadline, {
          onOutput: () => {
            if (!counted) tailing++;
            counted = true;
          },
        });
      }).concat([follow(g, id, deadline, { dropEvery: 5 }), follow(g, id, deadline, { dropEvery: 5 })]),
    );
  }
  for (const id of queued) clients.set(id, [follow(g, id, deadline)]);
  await until('every client of the running runs to have seen output', async () => tailing === 6, 60_000, 20);

  // Meanwhile: a run posted and a file uploaded every 200 ms, and a run read every 50 ms, until told to stop.
  const late: string[] = [];
  const uploaded: string[] = [];
  const submitter = (async () => {
    for (let n = 0; !stop; n++) {
      const r = await api(g, 'POST', '/v1/executions', { language: 'python', code: `print("late ${n}")` }).catch(
        () => ({ status: 0, body: null, ms: 0 }),
      );
      record('run', r);
      if (r.status === 202) {
        late.push(r.body.id);
        clients.set(r.body.id, [follow(g, r.body.id, deadline)]);
      }
      await sleep(500);
    }
  })();
  const uploader = (async () => {
    for (let n = 0; !stop; n++) {
      if (await put(`during/${n}.txt`, `upload ${n}`)) uploaded.push(`during/${n}.txt`);
      await sleep(200);
    }
  })();
  const reader = (async () => {
    while (!stop) {
      record('read', await api(g, 'GET', `/v1/executions/${slow[0]}`).catch(() => ({ status: 0, body: null })));
      await sleep(50);
    }
  })();
  await sleep(500);

  const killedAt = Date.now();
  await group.kill(oldPrimary);
  const newPrimary = await until(
    'the sentinels to promote the replica',
    async () => {
      const p = await group.primaryPort();
      return p !== oldPrimary ? p : null;
    },
    60_000,
    50,
  );
  const promotedAt = Date.now();

  // Once requests succeed again (a run accepted, an upload stored, a read answered), the loops stop.
  const since = (what: string) =>
    answers.filter((a) => a.at > promotedAt && a.what === what && a.status > 0 && a.status < 300).length;
  await until(
    'requests to succeed again',
    async () => since('run') >= 3 && since('upload') >= 3 && since('read') >= 3,
    60_000,
    50,
  );
  stop = true;
  await Promise.all([submitter, uploader, reader]);

  // Every run accepted before, during and after the failover ends (read through the gateway, as a client does).
  const ended = async (id: string) => {
    const r = await api(g, 'GET', `/v1/executions/${id}`).catch(() => null);
    return r?.status === 200 && r.body.result ? r.body : null;
  };
  await until(
    'every run to end',
    async () => (await Promise.all([...slow, ...queued, ...late].map(ended))).every(Boolean),
    120_000,
    250,
  ).catch(async (err) => {
    throw await explain(err, [...slow, ...queued, ...late]);
  });
  const runs = [...slow, ...queued, ...late];
  const records = new Map<string, any>();
  for (const id of runs) records.set(id, await ended(id));

  // What the new primary holds, read directly.
  const redis = group.connect(newPrimary);
  const k = keys(d.prefix);
  let endings = 0;
  for (const id of runs) {
    const stream = (await redis.xrange(k.events(id), '-', '+')) as [string, string[]][];
    const types = stream.map(([, f]) => f[f.indexOf('type') + 1]);
    assert.equal(types.filter((x) => x === 'result').length, 1, `run ${id} has exactly one result event`);
    assert.equal(types.at(-1), 'result', `nothing follows run ${id}'s result`);
    const ids = stream.map(([id]) => id);
    for (const [i, c] of (await Promise.all(clients.get(id)!)).entries()) {
      assert.ok(c.result, `client ${i} of run ${id} got the result`);
      for (const code of c.errors) assert.equal(code, 'redis_unavailable', `client ${i} of run ${id}: error event`);
      // Every event the run has, once each, in order: the client missed nothing across the failover.
      assert.deepEqual(c.ids, ids, `client ${i} of run ${id} saw exactly the run's events`);
      assert.deepEqual(c.result, records.get(id).result, `client ${i} of run ${id} saw the stored result`);
    }
    endings += 1;
  }
  const states = runs.map((id) => `${records.get(id).state}/${records.get(id).result.reason ?? ''}`);
  assert.deepEqual(states, Array(runs.length).fill('completed/'), 'every run completed');
  const expected = Array.from({ length: lines }, (_, i) => `${i}\n`).join('');
  for (const id of slow) assert.equal(records.get(id).result.stdout, expected, 'a running run kept every line');
  queued.forEach((id, i) => assert.equal(records.get(id).result.stdout, `queued ${i}\n`));
  late.forEach((id, i) => assert.match(records.get(id).result.stdout, /^late \d+\n$/, String(i)));
  // A POST answered 503 during the failover may still have been accepted (the old primary took it and the reply was
  // lost): such a run is one the client never learnt of, and it runs too. So every execution the new primary holds is
  // looked at: each ended one has exactly one result, and the stats count each ending once.
  const unacknowledged: string[] = [];
  for (let cursor = '0'; ;) {
    const [next, found] = await redis.scan(cursor, 'MATCH', k.execution('*'), 'COUNT', 1000);
    for (const key of found) {
      const id = key.slice(k.execution('').length);
      if (!id.includes(':') && !runs.includes(id)) unacknowledged.push(id);
    }
    if ((cursor = next) === '0') break;
  }
  const finished = async (id: string) => Boolean(await redis.hget(k.execution(id), 'finished_at'));
  await until('the runs accepted unbeknown to their client to end', async () =>
    (await Promise.all(unacknowledged.map(finished))).every(Boolean),
  );
  for (const id of unacknowledged) {
    const stream = (await redis.xrange(k.events(id), '-', '+')) as [string, string[]][];
    const results = stream.filter(([, f]) => f[f.indexOf('type') + 1] === 'result').length;
    assert.equal(results, 1, `run ${id}, accepted though its POST failed, has exactly one result event`);
    endings += 1;
  }
  t.diagnostic(`runs accepted though their POST failed: ${unacknowledged.length}`);
  const counters = await redis.hgetall(k.statsCounters());
  const counted = Object.entries(counters)
    .filter(([f]) => f.startsWith('executions'))
    .reduce((n, [, v]) => n + Number(v), 0);
  assert.equal(counted, endings, 'each ending counted once');

  // Every acknowledged upload is there, with what was sent.
  for (const path of ['before.txt', ...uploaded]) {
    const res = await fetch(`${g}/files/${session}/${path}`);
    assert.equal(res.status, 200, path);
    const text = await res.text();
    assert.equal(text, path === 'before.txt' ? 'uploaded before the kill' : `upload ${path.match(/\d+/)![0]}`);
  }

  // The window: from the first answer after the kill that was not a success to the last one.
  const failed = answers.filter((a) => a.at >= killedAt && (a.status >= 300 || a.status === 0));
  const after = answers.filter((a) => a.at >= killedAt);
  const codes = new Map<string, number>();
  for (const a of failed) codes.set(`${a.status} ${a.code}`, (codes.get(`${a.status} ${a.code}`) ?? 0) + 1);
  const window = failed.length ? failed.at(-1)!.at - failed[0]!.at : 0;
  const lastFailed = failed.at(-1)?.at ?? killedAt;
  const back = answers.find((a) => a.at > lastFailed && a.status > 0 && a.status < 300)!.at - killedAt;
  t.diagnostic(
    `primary SIGKILLed; sentinels promoted the replica after ${promotedAt - killedAt} ms; ` +
      `failed answers from +${failed.length ? failed[0]!.at - killedAt : 0} ms to +${failed.length ? failed.at(-1)!.at - killedAt : 0} ms ` +
      `(window ${window} ms): ${failed.length} of ${after.length} requests after the kill ` +
      `(${[...codes].map(([c, n]) => `${c} ×${n}`).join(', ')}); first success after them at +${back} ms; ` +
      `${runs.length} runs, ${uploaded.length + 1} uploads`,
  );
  for (const a of failed)
    assert.ok(a.status === 503 && a.code === 'redis_unavailable', `${a.what}: ${a.status} ${a.code}`);
  const sseConnections = (await Promise.all([...clients.values()].flat())).map((c) => c.connections);
  const sseErrors = (await Promise.all([...clients.values()].flat())).reduce((n, c) => n + c.errors.length, 0);
  t.diagnostic(
    `SSE error events (redis_unavailable, then the client resumed): ${sseErrors}; ` +
      `SSE connections per client: max ${Math.max(...sseConnections)}, ` +
      `${sseConnections.filter((n) => n > 1).length} clients reconnected`,
  );
});
