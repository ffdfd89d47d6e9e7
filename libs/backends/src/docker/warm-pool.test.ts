import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../shared/logger.ts';
import type { SandboxSettings } from './container-spec.ts';
import { SlotDirs } from './pool-dirs.ts';
import { containerGone, docker, IMAGE, SANDBOX_UID, until } from './testing.ts';
import { WarmPool } from './warm-pool.ts';

async function pool(t: TestContext, size: number, over: Partial<SandboxSettings> = {}): Promise<{ pool: WarmPool; slots: SlotDirs; deployment: string }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sandgate-pool-'));
  const deployment = `test-${randomBytes(4).toString('hex')}`;
  const slots = new SlotDirs(dataDir, { uid: SANDBOX_UID, gid: SANDBOX_UID });
  const settings: SandboxSettings = { image: IMAGE, runtime: undefined, user: '1000:1000', pidsLimit: 64, tmpfsBytes: 8 << 20, nofile: 256, deployment, ...over };
  const p = new WarmPool({
    docker, settings, slots, instanceId: 'worker-test', size, limits: { memory_mb: 256, cpus: 1 }, log: silentLogger, readyTimeoutMs: 30_000,
  });
  t.after(async () => {
    await p.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  return { pool: p, slots, deployment };
}

const poolContainers = (deployment: string) =>
  docker.listContainers({ all: true, filters: { label: [`org.sandgate.deployment=${deployment}`, 'org.sandgate.kind=pool'] } });

test('the pool fills to its size, hands each sandbox out once, and counts hits and misses', async (t) => {
  const { pool: p, slots, deployment } = await pool(t, 2);
  await p.whenReady();
  assert.deepEqual(p.stats(), { hits: 0, misses: 0, size: 2, ready: 2, starting: 0 });
  const listed = await poolContainers(deployment);
  assert.equal(listed.length, 2);
  assert.ok(listed.every((c) => c.State === 'running' && c.Labels['org.sandgate.instance'] === 'worker-test'));
  const a = p.take();
  const b = p.take();
  const none = p.take();
  assert.ok(a && b);
  assert.notEqual(a.container.id, b.container.id);
  assert.notEqual(a.slotDir, b.slotDir);
  assert.equal(none, undefined);
  assert.deepEqual({ ...p.stats(), starting: 0 }, { hits: 2, misses: 1, size: 2, ready: 0, starting: 0 });
  p.release(a);
  p.release(b);
  await p.whenSettled();
  assert.equal(p.stats().ready, 2, 'refilled after the releases');
  const now = (await poolContainers(deployment)).map((c) => c.Id);
  assert.ok(!now.includes(a.container.id) && !now.includes(b.container.id), 'released sandboxes are removed, never reused');
  assert.equal((await readdir(slots.root)).length, 2, 'one slot directory per ready sandbox');
});

test('close removes every sandbox of the pool and its slot directories', async (t) => {
  const { pool: p, slots, deployment } = await pool(t, 2);
  await p.whenReady();
  const ids = (await poolContainers(deployment)).map((c) => c.Id);
  await p.close();
  for (const id of ids) assert.equal(await containerGone(id), true);
  assert.deepEqual(await readdir(slots.root), []);
  assert.equal(p.take(), undefined);
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
  const taken = p.take();
  assert.ok(taken);
  assert.notEqual(taken.container.id, victim!.Id);
  assert.equal(taken.channel.closed, false);
  p.release(taken);
});

test('size 0 is ready at once and only misses', async (t) => {
  const { pool: p } = await pool(t, 0);
  await p.whenReady();
  assert.equal(p.take(), undefined);
  assert.deepEqual(p.stats(), { hits: 0, misses: 1, size: 0, ready: 0, starting: 0 });
});

test('a pool that cannot start sandboxes keeps retrying in the background and closes promptly', async (t) => {
  const { pool: p } = await pool(t, 1, { image: 'sandgate/no-such-image:0' });
  assert.equal(p.take(), undefined);
  const started = performance.now();
  await p.close();
  assert.ok(performance.now() - started < 5000);
});
