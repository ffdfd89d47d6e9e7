import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentSpec, AGENT_PATH, sessionContainerName } from './agent-spec.ts';
import { hostConfig, type SandboxSettings } from './container-spec.ts';

const settings: SandboxSettings = {
  image: 'img:1', runtime: 'runsc', user: '1000:1000', pidsLimit: 64, tmpfsBytes: 1024, nofile: 512, deployment: 'dep-a',
};

test('an agent sandbox has the same lock-down as a one-execution sandbox, and keeps stdin open', () => {
  const limits = { memory_mb: 256, cpus: 0.5 };
  const spec = agentSpec({ name: 'sandgate-p-1', labels: { a: 'b' }, limits, workspaceDir: '/data/pool/1', prewarm: 'fresh' }, settings);
  assert.deepEqual(spec.HostConfig, hostConfig(limits, '/data/pool/1', settings));
  assert.equal(spec.HostConfig?.Runtime, 'runsc');
  assert.equal(spec.HostConfig?.NetworkMode, 'none');
  assert.equal(spec.NetworkDisabled, true);
  assert.deepEqual(spec.Cmd, [
    'setpriv', '--reuid=1000', '--regid=1000', '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--',
    'python3', '-u', AGENT_PATH, '--prewarm=fresh',
  ]);
  assert.deepEqual(spec.Env, [], 'no variable of the worker, and none of any job');
  assert.equal(spec.User, '0:0', 'root for the init and setpriv alone, which drops to the sandbox user');
  assert.deepEqual(spec.HostConfig?.CapAdd, ['SETUID', 'SETGID', 'SETPCAP']);
  assert.equal(spec.OpenStdin, true);
  assert.equal(spec.StdinOnce, false);
  assert.equal(spec.Tty, false);
  assert.deepEqual(spec.Labels, { a: 'b' });
  assert.equal(sessionContainerName('sess_0123456789ab'), 'sandgate-s-sess_0123456789ab');
});
