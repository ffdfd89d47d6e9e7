import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway } from '@sandgate/gateway';
import { createLogger, loadConfig } from '@sandgate/config';
import { freePort } from './redis-and-ports.ts';
import { startStack, until } from './harness.ts';

const TENANT_KEY = 'history-tenant-key-0123456789';
const OPERATOR_KEY = 'history-operator-key-0123456789';

interface Point {
  at: string;
  queued: number;
  running: number;
  runs_per_minute: number | null;
  pool_hits: number;
  pool_misses: number;
  live_sessions: number;
  ended_runs: number;
}

test("the operator's last hour: one point per interval across gateways, runs per minute, sessions", async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${TENANT_KEY}:acme`,
      SANDGATE_OPERATOR_KEYS: OPERATOR_KEY,
      SANDGATE_STATS_HISTORY_S: '1',
    },
  });
  t.after(() => s.close());
  // A second gateway of the same deployment: the history still has one point per slot.
  const config = loadConfig({ ...s.env, SANDGATE_PORT: String(await freePort()) });
  const second = await startGateway(config, createLogger(config, 'history-second-gateway', { tty: false }));
  t.after(() => second.close());
  const operator = { authorization: `Bearer ${OPERATOR_KEY}` };
  const tenant = { authorization: `Bearer ${TENANT_KEY}` };
  const history = async (): Promise<{ interval_seconds: number; points: Point[] }> => {
    const r = await s.api('GET', '/v1/system/stats/history', undefined, operator);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  };

  assert.equal((await s.api('GET', '/v1/system/stats/history', undefined, tenant)).status, 403);
  assert.equal((await s.api('GET', '/v1/system/stats/history')).status, 401);

  const session = await s.api('POST', '/v1/sessions', {}, tenant);
  assert.equal(session.status, 201);
  for (let i = 0; i < 3; i += 1) {
    const run = await s.api('POST', '/v1/executions?wait=60', { language: 'bash', code: 'true' }, tenant);
    assert.equal(run.body.state, 'completed');
  }
  const seen = await until(
    'a point that counts the runs and the session, after one before them',
    async () => {
      const h = await history();
      return h.points.some((p) => p.ended_runs >= 3 && p.live_sessions >= 1) && h;
    },
    30_000,
    250,
  );
  assert.equal(seen.interval_seconds, 1);
  const seconds = seen.points.map((p) => Math.floor(Date.parse(p.at) / 1000));
  for (let i = 1; i < seconds.length; i += 1)
    assert.ok(seconds[i]! > seconds[i - 1]!, 'one point per second, in order');
  assert.equal(seen.points[0]!.runs_per_minute, null);
  assert.ok(
    seen.points.some((p) => p.runs_per_minute !== null && p.runs_per_minute > 0),
    JSON.stringify(seen.points),
  );
  const last = seen.points.at(-1)!;
  assert.ok(last.pool_hits + last.pool_misses >= 1, 'the runs took the pool or missed it');
});
