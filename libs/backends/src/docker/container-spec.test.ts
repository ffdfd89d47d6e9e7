import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ExecutionJob } from '@sandgate/contracts';
import { commandFor } from '../run/sandbox.ts';
import { CAPPED_PATH, containerName, containerSpec, type SandboxSettings } from './container-spec.ts';

const job: ExecutionJob = {
  execution_id: 'exec_0123456789abcdef',
  tenant: 'acme',
  session_id: 'sess_0123456789ab',
  language: 'python',
  code: 'print(1)',
  timeout_ms: 1000,
  memory_mb: 128,
  cpus: 0.5,
  env: { A: '1', B: 'two=2' },
  stdin: null,
  sandbox: 'oneshot',
  generation: 0,
};
const settings: SandboxSettings = {
  image: 'img:1',
  runtime: undefined,
  user: '1000:1000',
  pidsLimit: 128,
  tmpfsBytes: 1024,
  nofile: 1024,
  deployment: 'dep-a',
};

test('the code and its arguments are arguments, never parsed by a shell', () => {
  assert.deepEqual(commandFor('python', 'x; rm -rf /'), ['python3', '-c', 'x; rm -rf /']);
  assert.deepEqual(commandFor('javascript', 'x'), ['node', '-e', 'x', '[eval]']);
  assert.deepEqual(commandFor('typescript', 'x'), ['sandgate-ts', 'x']);
  assert.deepEqual(commandFor('bash', 'x'), ['bash', '-c', 'x', 'bash']);
  // Each argument where the language's scripts look for it: sys.argv[1:], process.argv.slice(2), $1….
  const args = ['a b', '$(id)'];
  assert.deepEqual(commandFor('python', 'x', args), ['python3', '-c', 'x', 'a b', '$(id)']);
  assert.deepEqual(commandFor('javascript', 'x', args), ['node', '-e', 'x', '[eval]', 'a b', '$(id)']);
  assert.deepEqual(commandFor('typescript', 'x', args), ['sandgate-ts', 'x', 'a b', '$(id)']);
  assert.deepEqual(commandFor('bash', 'x', args), ['bash', '-c', 'x', 'bash', 'a b', '$(id)']);
});

test('the spec locks the sandbox down and carries only the job env', () => {
  process.env.SANDGATE_SPEC_SECRET = 'leak';
  const spec = containerSpec(job, '/data/sessions/sess_0123456789ab', settings, 4096);
  delete process.env.SANDGATE_SPEC_SECRET;
  assert.equal(spec.name, containerName(job.execution_id));
  assert.equal(spec.name, 'sandgate-exec_0123456789abcdef');
  assert.deepEqual(spec.Env, ['A=1', 'B=two=2']);
  assert.equal(spec.NetworkDisabled, true);
  assert.equal(spec.OpenStdin, false);
  assert.equal(spec.User, '0:0', 'root only for the init and setpriv');
  assert.deepEqual(spec.Cmd, [
    'setpriv',
    '--reuid=1000',
    '--regid=1000',
    '--clear-groups',
    '--inh-caps=-all',
    '--bounding-set=-all',
    '--',
    'python3',
    '-I',
    '-S',
    CAPPED_PATH,
    '4096',
    '--',
    'python3',
    '-c',
    'print(1)',
  ]);
  assert.equal(spec.Labels?.['org.sandgate.tenant'], 'acme');
  assert.equal(spec.Labels?.['org.sandgate.deployment'], 'dep-a');
  assert.equal(spec.Labels?.['org.sandgate.kind'], 'execution');
  const h = spec.HostConfig!;
  assert.equal(h.NetworkMode, 'none');
  assert.deepEqual(h.CapDrop, ['ALL']);
  assert.deepEqual(h.SecurityOpt, ['no-new-privileges']);
  assert.equal(h.ReadonlyRootfs, true);
  assert.equal(h.Memory, 128 * 1024 * 1024);
  assert.equal(h.MemorySwap, h.Memory);
  assert.equal(h.NanoCpus, 500_000_000);
  assert.equal(h.PidsLimit, 128);
  assert.deepEqual(h.Tmpfs, { '/tmp': 'rw,nosuid,nodev,size=1024' });
  assert.deepEqual(h.Mounts, [
    { Type: 'bind', Source: '/data/sessions/sess_0123456789ab', Target: '/mnt/data', ReadOnly: false },
  ]);
  assert.equal(h.Runtime, undefined);
});

test('stdin and the runtime are set only when asked for', () => {
  const spec = containerSpec({ ...job, stdin: 'in' }, '/d', { ...settings, runtime: 'runsc' }, 4096);
  assert.equal(spec.OpenStdin, true);
  assert.equal(spec.StdinOnce, true);
  assert.equal(spec.AttachStdin, true);
  assert.equal(spec.HostConfig?.Runtime, 'runsc');
});
