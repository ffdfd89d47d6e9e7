import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { EventWriter } from './event-writer.ts';
import { createRedis } from './redis.ts';
import { withLuaScripts } from './lua-scripts.ts';
import { streamedParts } from './streamed-output.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

test("a run's streamed output and artifacts read back, capped on a character boundary", async (t) => {
  const redis = withLuaScripts(createRedis(REDIS_URL, 'streamed-test'));
  const key = `streamedtest:${randomBytes(4).toString('hex')}:events`;
  t.after(async () => {
    await redis.del(key);
    redis.disconnect();
  });
  // Many small chunks across pages of the stream, as a chatty program makes them.
  const writer = new EventWriter(redis, key, { maxChunk: 1 });
  for (let i = 0; i < 1500; i++) writer.stdout('é');
  writer.stderr('warn\n');
  const artifact = (sha256: string) => ({
    path: 'out.csv',
    filename: 'out.csv',
    size_bytes: 1,
    mime_type: 'text/csv',
    sha256,
    download_url: 'http://x/files/s/out.csv',
  });
  writer.artifact(artifact('a'));
  writer.artifact(artifact('b'));
  await writer.flush();

  const whole = await streamedParts(redis, key, 1 << 20);
  assert.equal(whole.stdout, 'é'.repeat(1500));
  assert.equal(whole.stderr, 'warn\n');
  assert.equal(whole.stdout_truncated, false);
  assert.deepEqual(
    whole.artifacts.map((a) => a.sha256),
    ['b'],
    'an artifact reported twice counts once, as its last report',
  );

  // 'é' is two bytes: 1001 bytes hold 500 of them, never half of one.
  const capped = await streamedParts(redis, key, 1001);
  assert.equal(capped.stdout, 'é'.repeat(500));
  assert.equal(capped.stdout_truncated, true);
  assert.equal(capped.stderr_truncated, false);
});
