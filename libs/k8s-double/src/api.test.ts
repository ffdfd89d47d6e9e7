import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { failure, pod, shContainer, startDouble } from './testing.ts';

const sleeper = (name: string, labels: Record<string, string> = {}) =>
  pod(name, { containers: [shContainer('runner', 'sleep 300')] }, labels);

test('errors are Status objects: 404, 409 AlreadyExists, 422 Invalid with causes, 400 BadRequest, 401', async (t) => {
  const f = await startDouble(t);
  const missing = await failure(f.core.readNamespacedPod({ name: 'nope', namespace: f.namespace }));
  assert.deepEqual(missing, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'pods "nope" not found',
    reason: 'NotFound',
    details: { name: 'nope', kind: 'pods' },
    code: 404,
  });
  await f.core.createNamespacedSecret({
    namespace: f.namespace,
    body: { metadata: { name: 's1' }, stringData: { a: 'b' } },
  });
  const dup = await failure(
    f.core.createNamespacedSecret({ namespace: f.namespace, body: { metadata: { name: 's1' } } }),
  );
  assert.equal(dup.code, 409);
  assert.equal(dup.reason, 'AlreadyExists');
  assert.equal(dup.message, 'secrets "s1" already exists');

  const bad = await failure(
    f.core.createNamespacedPod({
      namespace: f.namespace,
      body: pod('Bad_Name', {
        containers: [shContainer('runner', 'true'), { ...shContainer('runner', 'true'), image: '' }],
      }),
    }),
  );
  assert.equal(bad.code, 422);
  assert.equal(bad.reason, 'Invalid');
  assert.match(
    bad.message,
    /^Pod "Bad_Name" is invalid: \[metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/,
  );
  const fields = (bad.details as { causes: { field: string; reason: string }[] }).causes.map(
    (c) => `${c.reason} ${c.field}`,
  );
  assert.deepEqual(fields, [
    'FieldValueInvalid metadata.name',
    'FieldValueDuplicate spec.containers[1].name',
    'FieldValueRequired spec.containers[1].image',
  ]);

  const required = await failure(
    f.core.createNamespacedPod({
      namespace: f.namespace,
      body: { metadata: { name: 'x' }, spec: { containers: [{ image: 'i' }] } } as never,
    }),
  );
  assert.equal(required.code, 422);
  assert.equal(required.message, 'Pod "x" is invalid: spec.containers[0].name: Required value');

  const typed = await failure(
    f.core.createNamespacedPod({
      namespace: f.namespace,
      body: { metadata: { name: 'x' }, spec: { activeDeadlineSeconds: 'soon', containers: [] } } as never,
    }),
  );
  assert.equal(typed.code, 400);
  assert.match(typed.message, /^Pod in version "v1" cannot be handled as a Pod: .*spec\.activeDeadlineSeconds/);

  const wrongNs = await failure(
    f.core.createNamespacedSecret({ namespace: f.namespace, body: { metadata: { name: 's2', namespace: 'other' } } }),
  );
  assert.equal(wrongNs.code, 400);
  const noNs = await failure(
    f.core.createNamespacedSecret({ namespace: 'absent', body: { metadata: { name: 's2' } } }),
  );
  assert.equal(noNs.message, 'namespaces "absent" not found');

  const res = await fetch(`${f.double.url}/api/v1/namespaces/${f.namespace}/pods`, {
    headers: { authorization: 'Bearer wrong' },
  });
  assert.equal(res.status, 401);
  assert.equal(((await res.json()) as { reason: string }).reason, 'Unauthorized');
  assert.equal(f.double.calls.at(-1)?.status, 401);
});

test('Secrets: stringData stored as data, PUT replaces, stale resourceVersion is 409, delete is Success', async (t) => {
  const f = await startDouble(t);
  const created = await f.core.createNamespacedSecret({
    namespace: f.namespace,
    body: { metadata: { name: 'spec' }, stringData: { 'spec.json': '{}' } },
  });
  assert.equal(created.stringData, undefined);
  assert.deepEqual(created.data, { 'spec.json': Buffer.from('{}').toString('base64') });
  assert.equal(created.type, 'Opaque');
  const replaced = await f.core.replaceNamespacedSecret({
    name: 'spec',
    namespace: f.namespace,
    body: { metadata: { name: 'spec' }, stringData: { 'spec.json': '{"v":2}' } },
  });
  assert.equal(replaced.metadata?.uid, created.metadata?.uid);
  assert.notEqual(replaced.metadata?.resourceVersion, created.metadata?.resourceVersion);
  assert.equal(Buffer.from(replaced.data!['spec.json']!, 'base64').toString(), '{"v":2}');
  const stale = await failure(
    f.core.replaceNamespacedSecret({
      name: 'spec',
      namespace: f.namespace,
      body: { metadata: { name: 'spec', resourceVersion: created.metadata!.resourceVersion! }, stringData: { a: 'b' } },
    }),
  );
  assert.equal(stale.code, 409);
  assert.equal(stale.reason, 'Conflict');
  const missing = await failure(
    f.core.replaceNamespacedSecret({ name: 'nope', namespace: f.namespace, body: { metadata: { name: 'nope' } } }),
  );
  assert.equal(missing.code, 404);
  const badKey = await failure(
    f.core.createNamespacedSecret({
      namespace: f.namespace,
      body: { metadata: { name: 'k' }, stringData: { 'a/b': 'x' } },
    }),
  );
  assert.equal(badKey.code, 422);
  const big = await failure(
    f.core.createNamespacedSecret({
      namespace: f.namespace,
      body: { metadata: { name: 'big' }, stringData: { a: 'x'.repeat((1 << 20) + 1) } },
    }),
  );
  assert.equal(big.message, 'Secret "big" is invalid: data: Too long: must have at most 1048576 bytes');
  const del = await f.core.deleteNamespacedSecret({ name: 'spec', namespace: f.namespace });
  assert.equal((del as { status?: string }).status, 'Success');
  assert.equal((await failure(f.core.readNamespacedSecret({ name: 'spec', namespace: f.namespace }))).code, 404);
});

test('lists: label and field selectors, limit/continue pages in name order, an expired token is 410', async (t) => {
  const f = await startDouble(t);
  for (const i of [3, 1, 5, 2, 4]) {
    await f.core.createNamespacedSecret({
      namespace: f.namespace,
      body: { metadata: { name: `s-${i}`, labels: { app: 'sg', odd: String(i % 2 === 1) } } },
    });
  }
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: { metadata: { name: 'unlabelled' } } });
  const odd = await f.core.listNamespacedSecret({ namespace: f.namespace, labelSelector: 'app=sg,odd=true' });
  assert.deepEqual(
    odd.items.map((s) => s.metadata?.name),
    ['s-1', 's-3', 's-5'],
  );
  const notIn = await f.core.listNamespacedSecret({ namespace: f.namespace, labelSelector: 'odd notin (true),app' });
  assert.deepEqual(
    notIn.items.map((s) => s.metadata?.name),
    ['s-2', 's-4'],
  );
  const byName = await f.core.listNamespacedSecret({ namespace: f.namespace, fieldSelector: 'metadata.name=s-4' });
  assert.deepEqual(
    byName.items.map((s) => s.metadata?.name),
    ['s-4'],
  );
  const names: string[] = [];
  let cont: string | undefined;
  let pages = 0;
  do {
    const page = await f.core.listNamespacedSecret({
      namespace: f.namespace,
      labelSelector: 'app=sg',
      limit: 2,
      ...(cont ? { _continue: cont } : {}),
    });
    names.push(...page.items.map((s) => s.metadata!.name!));
    cont = page.metadata?._continue;
    if (cont) assert.equal(page.metadata?.remainingItemCount, 5 - names.length);
    pages++;
  } while (cont);
  assert.deepEqual(names, ['s-1', 's-2', 's-3', 's-4', 's-5']);
  assert.equal(pages, 3);
  const first = await f.core.listNamespacedSecret({ namespace: f.namespace, limit: 1 });
  f.double.expireContinueTokens();
  const expired = await failure(
    f.core.listNamespacedSecret({ namespace: f.namespace, limit: 1, _continue: first.metadata!._continue! }),
  );
  assert.equal(expired.code, 410);
  assert.equal(expired.reason, 'Expired');
  const badSel = await failure(f.core.listNamespacedSecret({ namespace: f.namespace, labelSelector: 'a b' }));
  assert.equal(badSel.code, 400);
  const badField = await failure(f.core.listNamespacedPod({ namespace: f.namespace, fieldSelector: 'spec.image=x' }));
  assert.equal(badField.message, 'field label not supported: spec.image');
});

test('admission: Pod Security, a ResourceQuota on Pods and Role rules answer 403 as a cluster does', async (t) => {
  const f = await startDouble(t, {
    quota: { pods: 1 },
    rbac: {
      user: 'system:serviceaccount:sandgate:worker',
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['create', 'get'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      ],
    },
  });
  const loose = pod('loose', { containers: [{ name: 'runner', image: 'sandgate/runtime:1', command: ['true'] }] });
  const psa = await failure(f.core.createNamespacedPod({ namespace: f.namespace, body: loose }));
  assert.equal(psa.code, 403);
  assert.equal(
    psa.message,
    [
      'pods "loose" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false',
      '(container "runner" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities',
      '(container "runner" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true',
      '(pod or container "runner" must set securityContext.runAsNonRoot=true), seccompProfile',
      '(pod or container "runner" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
    ].join(' '),
  );
  await f.core.createNamespacedPod({ namespace: f.namespace, body: sleeper('first') });
  const quota = await failure(f.core.createNamespacedPod({ namespace: f.namespace, body: sleeper('second') }));
  assert.equal(quota.code, 403);
  assert.equal(
    quota.message,
    'pods "second" is forbidden: exceeded quota: sandbox-quota, requested: pods=1, used: pods=1, limited: pods=1',
  );
  const list = await failure(f.core.listNamespacedPod({ namespace: f.namespace }));
  assert.equal(list.code, 403);
  assert.equal(
    list.message,
    'pods is forbidden: User "system:serviceaccount:sandgate:worker" cannot list resource "pods" in API group "" ' +
      `in the namespace "${f.namespace}"`,
  );
  const log = await failure(f.core.readNamespacedPodLog({ name: 'first', namespace: f.namespace }));
  assert.match(log.message, /cannot get resource "pods\/log"/);
  const exec = await fetch(`${f.double.url}/api/v1/namespaces/${f.namespace}/pods/first/exec?command=id`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.double.token}` },
  });
  assert.equal(exec.status, 403, 'exec is create on pods/exec, which the rules do not grant');
  assert.deepEqual(f.double.verbs(), ['create pods', 'create pods/exec', 'get pods/log', 'list pods']);
});

test('faults on demand: 429 with Retry-After, 500, 503, reset, hang, each only as often as armed', async (t) => {
  const f = await startDouble(t);
  const url = `${f.double.url}/api/v1/namespaces/${f.namespace}/secrets`;
  const get = (signal?: AbortSignal) =>
    fetch(url, { headers: { authorization: `Bearer ${f.double.token}` }, ...(signal ? { signal } : {}) });
  f.double.faults.inject({
    match: { verb: 'list', resource: 'secrets' },
    action: { status: 429, retryAfterSeconds: 2 },
    times: 2,
  });
  for (let i = 0; i < 2; i++) {
    const r = await get();
    assert.equal(r.status, 429);
    assert.equal(r.headers.get('retry-after'), '2');
    assert.equal(((await r.json()) as { reason: string }).reason, 'TooManyRequests');
  }
  assert.equal((await get()).status, 200, 'spent after two');
  const viaClient = await failure(
    (() => {
      f.double.faults.inject({ match: { resource: 'secrets' }, action: { status: 503, retryAfterSeconds: 1 } });
      return f.core.listNamespacedSecret({ namespace: f.namespace });
    })(),
  );
  assert.equal(viaClient.code, 503);
  f.double.faults.inject({ match: { resource: 'secrets' }, action: { status: 500 } });
  assert.equal((await get()).status, 500);
  f.double.faults.inject({ match: { resource: 'secrets' }, action: { reset: true } });
  await assert.rejects(get(), /fetch failed/);
  f.double.faults.inject({ match: { resource: 'secrets' }, action: { hang: true } });
  await assert.rejects(get(AbortSignal.timeout(300)), /aborted|timeout/i);
  assert.equal((await get()).status, 200);
  assert.deepEqual(
    f.double.calls.filter((c) => c.resource === 'secrets').map((c) => c.status),
    [429, 429, 200, 503, 500, -1, -2, 200],
  );
});

test('a kubeconfig file reaches the double as a cluster: http, skipTLSVerify, bearer token, namespace', async (t) => {
  const f = await startDouble(t);
  const dir = await mkdtemp(join(tmpdir(), 'k8s-double-kubeconfig-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'config'), f.double.kubeconfigYaml());
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(join(dir, 'config'));
  assert.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, f.namespace);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespacedSecret({ namespace: f.namespace, body: { metadata: { name: 'via-file' } } });
  assert.deepEqual(
    (await core.listNamespacedSecret({ namespace: f.namespace })).items.map((s) => s.metadata?.name),
    ['via-file'],
  );
  const last = f.double.calls.at(-1)!;
  assert.deepEqual(
    [last.method, last.path, last.verb, last.status],
    ['GET', `/api/v1/namespaces/${f.namespace}/secrets`, 'list', 200],
  );
});

test('cluster-wide lists span namespaces; creating needs a namespace', async (t) => {
  const f = await startDouble(t, { namespaces: ['sandgate', 'other'] });
  await f.core.createNamespacedSecret({ namespace: 'sandgate', body: { metadata: { name: 'a', labels: { x: '1' } } } });
  await f.core.createNamespacedSecret({ namespace: 'other', body: { metadata: { name: 'b', labels: { x: '1' } } } });
  const all = await f.core.listSecretForAllNamespaces({ labelSelector: 'x=1' });
  assert.deepEqual(
    all.items.map((s) => `${s.metadata?.namespace}/${s.metadata?.name}`),
    ['other/b', 'sandgate/a'],
  );
  const res = await fetch(`${f.double.url}/api/v1/secrets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.double.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ metadata: { name: 'c' } }),
  });
  assert.equal(res.status, 405);
});
