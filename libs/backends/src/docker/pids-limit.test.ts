import { test } from 'node:test';
import assert from 'node:assert/strict';
import { docker, fixture, newSessionId, runtimes, type Fixture } from '../testing/docker.ts';
import { GVISOR_PIDS_LIMIT } from './sandbox-death.ts';

const hasRunsc = (await runtimes()).includes('runsc');
const NO_RUNSC = { skip: hasRunsc ? false : 'the Docker engine has no runsc runtime (docker info)' };

/**
 * Forks children that stay until the pids limit refuses one, then says so and stops: a program that handles EAGAIN.
 * Under runc that is where it ends; under gVisor the sandbox never gets that far.
 */
const FORK_UNTIL_REFUSED = `
import errno, os, time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError as e:
        print("refused after", children, "children:", errno.errorcode[e.errno], flush=True)
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    children += 1
`;

/** The containers of a fixture's warm pool. */
const poolContainers = async (f: Fixture): Promise<string[]> =>
  (
    await docker.listContainers({
      all: true,
      filters: { label: [`org.sandgate.deployment=${f.deployment}`, 'org.sandgate.kind=pool'] },
    })
  ).map((c) => c.Id);

// gVisor's limits of a pool sandbox cannot be changed by `docker update`: the pool's must be the jobs' (256 MB, 1 CPU).
const RUNSC_POOL = { runtime: 'runsc', poolSize: 1, poolLimits: { memory_mb: 256, cpus: 1 } } as const;

test(
  'gVisor: a pool sandbox ended at the pids limit says pids_limit, and the pool replaces it',
  NO_RUNSC,
  async (t) => {
    const f = await fixture(t, RUNSC_POOL);
    await f.backend.poolReady();
    const [bombed, ...others] = await poolContainers(f);
    assert.ok(bombed !== undefined && others.length === 0, 'one warm sandbox');

    const r = await f.run(f.job({ code: FORK_UNTIL_REFUSED, timeout_ms: 20_000 }));
    assert.deepEqual([r.state, r.reason], ['failed', 'pids_limit'], JSON.stringify(r));
    assert.equal(r.message, `${GVISOR_PIDS_LIMIT} The sandbox stopped during this run (exit status 2).`);
    assert.equal(f.backend.poolStats().hits, 1, 'the bomb ran in the warm sandbox');

    await f.backend.poolReady();
    const next = await f.run(f.job({ code: 'print("fresh")' }));
    assert.deepEqual([next.state, next.stdout], ['completed', 'fresh\n']);
    const stats = f.backend.poolStats();
    assert.deepEqual([stats.hits, stats.reused], [2, 0], 'a warm sandbox, not the one that died');
    const now = await poolContainers(f);
    assert.ok(!now.includes(bombed), 'the dead sandbox is gone from the engine');
  },
);

const FRESH = { session: 'sandbox.', stateful: 'interpreter.' } as const;

test(
  'gVisor: a session sandbox ended at the pids limit says pids_limit; the next run gets a new one',
  NO_RUNSC,
  async (t) => {
    const f = await fixture(t, { runtime: 'runsc' });
    for (const sandbox of ['session', 'stateful'] as const) {
      const session_id = newSessionId();
      const before = await f.run(f.job({ sandbox, session_id, code: 'import os\nprint(os.getpid())' }));
      assert.equal(before.state, 'completed', before.stderr);
      const r = await f.run(f.job({ sandbox, session_id, code: FORK_UNTIL_REFUSED, timeout_ms: 20_000 }));
      assert.deepEqual([r.state, r.reason], ['failed', 'pids_limit'], JSON.stringify(r));
      assert.ok(
        r.message?.startsWith(`${GVISOR_PIDS_LIMIT} The `) && r.message.endsWith(' starts a fresh ' + FRESH[sandbox]),
      );
      const after = await f.run(f.job({ sandbox, session_id, code: 'print("alive")' }));
      assert.deepEqual([sandbox, after.state, after.stdout.trim().split('\n').at(-1)], [sandbox, 'completed', 'alive']);
    }
  },
);

test('gVisor: a program that exits with status 2 on its own is not taken for the pids limit', NO_RUNSC, async (t) => {
  const f = await fixture(t, RUNSC_POOL);
  await f.backend.poolReady();
  const pooled = await f.run(f.job({ code: 'import sys\nsys.exit(2)' }));
  assert.deepEqual([pooled.state, pooled.exit_code, pooled.reason], ['failed', 2, undefined]);
  assert.equal(f.backend.poolStats().hits, 1);
  const session = await f.run(f.job({ sandbox: 'session', code: 'import sys\nsys.exit(2)' }));
  assert.deepEqual([session.state, session.exit_code, session.reason], ['failed', 2, undefined]);
});

test('runc: the same program gets EAGAIN at the pids limit and ends on its own; the pool sandbox serves again', async (t) => {
  const f = await fixture(t, { poolSize: 1, pidsLimit: 64 });
  await f.backend.poolReady();
  const r = await f.run(f.job({ code: FORK_UNTIL_REFUSED, timeout_ms: 20_000 }));
  // The platform did not end this run: the program saw the error and chose its exit, so there is no reason.
  assert.deepEqual([r.state, r.exit_code, r.reason], ['completed', 0, undefined], JSON.stringify(r));
  assert.match(r.stdout, /^refused after \d+ children: EAGAIN\n$/);
  assert.ok(Number(/after (\d+)/.exec(r.stdout)?.[1]) < 64, r.stdout);
  const next = await f.run(f.job({ code: 'print("again")' }));
  assert.equal(next.stdout, 'again\n');
  const stats = f.backend.poolStats();
  assert.deepEqual([stats.hits, stats.reused], [2, 1], 'the reset sandbox took the next run');
});
