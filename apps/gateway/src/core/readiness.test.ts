import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { WorkerInfo } from '@sandgate/state';
import { readiness } from './readiness.ts';

const worker = (over: Partial<WorkerInfo>): WorkerInfo => ({
  id: 'w',
  last_heartbeat_at: new Date().toISOString(),
  concurrency: 2,
  running: 0,
  pool_ready: 0,
  session_sandboxes: 0,
  engine: '',
  backend: 'docker',
  backend_state: 'usable',
  ...over,
});
const down = (reason: string) => worker({ backend_state: 'unusable', backend_reason: reason });

test('ready with Redis and one usable backend, counting the live workers and those with a usable backend', () => {
  assert.deepEqual(readiness('ok', [worker({}), down('engine unreachable: connect ENOENT /x.sock')]), {
    ready: true,
    checks: { redis: 'ok', workers: '2', workers_usable: '1' },
  });
});

test('not ready says why: no worker, no usable backend (each reason once, a few at most), or Redis', () => {
  assert.deepEqual(readiness('ok', []), {
    ready: false,
    detail: 'redis: ok; live workers: 0, with a usable backend: 0',
  });
  const enoent = 'engine unreachable: connect ENOENT /var/run/docker.sock';
  assert.deepEqual(readiness('ok', [down(enoent), down(enoent), worker({ backend_state: 'unknown' })]), {
    ready: false,
    detail: `redis: ok; live workers: 3, with a usable backend: 0 (docker: ${enoent}; docker: not probed yet)`,
  });
  const many = readiness(
    'ok',
    ['a', 'b', 'c', 'd', 'e'].map((r) => down(`engine failed: ${r}`)),
  );
  assert.equal(many.ready, false);
  assert.match(
    !many.ready ? many.detail : '',
    /\(docker: engine failed: a; docker: engine failed: b; docker: engine failed: c; 2 more\)$/,
  );
  assert.deepEqual(readiness('unreachable: connect ECONNREFUSED', []), {
    ready: false,
    detail: 'redis: unreachable: connect ECONNREFUSED; live workers: 0, with a usable backend: 0',
  });
});

test('a worker that reports no backend (a release before backend probes, mid-upgrade) counts as before', () => {
  const older = worker({ backend: '', backend_state: 'unknown' });
  assert.deepEqual(readiness('ok', [older, down('engine unreachable')]), {
    ready: true,
    checks: { redis: 'ok', workers: '2', workers_usable: '1' },
  });
});
