import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { REDIS_HANG_MS, REDIS_REQUEST_TIMEOUT_MS, RedisWatchdog, createRedis, whenReady } from '@sandgate/state';
import { startRedisServer } from './redis-and-ports.ts';

/** Resolves once `check()` holds; fails after `ms`. */
async function until(what: string, check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Holds this process's event loop for `ms`, as a synchronous call (execFileSync, a big JSON.parse) does. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

/** A watchdog on a connection of its own, as the gateway makes it. */
async function watchdogOn(url: string): Promise<RedisWatchdog> {
  const redis = createRedis(url, 'sandgate-test-watchdog', { autoPipelining: false, failFast: true });
  await whenReady(redis);
  const watchdog = new RedisWatchdog(redis);
  assert.equal(watchdog.up, true);
  return watchdog;
}

test('a stall of the process itself is not taken for a hung Redis', async (t) => {
  const server = await startRedisServer();
  t.after(() => server.stop());
  const watchdog = await watchdogOn(server.url);
  t.after(() => watchdog.close());
  for (let round = 0; round < 3; round++) {
    // A check due just after the watchdog's next PING: once the stall ends both timers are late, the watchdog's runs
    // first and sends a PING, and this check runs in the same loop turn, before that PONG can be read.
    const seen = new Promise<boolean>((resolve) => setTimeout(() => resolve(watchdog.up), 250));
    stall(REDIS_HANG_MS + 500);
    assert.equal(await seen, true, `round ${round}: up right after a ${REDIS_HANG_MS + 500} ms stall`);
    assert.equal(watchdog.up, true);
    await sleep(300);
  }
});

test('a hung Redis (SIGSTOP) is down within REDIS_HANG_MS and stays down until it answers again', async (t) => {
  const server = await startRedisServer();
  t.after(() => server.stop());
  const watchdog = await watchdogOn(server.url);
  t.after(() => watchdog.close());
  server.signal('SIGSTOP');
  t.after(() => server.signal('SIGCONT'));
  const t0 = Date.now();
  await until('the watchdog to take Redis for hung', () => !watchdog.up, REDIS_HANG_MS + 3000);
  const noticed = Date.now() - t0;
  assert.ok(noticed >= REDIS_HANG_MS - 250, `down after ${noticed} ms: too soon for REDIS_HANG_MS`);
  // Past the first PING's command timeout a new PING goes out: the wait is still counted from the first one.
  const downUntil = Date.now() + REDIS_REQUEST_TIMEOUT_MS + 1500;
  while (Date.now() < downUntil) {
    assert.equal(watchdog.up, false, `up again ${Date.now() - t0} ms after SIGSTOP, with Redis still stopped`);
    await sleep(50);
  }
  server.signal('SIGCONT');
  await until('the watchdog to see Redis answer again', () => watchdog.up, 5000);
});
