import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { EventHub, type StoredEvent } from './event-hub.ts';
import { EventWriter } from './event-writer.ts';
import { createRedis, whenReady } from './redis.ts';
import { withLuaScripts } from './lua-scripts.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function collect(it: AsyncIterable<StoredEvent>, until?: (ev: StoredEvent) => boolean) {
  const out: StoredEvent[] = [];
  for await (const ev of it) {
    out.push(ev);
    if (until?.(ev)) break;
  }
  return out;
}

test('the hub replays, follows live, and serves many streams over one blocking connection', async (t) => {
  const redis = createRedis(REDIS_URL, 'hub-test');
  const hub = new EventHub(createRedis(REDIS_URL, 'hub-test-reader'), redis, pino({ level: 'silent' }));
  const key = (n: number) => `hubtest:${randomBytes(4).toString('hex')}:${n}`;
  const keys = [key(1), key(2)];
  t.after(async () => {
    await redis.del(...keys);
    await hub.close();
    redis.disconnect();
  });
  const add = (k: string, type: string, data: unknown) =>
    redis.xadd(k, '*', 'type', type, 'data', JSON.stringify(data));

  const early = await add(keys[0]!, 'stdout', { text: 'a' });
  const ac = new AbortController();
  const first = collect(hub.subscribe(keys[0]!, null, ac.signal));
  const second = collect(hub.subscribe(keys[1]!, null, ac.signal));
  const fromEarly = collect(hub.subscribe(keys[0]!, early, ac.signal));
  await add(keys[1]!, 'stdout', { text: 'x' });
  for (const text of ['b', 'c']) await add(keys[0]!, 'stdout', { text });
  // A subscriber that joins while the hub already follows the stream gets the past from XRANGE, then live.
  const late = collect(hub.subscribe(keys[0]!, null, ac.signal));
  await add(keys[0]!, 'result', { result: 1 });
  await add(keys[1]!, 'result', { result: 2 });

  const texts = (evs: StoredEvent[]) => evs.map((e) => (e.type === 'result' ? 'R' : JSON.parse(e.data).text)).join('');
  assert.equal(texts(await first), 'abcR');
  assert.equal(texts(await late), 'abcR');
  assert.equal(texts(await fromEarly), 'bcR', 'exclusive of Last-Event-ID');
  assert.equal(texts(await second), 'xR');
  const ids = (await first).map((e) => e.id);
  assert.deepEqual(ids, [...ids].sort(), 'in stream order');

  const stop = new AbortController();
  const aborted = collect(hub.subscribe(keys[0]!, (await first).at(-1)!.id, stop.signal));
  stop.abort();
  assert.deepEqual(await aborted, [], 'an aborted subscription ends without events');
});

test('the writer coalesces output and keeps the order of everything else', async (t) => {
  const redis = createRedis(REDIS_URL, 'writer-test');
  const k = `writertest:${randomBytes(4).toString('hex')}`;
  t.after(async () => {
    await redis.del(k);
    redis.disconnect();
  });
  const w = new EventWriter(withLuaScripts(redis), k, { lingerMs: 50 });
  for (let i = 0; i < 100; i++) w.stdout('x');
  w.stderr('e');
  w.phase('harvesting');
  w.stdout('y');
  await w.flush();
  const entries = (await redis.xrange(k, '-', '+')) as [string, string[]][];
  assert.deepEqual(
    entries.map(([, f]) => `${f[1]}:${f[1] === 'phase' ? JSON.parse(f[3]!).phase : JSON.parse(f[3]!).text}`),
    [`stdout:${'x'.repeat(100)}`, 'stderr:e', 'phase:harvesting', 'stdout:y'],
  );
});

test('a stream subscribed while the hub blocks on others is read at once, on a reader ready before the hub', async (t) => {
  const redis = createRedis(REDIS_URL, 'hub-test');
  const reader = createRedis(REDIS_URL, 'hub-test-ready-reader');
  await whenReady(reader);
  const hub = new EventHub(reader, redis, pino({ level: 'silent' }));
  const keys = [1, 2].map((n) => `hubtest:${randomBytes(4).toString('hex')}:${n}`);
  t.after(async () => {
    await redis.del(...keys);
    await hub.close();
    redis.disconnect();
  });
  const ac = new AbortController();
  t.after(() => ac.abort());
  void collect(hub.subscribe(keys[0]!, null, ac.signal));
  const blocked = async () => /name=hub-test-ready-reader .*cmd=xread/.test(String(await redis.client('LIST')));
  while (!(await blocked())) await new Promise((r) => setTimeout(r, 20));
  const second = collect(hub.subscribe(keys[1]!, null, ac.signal), (ev) => ev.type === 'result');
  await redis.xadd(keys[1]!, '*', 'type', 'result', 'data', '{}');
  // The read on the first stream blocks for 10 s: the second stream's event must not wait for it to time out.
  const late = new Promise<string>((resolve) => setTimeout(() => resolve('late'), 5_000).unref());
  assert.notEqual(await Promise.race([second.then(() => 'read'), late]), 'late');
});
