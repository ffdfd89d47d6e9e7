import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRedis, keys } from '@sandgate/state';
import { RunCancels } from './run-cancels.ts';

test('RunCancels maps a call to its run, by tenant, MCP session and request id', async (t) => {
  const redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'sandgate-test');
  const prefix = `sgtest${randomBytes(4).toString('hex')}`;
  t.after(async () => {
    const left = await redis.keys(`${prefix}:*`);
    if (left.length) await redis.del(...left);
    redis.disconnect();
  });
  const cancels = new RunCancels(redis, keys(prefix), 60);
  const call = { tenant: 'a', mcpSession: 'mcp_1', requestId: 7 };

  await t.test('a cancel finds the attached run once; detaching forgets it', async () => {
    assert.equal(await cancels.attach(call, 'exec_1'), false);
    assert.equal(await cancels.cancel({ ...call, tenant: 'b' }), null, 'another tenant');
    assert.equal(await cancels.cancel({ ...call, mcpSession: 'mcp_2' }), null, 'another MCP session');
    assert.equal(await cancels.cancel({ ...call, requestId: '7' }), null, 'the string "7" is another id than 7');
    assert.equal(await cancels.cancel(call), 'exec_1');
    assert.equal(await cancels.cancel(call), null, 'a second cancel has nothing left to cancel');
    await cancels.detach(call);
    assert.equal(await redis.exists(keys(prefix).mcpCall('a', 'mcp_1', 'n7')), 0);
  });

  await t.test('a cancel before the run is attached makes attach say so', async () => {
    const early = { ...call, requestId: 'req-8' };
    assert.equal(await cancels.cancel(early), null);
    assert.equal(await cancels.attach(early, 'exec_2'), true);
    await cancels.detach(early);
  });

  await t.test('entries expire', async () => {
    const c = { ...call, requestId: 9 };
    await cancels.attach(c, 'exec_3');
    const ttl = await redis.ttl(keys(prefix).mcpCall('a', 'mcp_1', 'n9'));
    assert.ok(ttl > 0 && ttl <= 60, `ttl ${ttl}`);
    await cancels.detach(c);
  });

  await t.test('request ids that cannot be keys are not tracked', async () => {
    const odd = { ...call, requestId: 'x'.repeat(500) };
    assert.equal(await cancels.attach(odd, 'exec_4'), false);
    assert.equal(await cancels.cancel(odd), null);
    assert.equal(await cancels.attach({ ...call, requestId: 'a b' }, 'exec_5'), false);
  });
});
