import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentCommand, agentSpec, AGENT_PATH, sessionContainerName } from './agent-spec.ts';
import { hostConfig, type SandboxSettings } from './container-spec.ts';

const settings: SandboxSettings = {
  image: 'img:1',
  runtime: 'runsc',
  user: '1000:1000',
  pidsLimit: 64,
  tmpfsBytes: 1024,
  nofile: 512,
  deployment: 'dep-a',
};

test('an agent sandbox has the same lock-down as a one-execution sandbox, and keeps stdin open', () => {
  const limits = { memory_mb: 256, cpus: 0.5 };
  const spec = agentSpec(
    { name: 'sandgate-p-1', labels: { a: 'b' }, limits, workspaceDir: '/data/pool/1', prewarm: 'fresh' },
    settings,
  );
  const host = hostConfig(limits, '/data/pool/1', settings);
  assert.deepEqual(
    spec.HostConfig,
    { ...host, CapAdd: ['SETUID', 'SETGID', 'SETPCAP', 'KILL'] },
    'KILL for the agent alone',
  );
  assert.equal(spec.HostConfig?.Runtime, 'runsc');
  assert.equal(spec.HostConfig?.NetworkMode, 'none');
  assert.equal(spec.NetworkDisabled, true);
  assert.deepEqual(
    spec.Cmd,
    [
      'setpriv',
      '--reuid=1000',
      '--regid=1000',
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--',
      'python3',
      '-u',
      AGENT_PATH,
      '--prewarm=fresh',
    ],
    'under gVisor (no ambient capabilities) the agent is the sandbox user',
  );
  assert.deepEqual(
    agentCommand({ prewarm: 'fresh' }, { user: '1000:1000', runtime: undefined }),
    [
      'setpriv',
      '--reuid=999',
      '--regid=999',
      '--clear-groups',
      '--inh-caps=-all,+setuid,+setgid,+setpcap,+kill',
      '--ambient-caps=+setuid,+setgid,+setpcap,+kill',
      '--bounding-set=-all,+setuid,+setgid,+setpcap,+kill',
      '--',
      'python3',
      '-u',
      '-S',
      AGENT_PATH,
      '--prewarm=fresh',
      '--run-as=1000:1000',
    ],
    'a pool agent runs as a uid of its own and starts programs as the sandbox user',
  );
  assert.deepEqual(
    agentCommand({ prewarm: 'interpreter' }, { user: '1000:1000', runtime: undefined }),
    [
      'setpriv',
      '--reuid=999',
      '--regid=999',
      '--clear-groups',
      '--inh-caps=-all,+setuid,+setgid,+setpcap,+kill',
      '--ambient-caps=+setuid,+setgid,+setpcap,+kill',
      '--bounding-set=-all,+setuid,+setgid,+setpcap,+kill',
      '--',
      'python3',
      '-u',
      '-S',
      AGENT_PATH,
      '--prewarm=interpreter',
      '--run-as=1000:1000',
    ],
    "a stateful session's agent too: its interpreter is a program it starts as the sandbox user",
  );
  assert.deepEqual(spec.Env, [], 'no variable of the worker, and none of any job');
  assert.equal(spec.User, '0:0', 'root for the init and setpriv alone, which drops to the sandbox user');
  assert.deepEqual(spec.HostConfig?.CapAdd, ['SETUID', 'SETGID', 'SETPCAP', 'KILL']);
  assert.equal(spec.OpenStdin, true);
  assert.equal(spec.StdinOnce, false);
  assert.equal(spec.Tty, false);
  assert.deepEqual(spec.Labels, { a: 'b' });
  assert.equal(sessionContainerName('sess_0123456789ab'), 'sandgate-s-sess_0123456789ab');
});
