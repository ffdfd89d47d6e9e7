import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../logger.ts';
import type { SandboxSettings } from './container-spec.ts';
import { SlotDirs } from './pool-dirs.ts';
import { containerGone, docker, IMAGE, SANDBOX_UID, until } from '../testing/docker.ts';
import { WarmPool, type PooledSandbox, type WarmPoolOptions } from './warm-pool.ts';

type PoolKnobs = Partial<Pick<WarmPoolOptions, 'maxRuns' | 'maxRecycled' | 'recycledIdleMs'>>;

async function pool(
  t: TestContext,
  size: number,
  over: Partial<SandboxSettings> = {},
  knobs: PoolKnobs = {},
): Promise<{ pool: WarmPool; slots: SlotDirs; deployment: string }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sandgate-pool-'));
  const deployment = `test-${randomBytes(4).toString('hex')}`;
  const slots = new SlotDirs(dataDir, { uid: SANDBOX_UID, gid: SANDBOX_UID });
  const settings: SandboxSettings = {
    image: IMAGE,
    runtime: undefined,
    user: '1000:1000',
    pidsLimit: 64,
    tmpfsBytes: 8 << 20,
    nofile: 256,
    deployment,
    ...over,
  };
  const p = new WarmPool({
    docker,
    settings,
    slots,
    instanceId: 'worker-test',
    size,
    limits: { memory_mb: 256, cpus: 1 },
    log: silentLogger,
    readyTimeoutMs: 30_000,
    maxRuns: 100,
    maxRecycled: 2,
    recycledIdleMs: 60_000,
    ...knobs,
  });
  t.after(async () => {
    await p.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  return { pool: p, slots, deployment };
}

const poolContainers = (deployment: string) =>
  docker.listContainers({
    all: true,
    filters: { label: [`org.sandgate.deployment=${deployment}`, 'org.sandgate.kind=pool'] },
  });

test('the pool fills to its size, hands each sandbox out once, and counts hits and misses', async (t) => {
  const { pool: p, slots, deployment } = await pool(t, 2);
  await p.whenReady();
  assert.deepEqual(p.stats(), {
    hits: 0,
    reused: 0,
    misses: 0,
    size: 2,
    ready: 2,
    starting: 0,
    recycled: 0,
    resetFailed: 0,
  });
  const listed = await poolContainers(deployment);
  assert.equal(listed.length, 2);
  assert.ok(listed.every((c) => c.State === 'running' && c.Labels['org.sandgate.instance'] === 'worker-test'));
  const a = p.take('t1');
  const b = p.take('t1');
  const none = p.take('t1');
  assert.ok(a && b);
  assert.notEqual(a.container.id, b.container.id);
  assert.notEqual(a.slotDir, b.slotDir);
  assert.equal(none, undefined);
  assert.deepEqual(
    { ...p.stats(), starting: 0 },
    { hits: 2, reused: 0, misses: 1, size: 2, ready: 0, starting: 0, recycled: 0, resetFailed: 0 },
  );
  p.release(a);
  p.release(b);
  await p.whenSettled();
  assert.equal(p.stats().ready, 2, 'refilled after the releases');
  const now = (await poolContainers(deployment)).map((c) => c.Id);
  assert.ok(
    !now.includes(a.container.id) && !now.includes(b.container.id),
    'released sandboxes are removed, never reused',
  );
  assert.equal((await readdir(slots.root)).length, 2, 'one slot directory per ready sandbox');
});

test('close removes every sandbox of the pool, recycled ones too, and its slot directories', async (t) => {
  const { pool: p, slots, deployment } = await pool(t, 2);
  await p.whenReady();
  p.recycle(serve(p, 'acme'));
  await p.whenSettled();
  const ids = (await poolContainers(deployment)).map((c) => c.Id);
  assert.equal(ids.length, 3);
  await p.close();
  for (const id of ids) assert.equal(await containerGone(id), true);
  assert.deepEqual(await readdir(slots.root), []);
  assert.equal(p.take('t1'), undefined);
  await p.close();
});

test('an idle sandbox killed from outside is replaced, never handed out', async (t) => {
  const { pool: p, deployment } = await pool(t, 1);
  await p.whenReady();
  const [victim] = await poolContainers(deployment);
  await docker.getContainer(victim!.Id).kill();
  await until('a replacement', async () => {
    const running = (await poolContainers(deployment)).filter((c) => c.State === 'running');
    return p.stats().ready === 1 && running.length === 1 && running[0]!.Id !== victim!.Id;
  });
  const taken = p.take('t1');
  assert.ok(taken);
  assert.notEqual(taken.container.id, victim!.Id);
  assert.equal(taken.channel.closed, false);
  p.release(taken);
});

test('size 0 is ready at once and only misses', async (t) => {
  const { pool: p } = await pool(t, 0);
  await p.whenReady();
  assert.equal(p.take('t1'), undefined);
  assert.deepEqual(p.stats(), {
    hits: 0,
    reused: 0,
    misses: 1,
    size: 0,
    ready: 0,
    starting: 0,
    recycled: 0,
    resetFailed: 0,
  });
});

test('a pool that cannot start sandboxes keeps retrying in the background and closes promptly', async (t) => {
  const { pool: p } = await pool(t, 1, { image: 'sandgate/no-such-image:0' });
  assert.equal(p.take('t1'), undefined);
  const started = performance.now();
  await p.close();
  assert.ok(performance.now() - started < 5000);
});

/** Takes a sandbox as a run of `tenant` would, and gives it back as a run that ended cleanly and was reset would. */
function serve(p: WarmPool, tenant: string): PooledSandbox {
  const sandbox = p.take(tenant);
  assert.ok(sandbox, `a sandbox for ${tenant}`);
  sandbox.runs++;
  sandbox.tenant = tenant;
  return sandbox;
}

test('a recycled sandbox serves only its own tenant, the one used last first, and the fresh pool refills', async (t) => {
  const { pool: p, deployment } = await pool(t, 1);
  await p.whenReady();
  const a = serve(p, 'acme');
  p.recycle(a);
  await p.whenSettled();
  assert.deepEqual(
    { ready: p.stats().ready, recycled: p.stats().recycled },
    { ready: 1, recycled: 1 },
    'a fresh one was made beside it',
  );
  const other = p.take('globex');
  assert.ok(other);
  assert.notEqual(other.container.id, a.container.id, 'another tenant never gets it');
  p.release(other);
  const again = p.take('acme');
  assert.equal(again, a, 'its tenant gets it back');
  assert.deepEqual({ hits: p.stats().hits, reused: p.stats().reused }, { hits: 3, reused: 1 });
  p.release(again);
  await p.whenSettled();
  const ids = (await poolContainers(deployment)).map((c) => c.Id);
  assert.ok(!ids.includes(a.container.id) && !ids.includes(other.container.id));
});

test('recycled sandboxes are bounded in number, in idle time and in runs, and removed past each bound', async (t) => {
  const { pool: p } = await pool(t, 2, {}, { maxRuns: 2, maxRecycled: 1, recycledIdleMs: 300 });
  await p.whenReady();
  const [a, b] = [serve(p, 'acme'), serve(p, 'acme')];
  p.recycle(a);
  p.recycle(b);
  assert.equal(p.stats().recycled, 1, 'past maxRecycled the longest unused one goes');
  // Asked at once: it stays reusable only for recycledIdleMs.
  assert.equal(p.reusable(b), true);
  await until('the evicted sandbox is removed', () => containerGone(a.container.id));
  b.runs++;
  assert.equal(p.reusable(b), false, 'maxRuns reached');
  await until('the idle recycled sandbox expires', async () => p.stats().recycled === 0);
  await until('the expired sandbox is removed', () => containerGone(b.container.id));
});
