import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { CHART_DIR, helmPath, kubectlPath } from './helm.ts';
import { kubeCluster } from './cluster.ts';

const run = promisify(execFile);

/**
 * `helm install` of the chart into the test cluster's real API server: every object the chart renders passes the
 * API server's validation and defaulting, its admission (Pod Security `restricted` on the namespaces, the
 * RuntimeClass, the quota) and no Pod template draws a Pod Security warning. The chart's own Pods do not run here:
 * their application image (sandgate/app) is not on the node, so they wait for a pull that cannot happen.
 */
for (const [title, values] of [
  ['default values', {}],
  [
    'every option on',
    {
      gateway: { replicas: 3 },
      worker: { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 20, waitingPerWorker: '2' } },
      sandbox: {
        namespace: 'SANDBOXES',
        createNamespace: true,
        runtimeClassName: 'gvisor-SUFFIX',
        runtimeClass: { create: true, name: 'gvisor-SUFFIX' },
        maxPods: 50,
      },
      rbac: { readEvents: true },
      networkPolicy: { dns: { enabled: false } },
    },
  ],
] as const) {
  test(`helm install into the real API server, ${title}: every object accepted, no Pod Security warning`, async (t) => {
    const { adminKubeconfig } = await kubeCluster();
    const suffix = randomBytes(3).toString('hex');
    const namespace = `sgchart-${suffix}`;
    const dir = await mkdtemp(join(tmpdir(), 'sandgate-helm-install-'));
    const kubectl = async (...args: string[]) =>
      (await run(await kubectlPath(), ['--kubeconfig', adminKubeconfig, ...args])).stdout;
    await kubectl('create', 'namespace', namespace);
    await kubectl('label', 'namespace', namespace, 'pod-security.kubernetes.io/enforce=restricted');
    const file = join(dir, 'values.yaml');
    const text = JSON.stringify({ redis: { url: 'redis://redis.data.svc:6379' }, ...values })
      .replaceAll('SANDBOXES', `${namespace}-sbx`)
      .replaceAll('SUFFIX', suffix);
    await writeFile(file, text);
    t.after(async () => {
      await run(await helmPath(), ['--kubeconfig', adminKubeconfig, 'uninstall', 'sg', '-n', namespace]).catch(
        () => {},
      );
      await kubectl('delete', 'namespace', namespace, `${namespace}-sbx`, '--ignore-not-found', '--wait=false');
      await rm(dir, { recursive: true, force: true });
    });

    const installed = await run(await helmPath(), [
      '--kubeconfig',
      adminKubeconfig,
      'install',
      'sg',
      CHART_DIR,
      '-n',
      namespace,
      '-f',
      file,
    ]);
    assert.match(installed.stdout, /STATUS: deployed/);
    assert.doesNotMatch(installed.stderr, /PodSecurity|[Ww]arning/, installed.stderr);

    const manifest = await run(await helmPath(), [
      '--kubeconfig',
      adminKubeconfig,
      ...['get', 'manifest', 'sg', '-n', namespace],
    ]);
    const objects = parseAllDocuments(manifest.stdout)
      .map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace?: string } } | null)
      .filter((o) => o !== null);
    assert.ok(objects.length >= 13, `the release holds ${objects.length} objects`);
    // Each object the release holds is in the API server.
    for (const o of objects) {
      const got = await kubectl(
        'get',
        `${o.kind}/${o.metadata.name}`,
        '-n',
        o.metadata.namespace ?? namespace,
        '-o',
        'name',
      );
      assert.equal(got.trim().split('/')[1], o.metadata.name, `${o.kind} ${o.metadata.name}`);
    }
    const roleObject = objects.find((o) => o.kind === 'Role')!;
    const role = JSON.parse(
      await kubectl('get', 'role', roleObject.metadata.name, '-n', roleObject.metadata.namespace!, '-o', 'json'),
    );
    assert.ok(
      !role.rules.some((r: { resources: string[] }) => r.resources.some((x) => x.includes('exec'))),
      'no exec in the Role the API server holds',
    );
    if (title === 'every option on') {
      const ns = JSON.parse(await kubectl('get', 'namespace', `${namespace}-sbx`, '-o', 'json'));
      assert.equal(ns.metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted');
      assert.equal(JSON.parse(await kubectl('get', 'runtimeclass', `gvisor-${suffix}`, '-o', 'json')).handler, 'runsc');
    }
  });
}
