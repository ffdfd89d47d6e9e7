import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startStack, until, type Stack } from '../harness.ts';
import { kubeCluster } from './cluster.ts';

/**
 * Templates on the Kubernetes backend: a recipe names an image the operator built and pushed (the backend builds
 * nothing). Here the "pushed" image is the runtime image under a name of the template's own, tagged in the node's
 * containerd, so that a run can only find the template's file if its Pod really ran the template's image.
 */

const run = promisify(execFile);
const KEY = 'k'.repeat(32);
const OPERATOR = 'operator-key-k8s-templates-0123456789';
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** What the kubelet asks containerd for when a Pod names `ref` (docker.io/library/x:t, docker.io/org/x:t, host/x:t). */
function normalized(ref: string): string {
  const r = ref.includes('/') ? ref : `library/${ref}`;
  const host = r.split('/')[0]!;
  return host.includes('.') || host.includes(':') || host === 'localhost' ? r : `docker.io/${r}`;
}

test('kubernetes: a template names its image; its runs and its session Pods run that image, with its env and limits', async (t) => {
  const { dir } = await kubeCluster();
  const ctr = (...args: string[]) => run('ctr', ['-a', join(dir, 'run', 'containerd.sock'), '-n', 'k8s.io', ...args]);
  const runtime = normalized(process.env.SANDGATE_IMAGE ?? 'sandgate/runtime:1');
  const image = `sandgate.local/k8s-template-${randomBytes(4).toString('hex')}:1`;
  // A template of its own image for the pool: templates of one image share one pool.
  const pooledImage = `sandgate.local/k8s-template-pooled-${randomBytes(4).toString('hex')}:1`;
  const absent = `sandgate.local/k8s-template-absent-${randomBytes(4).toString('hex')}:1`;
  for (const ref of [image, pooledImage]) {
    await ctr('images', 'tag', runtime, ref);
    t.after(() => ctr('images', 'rm', ref).catch(() => undefined));
  }

  const files = await mkdtemp(join(tmpdir(), 'sg-k8s-templates-'));
  t.after(() => rm(files, { recursive: true, force: true }));
  const templatesFile = join(files, 'templates.json');
  await writeFile(
    templatesFile,
    JSON.stringify({
      templates: [
        { name: 'named', image, env: { TEMPLATE_HOME: '/opt/named' }, limits: { memory_mb: 256 } },
        { name: 'unpullable', image: absent },
        { name: 'pooled', image: pooledImage, env: { TEMPLATE_HOME: '/opt/pooled' }, pool_size: 1 },
      ],
    }),
  );
  const s: Stack = await startStack({
    backend: 'kubernetes',
    env: {
      SANDGATE_API_KEYS: `${KEY}:acme`,
      SANDGATE_OPERATOR_KEYS: OPERATOR,
      SANDGATE_TEMPLATES: templatesFile,
      SANDGATE_POOL_SIZE: '0',
    },
    apiKey: KEY,
  });
  t.after(() => s.close());
  const ns = s.cluster!;

  await t.test('the file declares them ready at once, with the images they name', async () => {
    const listed = await s.api('GET', '/v1/templates', undefined, bearer(OPERATOR));
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    const byName = new Map(listed.body.templates.map((x: { name: string }) => [x.name, x]));
    assert.deepEqual(
      [...byName.keys()].sort(),
      ['named', 'pooled', 'unpullable'],
      'the templates of the file are listed',
    );
    assert.equal((byName.get('named') as { state: string }).state, 'ready');
    assert.equal((byName.get('named') as { image: string }).image, image);
  });

  await t.test(
    "a one-shot of the template runs in a Pod of the template's image, with its env and limits",
    async () => {
      const r = await s.api('POST', '/v1/executions?wait=120', {
        language: 'python',
        template: 'named',
        code:
          'import os\nprint(os.environ["TEMPLATE_HOME"])\n' +
          'print(open("/sys/fs/cgroup/memory.max").read().strip() if os.path.exists("/sys/fs/cgroup/memory.max") ' +
          'else open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read().strip())',
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.result.state, 'completed', r.body.result.stderr);
      const [home, limit] = (r.body.result.stdout as string).trim().split('\n');
      assert.equal(home, '/opt/named', "the template's env reaches the code");
      assert.equal(Number(limit), 256 * 1024 * 1024, "the template's memory limit is the Pod's");
    },
  );

  await t.test("a session of the template: its Pod's image is the template's, and the session says which", async () => {
    const made = await s.api('POST', '/v1/sessions', { template: 'named' });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.template, 'named');
    const id = made.body.id as string;
    const r = await s.api('POST', '/v1/executions?wait=120', {
      session_id: id,
      language: 'bash',
      code: 'echo "$TEMPLATE_HOME"',
    });
    assert.equal(r.body.result?.stdout, '/opt/named\n', JSON.stringify(r.body));
    const pods = await ns.core.listNamespacedPod({
      namespace: ns.name,
      labelSelector: `org.sandgate.session=${id}`,
    });
    assert.equal(pods.items.length, 1, "the session's Pod");
    const images = pods.items[0]!.spec!.containers.map((c) => c.image);
    assert.ok(images.includes(image), `the session Pod runs ${image}: ${images.join(', ')}`);
    assert.ok(!images.some((i) => i && normalized(i) === runtime), 'and not the runtime image');
    assert.equal((await s.api('DELETE', `/v1/sessions/${id}`)).status, 204);
  });

  await t.test("a template's warm Pod serves its one-shot, counted as a hit of that template", async () => {
    const pools = async () =>
      (await s.api('GET', '/v1/system/stats', undefined, bearer(OPERATOR))).body.pool.templates as Record<
        string,
        { ready: number; hits: number; misses: number }
      >;
    await until('the template pool to hold its warm Pod', async () =>
      (await pools()).pooled?.ready === 1 ? true : null,
    );
    const warm = await ns.core.listNamespacedPod({ namespace: ns.name });
    assert.ok(
      warm.items.some((p) => p.spec!.containers.some((c) => c.image === pooledImage)),
      "the warm Pod runs the template's image",
    );
    const r = await s.api('POST', '/v1/executions?wait=120', {
      language: 'bash',
      template: 'pooled',
      code: 'echo "$TEMPLATE_HOME"',
    });
    assert.equal(r.body.result?.stdout, '/opt/pooled\n', JSON.stringify(r.body));
    const figures = await until('the hit to be counted', async () => {
      const p = (await pools()).pooled;
      return p && p.hits >= 1 ? p : null;
    });
    assert.equal(figures.misses, 0, 'the run was served by the pool');
  });

  await t.test('a template whose image cannot be pulled fails its run with the reason, and leaves no Pod', async () => {
    const r = await s.api('POST', '/v1/executions?wait=180', {
      language: 'python',
      template: 'unpullable',
      code: 'print(1)',
      // Harvest waits for the runner as long as the run may last: a short run ends sooner.
      timeout_ms: 5000,
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.notEqual(r.body.result.state, 'completed');
    assert.match(JSON.stringify(r.body.result), /ImagePull|ErrImage|pull/i, 'the result names the image pull');
    await until('no Pod of the run is left', async () => {
      const pods = await ns.core.listNamespacedPod({
        namespace: ns.name,
        labelSelector: `org.sandgate.execution=${r.body.id}`,
      });
      return pods.items.length === 0 ? true : null;
    });
  });
});
