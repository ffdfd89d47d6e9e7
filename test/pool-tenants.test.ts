import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';

/**
 * Which sandbox this is — its hostname and when its PID 1 started (a Pod on the Kubernetes double may share the
 * hostname of others) — and what an earlier run could leave.
 */
const LOOK = `
import json, os, socket
procs = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid())]
started = open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19]
print(json.dumps({"sandbox": socket.gethostname() + "@" + started, "tmp": os.listdir("/tmp"), "data": sorted(os.listdir("/mnt/data")), "procs": len(procs)}))
`;
const LEAVE = `
import os, subprocess
open("/tmp/secret", "w").write("mine")
open("made.txt", "w").write("mine")
subprocess.Popen(["sleep", "600"], start_new_session=True)
${LOOK}`;

test('one-shots reuse a reset pool sandbox within their tenant only, through the HTTP API', async (t) => {
  const [keyA, keyB] = ['a'.repeat(32), 'b'.repeat(32)];
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${keyA}:acme,${keyB}:globex`, SANDGATE_POOL_SIZE: '1' } });
  t.after(() => s.close());
  const run = async (key: string, code: string) => {
    const r = await s.api(
      'POST',
      '/v1/executions?wait=60',
      { language: 'python', code },
      { authorization: `Bearer ${key}` },
    );
    assert.equal(r.body.result?.state, 'completed', JSON.stringify(r.body));
    return JSON.parse(r.body.result.stdout.trim().split('\n').at(-1)) as {
      sandbox: string;
      tmp: string[];
      data: string[];
      procs: number;
    };
  };
  await s.poolReady();
  const first = await run(keyA, LEAVE);
  assert.ok(first.tmp.includes('secret') && first.procs >= 1, 'the leftovers are really there');
  await s.poolReady();
  const stranger = await run(keyB, LOOK);
  assert.notEqual(stranger.sandbox, first.sandbox, 'another tenant never gets the sandbox');
  assert.ok(!stranger.tmp.includes('secret'));
  const again = await run(keyA, LOOK);
  assert.equal(again.sandbox, first.sandbox, 'the tenant gets its reset sandbox back');
  assert.deepEqual([again.tmp.includes('secret'), again.data, again.procs], [false, [], 0]);
});
