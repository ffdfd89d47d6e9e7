import { test } from 'node:test';
import assert from 'node:assert/strict';
import Dockerode from 'dockerode';
import { startStack, TEST_BACKEND } from './harness.ts';

const runsc =
  TEST_BACKEND === 'docker' && 'runsc' in ((await new Dockerode().info()) as { Runtimes?: object }).Runtimes!;

/** Forks children that stay until the pids limit refuses one, then says so and ends: a program that handles EAGAIN. */
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

for (const runtime of ['runsc', 'runc'] as const) {
  test(
    `a one-shot that reaches the pids limit under ${runtime}: what the API says, and the next one-shot works`,
    { skip: runtime === 'runsc' && !runsc ? 'the Docker engine has no runsc runtime (docker info)' : false },
    async (t) => {
      const s = await startStack({ env: { SANDGATE_RUNTIME: runtime, SANDGATE_POOL_SIZE: '1' } });
      t.after(() => s.close());
      await s.poolReady();
      const bomb = await s.api('POST', '/v1/executions?wait=60', { language: 'python', code: FORK_UNTIL_REFUSED });
      assert.equal(bomb.status, 200, JSON.stringify(bomb.body));
      const r = bomb.body.result;
      if (runtime === 'runsc') {
        // gVisor's kernel stops the whole sandbox when the host refuses it a process: the platform ended the run.
        assert.deepEqual([r.state, r.reason], ['failed', 'pids_limit'], JSON.stringify(r));
        assert.match(r.message, /limit on processes and threads/);
      } else {
        // runc gives the program EAGAIN; it ended on its own, so no reason.
        assert.deepEqual([r.state, r.reason], ['completed', undefined], JSON.stringify(r));
        assert.match(r.stdout, /^refused after \d+ children: EAGAIN\n$/);
      }
      await s.poolReady();
      const next = await s.api('POST', '/v1/executions?wait=60', { language: 'python', code: 'print("next")' });
      assert.deepEqual([next.body.result.state, next.body.result.stdout], ['completed', 'next\n']);
    },
  );
}
