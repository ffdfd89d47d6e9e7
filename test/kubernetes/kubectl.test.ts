import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { podName } from '@sandgate/backends/testing';
import { startStack, until } from '../harness.ts';
import { kubectlPath } from './helm.ts';

const run = promisify(execFile);

/**
 * The real kubectl (v1.34.5) on what sandgate made on the test cluster, as an operator would use it: get, describe
 * and logs as the cluster's admin; delete and `auth can-i` with the worker's own credentials (its ServiceAccount
 * token and the chart's Role), which allow exactly the exec-free contract.
 */
test('kubectl: get, describe, logs and delete on a run in progress; auth can-i as the worker', async (t) => {
  const s = await startStack({ backend: 'kubernetes', env: { SANDGATE_POOL_SIZE: '0' } });
  t.after(() => s.close());
  const ns = s.cluster!;
  const bin = await kubectlPath();
  const kubectl = async (as: 'admin' | 'worker', ...args: string[]) => {
    const kubeconfig = as === 'admin' ? ns.cluster.adminKubeconfig : ns.kubeconfigFile;
    const { stdout } = await run(bin, ['--kubeconfig', kubeconfig, '-n', ns.name, ...args]);
    return stdout;
  };
  const created = await s.api('POST', '/v1/executions', {
    language: 'python',
    code: 'import time\nprint("up and running", flush=True)\ntime.sleep(120)',
  });
  assert.equal(created.status, 202);
  const id = created.body.id as string;
  const pod = podName(id);
  // Running once the runner has printed its line (a container that has not started has no log: kubectl logs fails).
  const logs = await until(
    'the runner to print',
    async () => {
      const text = await kubectl('admin', 'logs', pod, '-c', 'runner').catch(() => '');
      return text.includes('\\n"}') ? text : '';
    },
    60_000,
    250,
  );

  await t.test('get pods lists the run Pod, Running, with its containers ready', async () => {
    const line = (await kubectl('admin', 'get', 'pods', '--no-headers')).split('\n').find((l) => l.startsWith(pod));
    assert.ok(line, `kubectl get pods lists ${pod}`);
    assert.match(line, /\s2\/2\s+Running\s/, line);
    const labelled = await kubectl('admin', 'get', 'pods', '-l', `org.sandgate.execution=${id}`, '-o', 'name');
    assert.equal(labelled.trim(), `pod/${pod}`);
  });

  await t.test("describe shows the node, the restricted security context and the kubelet's events", async () => {
    const text = await kubectl('admin', 'describe', 'pod', pod);
    assert.match(text, /^Node:\s+sandgate-node\//m);
    assert.match(text, /^Status:\s+Running$/m);
    assert.match(text, /^Containers:\n\s+runner:/m);
    assert.match(text, /^SeccompProfile:\s+RuntimeDefault$/m);
    assert.match(text, /^IP:\s+10\.217\.\d+\.\d+$/m, 'an address from the CNI bridge');
    assert.match(text, /Successfully assigned .* to sandgate-node/, 'the scheduler bound it');
    assert.match(text, /Started container runner/, 'the kubelet started it');
  });

  await t.test("logs shows the runner's output, framed as the runner writes it for the worker", async () => {
    // One frame per read of the program's pipe: where a line is cut depends on how its writes met the reads.
    const frames = logs
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { t: string; d: string });
    assert.ok(logs.endsWith('\n'), logs);
    assert.deepEqual([...new Set(frames.map((f) => f.t))], ['out'], logs);
    assert.equal(frames.map((f) => f.d).join(''), 'up and running\n');
    assert.match(
      await kubectl('admin', 'logs', pod, '-c', 'runner', '--timestamps'),
      /^\d{4}-\d\d-\d\dT\S+ \{"t":"out"/,
    );
  });

  await t.test('auth can-i as the worker: yes to what the Role grants, no to exec and the rest', async () => {
    const can = async (...args: string[]) =>
      (await kubectl('worker', 'auth', 'can-i', ...args).catch((e: { stdout?: string }) => e.stdout ?? '')).trim();
    // A subresource is asked with --subresource: `can-i create pods/exec` would ask about a Pod named "exec".
    for (const v of ['create pods', 'get pods', 'list pods', 'watch pods', 'delete pods', 'get pods --subresource=log'])
      assert.equal(await can(...v.split(' ')), 'yes', v);
    assert.equal(await can('create', 'secrets'), 'yes', 'create secrets');
    for (const v of [
      'create pods --subresource=exec',
      'get pods --subresource=exec',
      'create pods --subresource=attach',
      'create pods --subresource=portforward',
      'patch pods',
      'update secrets',
      'get secrets',
      'list secrets',
      'delete secrets',
      'deletecollection pods',
      'list events',
    ])
      assert.equal(await can(...v.split(' ')), 'no', v);
    assert.equal(await can('create', 'pods', '-n', 'default'), 'no', 'its own namespace only');
  });

  await t.test('delete pod with the worker credentials: the run ends, reported as the Pod gone', async () => {
    await kubectl('worker', 'delete', 'pod', pod, '--grace-period=0', '--force');
    const ended = await s.api('GET', `/v1/executions/${id}?wait=60`);
    assert.equal(ended.body.state, 'error');
    assert.equal(ended.body.result.reason, 'backend_unavailable');
    assert.match(ended.body.result.message, /deleted/);
    assert.equal(
      (await kubectl('admin', 'get', 'pods', '-l', `org.sandgate.execution=${id}`, '-o', 'name')).trim(),
      '',
    );
  });
});
