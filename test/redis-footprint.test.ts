import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

const CANARIES = {
  env: `env-canary-${process.pid}`,
  stdin: `stdin-canary-${process.pid}`,
  code: `code-canary-${process.pid}`,
};

/** Every key under `prefix`, with its type, TTL (s; -1: none) and whole contents as text. */
async function dump(redis: any, prefix: string) {
  const out: { key: string; type: string; ttl: number; text: string }[] = [];
  let cursor = '0';
  do {
    const [next, found] = (await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000)) as [string, string[]];
    cursor = next;
    for (const key of found) {
      const type = (await redis.type(key)) as string;
      const ttl = (await redis.ttl(key)) as number;
      const text = JSON.stringify(
        type === 'string'
          ? await redis.get(key)
          : type === 'hash'
            ? await redis.hgetall(key)
            : type === 'set'
              ? await redis.smembers(key)
              : type === 'zset'
                ? await redis.zrange(key, 0, -1, 'WITHSCORES')
                : type === 'list'
                  ? await redis.lrange(key, 0, -1)
                  : type === 'stream'
                    ? await redis.xrange(key, '-', '+')
                    : null,
      );
      out.push({ key: key.slice(prefix.length + 1), type, ttl, text });
    }
  } while (cursor !== '0');
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

test('what finished runs leave in Redis: no code, env or stdin, no job, and a TTL on everything per run', async (t) => {
  const retention = 600;
  const s = await startStack({ worker: noopBackend, env: { SANDGATE_RETENTION_S: String(retention) } });
  t.after(() => s.close());
  const body = {
    language: 'python',
    code: `print("${CANARIES.code}")`,
    env: { TOKEN: CANARIES.env },
    stdin: CANARIES.stdin,
  };
  const oneShot = await s.api('POST', '/v1/executions?wait=30', body);
  assert.equal(oneShot.body.state, 'completed');
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const inSession = await s.api('POST', '/v1/executions?wait=30', { ...body, session_id: session });
  assert.equal(inSession.body.state, 'completed');
  const runs = [oneShot.body.id as string, inSession.body.id as string];

  const keys = await dump(s.deps.redis, s.config.redisPrefix);
  t.diagnostic(`keys left after ${runs.length} finished runs (key, type, TTL in s, -1: none):`);
  for (const k of keys) t.diagnostic(`  ${k.key} ${k.type} ${k.ttl}`);

  for (const k of keys) {
    for (const [what, canary] of Object.entries(CANARIES))
      assert.ok(!k.text.includes(canary), `${k.key} holds the run's ${what}`);
  }
  for (const id of runs)
    assert.ok(!keys.some((k) => k.key.startsWith(`q:`) && k.key.endsWith(id)), `the queue's job ${id} is gone`);
  // Keys of one run or one session's history expire with the retention; what stays is one per deployment,
  // tenant or live session, and is removed with it.
  const lasting = [
    /^signing-key$/,
    /^workers$/,
    // When each session is deleted (retention) and when each live one pauses if left idle.
    /^sessions:(expiry|idle)$/,
    // The runs queue, and the queue of template builds beside it.
    /^q:executions(-builds)?:(meta|id|events|stalled-check|pc|marker)$/,
    new RegExp(`^session:(${oneShot.body.session_id}|${session})$`),
    /^tenant:default:(sessions|session-list|storage)$/,
    // The deployment's metrics: counters and histograms of fixed label sets, one snapshot per live process.
    /^(workers|gateways):stats$/,
    /^stats:(counters|histogram:(duration|queue_wait))$/,
  ];
  for (const k of keys) {
    if (lasting.some((re) => re.test(k.key))) continue;
    assert.ok(
      k.ttl > 0 && k.ttl <= retention,
      `${k.key} (${k.type}) has TTL ${k.ttl}; every key of a run must expire within ${retention} s`,
    );
  }
  const record = keys.find((k) => k.key === `execution:${runs[0]}`)!;
  assert.ok(record.ttl > 0 && record.ttl <= retention);
  assert.ok(
    keys.some((k) => k.key === `session:${session}:execution-list`),
    'the session has an index of its runs',
  );
});
