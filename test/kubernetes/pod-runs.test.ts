import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from '../harness.ts';

test('kubernetes: a one-shot runs in a Pod: output, exit code, stdin and env, an artifact, through the gateway', async (t) => {
  const s = await startStack({ backend: 'kubernetes' });
  t.after(() => s.close());
  const created = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python', stdin: 'from stdin', env: { GREETING: 'hello' },
    code: 'import os, sys\nprint(os.environ["GREETING"], sys.stdin.read())\nprint("to stderr", file=sys.stderr)\n'
      + 'open("out.txt", "w").write("made in a pod")\nsys.exit(3)',
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  console.log(JSON.stringify(created.body, null, 1));
});
