/**
 * What `WAIT 1` costs a write: a run's ending as sandgate writes it (a record update and a `result` event in one
 * MULTI), alone and followed by `WAIT 1 1000` (answered once the replica has it), on a primary with one replica of
 * the bench's own on loopback (the Sentinel fault test's servers; the shared Redis is not used). One at a time, then
 * 50 in flight at once (WAITs of concurrent writers share the replica's acknowledgements).
 *   node --import tsx bench/redis-wait.ts
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { startSentinelGroup } from '../test/faults/sentinel-group.ts';
import { main, onCleanup } from './lib/main.ts';
import { summarize } from './lib/stats.ts';

const N = 4000;
const PARALLEL = 50;

async function ending(redis: Redis, i: number, wait: boolean): Promise<number> {
  const t0 = performance.now();
  await redis
    .multi()
    .hset(`bench-wait:execution:${i}`, 'state', 'completed', 'result', '{"state":"completed","stdout":"x\\n"}')
    .xadd(`bench-wait:execution:${i}:events`, '*', 'type', 'result', 'data', '{"result":{}}')
    .expire(`bench-wait:execution:${i}:events`, 60)
    .exec();
  if (wait) await redis.wait(1, 1000);
  return performance.now() - t0;
}

main(async () => {
  const group = await startSentinelGroup();
  onCleanup(() => group.close());
  const redis = group.connect(await group.primaryPort());
  for (const wait of [false, true]) {
    const serial: number[] = [];
    for (let i = 0; i < N; i++) serial.push(await ending(redis, i, wait));
    const parallel: number[] = [];
    for (let i = 0; i < N; i += PARALLEL) {
      parallel.push(...(await Promise.all(Array.from({ length: PARALLEL }, (_, j) => ending(redis, i + j, wait)))));
    }
    console.log(
      JSON.stringify({ figure: 'run-ending', wait_replicas: wait ? 1 : 0, one_at_a_time: summarize(serial) }),
    );
    console.log(
      JSON.stringify({
        figure: 'run-ending',
        wait_replicas: wait ? 1 : 0,
        in_flight: PARALLEL,
        ...summarize(parallel),
      }),
    );
  }
});
