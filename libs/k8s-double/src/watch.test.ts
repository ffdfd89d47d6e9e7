import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pod, shContainer, startDouble, watchFeed, type DoubleFixture, type WatchEvent } from './testing.ts';

const secret = (name: string, team: string, value = 'v1') => ({
  metadata: { name, labels: { team } },
  stringData: { key: value },
});

const summary = (e: WatchEvent) => `${e.type} ${e.object.metadata?.name ?? ''}`.trim();
const rvOf = (e: WatchEvent) => Number(e.object.metadata?.resourceVersion);

async function replace(f: DoubleFixture, name: string, team: string, value: string): Promise<void> {
  await f.core.replaceNamespacedSecret({ name, namespace: f.namespace, body: secret(name, team, value) });
}

test('watch: the current objects as ADDED, then changes in order; objects enter and leave the selector', async (t) => {
  const f = await startDouble(t);
  const path = `/api/v1/namespaces/${f.namespace}/secrets`;
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('a', 'red') });
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('b', 'blue') });
  const feed = await watchFeed(t, f, path, { labelSelector: 'team=red' });
  assert.equal(summary(await feed.next()), 'ADDED a', 'the synthetic ADDED of the one matching Secret');

  await replace(f, 'a', 'red', 'v2');
  const modified = await feed.next();
  assert.equal(summary(modified), 'MODIFIED a');
  assert.equal(Buffer.from((modified.object.data as { key: string }).key, 'base64').toString(), 'v2');
  await replace(f, 'b', 'red', 'v1');
  assert.equal(summary(await feed.next()), 'ADDED b', 'b enters the selector');
  await replace(f, 'a', 'blue', 'v3');
  const left = await feed.next();
  assert.equal(summary(left), 'DELETED a', 'a leaves the selector');
  assert.equal(left.object.metadata?.labels?.team, 'red', 'with its last matching state');
  const now = await f.core.readNamespacedSecret({ name: 'a', namespace: f.namespace });
  assert.equal(left.object.metadata?.resourceVersion, now.metadata?.resourceVersion, 'at the change that made it go');
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('c', 'blue') });
  await f.core.deleteNamespacedSecret({ name: 'b', namespace: f.namespace });
  const deleted = await feed.next();
  assert.equal(summary(deleted), 'DELETED b', 'c never matched and is never sent');
  assert.ok(rvOf(deleted) > rvOf(left));
  assert.deepEqual(feed.pending(), []);
  assert.ok(f.double.verbs().includes('watch secrets'), f.double.verbs().join());
});

test('watch: resumes after a resourceVersion; older than the kept history is an ERROR 410 Expired', async (t) => {
  const f = await startDouble(t, { watchHistory: 3 });
  const path = `/api/v1/namespaces/${f.namespace}/secrets`;
  const { metadata } = await f.core.listNamespacedSecret({ namespace: f.namespace });
  const listed = metadata!.resourceVersion!;
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('a', 'red') });
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('b', 'red') });
  const resumed = await watchFeed(t, f, path, { resourceVersion: listed });
  assert.deepEqual([summary(await resumed.next()), summary(await resumed.next())], ['ADDED a', 'ADDED b']);
  resumed.stop();

  for (const v of ['v2', 'v3', 'v4']) await replace(f, 'a', 'red', v);
  const expired = await watchFeed(t, f, path, { resourceVersion: listed });
  const error = await expired.next();
  assert.equal(error.type, 'ERROR');
  assert.equal(error.object.kind, 'Status');
  assert.equal(error.object.code, 410);
  assert.equal(error.object.reason, 'Expired');
  assert.match(error.object.message ?? '', new RegExp(`^too old resource version: ${listed} \\(\\d+\\)$`));
  assert.equal(await expired.ended, null, 'the stream ends after the ERROR');

  const from0 = await watchFeed(t, f, path, { resourceVersion: '0' });
  assert.deepEqual([summary(await from0.next()), summary(await from0.next())], ['ADDED a', 'ADDED b']);
});

test('watch: timeoutSeconds ends the stream, with a last bookmark 2 s before', async (t) => {
  const f = await startDouble(t);
  const path = `/api/v1/namespaces/${f.namespace}/secrets`;
  const created = await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('a', 'red') });
  const started = Date.now();
  const timed = await watchFeed(t, f, path, {
    timeoutSeconds: 3,
    allowWatchBookmarks: true,
    resourceVersion: created.metadata!.resourceVersion!,
  });
  const beat = await timed.next();
  const beatAt = Date.now() - started;
  assert.equal(beat.type, 'BOOKMARK');
  assert.equal(beat.object.metadata?.resourceVersion, created.metadata!.resourceVersion);
  assert.equal(await timed.ended, null);
  const endAt = Date.now() - started;
  assert.ok(beatAt >= 900 && beatAt < 2500, `bookmark after ${beatAt} ms`);
  assert.ok(endAt >= 2900, `ended after ${endAt} ms`);
  assert.deepEqual(timed.pending(), [], 'nothing else: no initial state when resuming');
});

test('watch: bookmarks carry the current resourceVersion; the initial state ends with one', async (t) => {
  const f = await startDouble(t, { watchBookmarkMs: 100 });
  const path = `/api/v1/namespaces/${f.namespace}/secrets`;
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('a', 'red') });
  const marked = await watchFeed(t, f, path, { allowWatchBookmarks: true, timeoutSeconds: 30 });
  assert.equal(summary(await marked.next()), 'ADDED a');
  const end = await marked.next();
  assert.equal(end.type, 'BOOKMARK', 'the initial state ends with a bookmark');
  assert.deepEqual(end.object.metadata?.annotations, { 'k8s.io/initial-events-end': 'true' });
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: secret('b', 'red') });
  const upToAdded = await marked.until((e) => e.type === 'ADDED');
  const added = upToAdded.pop()!;
  assert.ok(
    upToAdded.every((e) => e.type === 'BOOKMARK'),
    upToAdded.map((e) => e.type).join(),
  );
  const beat = await marked.next();
  assert.equal(beat.type, 'BOOKMARK', 'bookmarks keep coming while nothing changes');
  assert.equal(beat.object.kind, 'Secret');
  assert.equal(beat.object.metadata?.annotations, undefined);
  assert.equal(beat.object.metadata?.resourceVersion, added.object.metadata?.resourceVersion);
  assert.equal(summary(added), 'ADDED b');
});

test('watch one Pod by metadata.name through its phases; closing the watch frees it', async (t) => {
  const f = await startDouble(t);
  const path = `/api/v1/namespaces/${f.namespace}/pods`;
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('watched', { containers: [shContainer('main', 'sleep 0.5')] }),
  });
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('other', { containers: [shContainer('main', 'sleep 0.5')] }),
  });
  const feed = await watchFeed(t, f, path, {
    fieldSelector: 'metadata.name=watched',
    resourceVersion: created.metadata!.resourceVersion!,
  });
  const seen = await feed.until((e) => (e.object.status as { phase?: string })?.phase === 'Succeeded');
  assert.ok(
    seen.every((e) => e.type === 'MODIFIED' && e.object.metadata?.name === 'watched'),
    seen.map(summary).join(),
  );
  const phases = seen.map((e) => (e.object.status as { phase: string }).phase).filter((p, i, a) => p !== a[i - 1]);
  assert.deepEqual(phases, ['Pending', 'Running', 'Succeeded']);
  const rvs = seen.map(rvOf);
  assert.deepEqual(
    rvs,
    [...rvs].sort((a, b) => a - b),
    'in resourceVersion order',
  );

  assert.equal(f.double.streams.size, 1);
  feed.stop();
  await f.double.streams.idle();
  assert.equal(f.double.store.changes.listeners, 0, 'the closed watch no longer listens');
});

test('watch=1 over plain HTTP: chunked JSON lines; an object entering a field selector is ADDED', async (t) => {
  const f = await startDouble(t);
  const ac = new AbortController();
  t.after(() => ac.abort());
  const res = await fetch(
    `${f.double.url}/api/v1/namespaces/${f.namespace}/pods?watch=1&fieldSelector=status.phase%3DSucceeded`,
    { headers: { authorization: `Bearer ${f.double.token}` }, signal: ac.signal },
  );
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/json');
  assert.equal(res.headers.get('transfer-encoding'), 'chunked');
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('quick', { containers: [shContainer('main', 'true')] }),
  });
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes('\n')) text += new TextDecoder().decode((await reader.read()).value);
  const first = JSON.parse(text.slice(0, text.indexOf('\n'))) as WatchEvent;
  assert.equal(summary(first), 'ADDED quick', 'added when it starts to match, not when created');
  assert.equal((first.object.status as { phase: string }).phase, 'Succeeded');
  ac.abort();
  await f.double.streams.idle();
  assert.equal(f.double.store.changes.listeners, 0);
});

test('watch options are checked as the API server checks them', async (t) => {
  const f = await startDouble(t);
  const get = async (query: string) => {
    const res = await fetch(`${f.double.url}/api/v1/namespaces/${f.namespace}/secrets?watch=true&${query}`, {
      headers: { authorization: `Bearer ${f.double.token}` },
    });
    return { status: res.status, body: (await res.json()) as { message: string; reason: string } };
  };
  const match = await get('resourceVersion=5&resourceVersionMatch=NotOlderThan');
  assert.equal(match.status, 422);
  assert.equal(
    match.body.message,
    'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: ' +
      'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
  );
  const initial = await get('sendInitialEvents=true');
  assert.equal(initial.status, 422);
  assert.match(initial.body.message, /sendInitialEvents requires setting resourceVersionMatch to NotOlderThan/);
  const rv = await get('resourceVersion=abc');
  assert.equal(rv.status, 422);
  assert.match(rv.body.message, /^secrets "" is invalid: resourceVersion: Invalid value: "abc"/);
  const selector = await get('labelSelector=a%20in%20');
  assert.equal(selector.status, 400);
  assert.equal(f.double.streams.size, 0);
});
