import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { AgentChannel, MAX_MANIFEST_ENTRIES, type AgentManifest, type FileChannel } from '../agent/agent-channel.ts';
import { MAX_WALK_ENTRIES } from '../artifacts/artifacts.ts';
import { silentLogger } from '../logger.ts';
import { pullFiles, pushFiles, type Baseline } from './session-files.ts';
import { SyncedFiles } from './synced-files.ts';

/**
 * The worker's side of a session Pod's file transfers against a hostile agent: in a stateful session the user's code
 * runs inside the agent, so every frame it sends is the code's to forge. Here a TCP server plays that agent.
 */
type Reply = (msg: Record<string, any>, send: (frame: object) => void) => void;

async function hostileAgent(t: TestContext, reply: Reply): Promise<AgentChannel> {
  const server = createServer((socket: Socket) => {
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString();
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const msg = JSON.parse(buffered.slice(0, nl)) as Record<string, any>;
        buffered = buffered.slice(nl + 1);
        reply(msg, (frame) => socket.write(`${JSON.stringify(frame)}\n`));
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const socket = connect({ host: '127.0.0.1', port });
  await new Promise((r) => socket.once('connect', r));
  const channel = new AgentChannel(socket);
  t.after(() => {
    channel.close();
    server.close();
  });
  return channel;
}

async function store(t: TestContext): Promise<{ root: string; dir: string }> {
  const root = await mkdtemp(join(tmpdir(), 'sandgate-pull-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const dir = join(root, 'session');
  await mkdir(dir);
  return { root, dir };
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

test('pulled files: paths are checked as a client path is, sizes are bounded, nothing lands outside the session', async (t) => {
  const { root, dir } = await store(t);
  await writeFile(join(root, 'outside.txt'), 'untouched');
  const files: [string, string][] = [
    ['ok.txt', 'fine'],
    ['../outside.txt', 'overwritten!'],
    ['/etc/escape', 'x'],
    ['a/../../b.txt', 'x'],
    ['.sandgate-tmp-forged', 'x'],
    ['liar.txt', 'much longer than it said'],
  ];
  const channel = await hostileAgent(t, (msg, send) => {
    if (msg.op === 'manifest') {
      const listed = files.map(([p, body]) => [p, p === 'liar.txt' ? 4 : body.length, 1_700_000_000_000]);
      send({ t: 'manifest', id: msg.id, files: [...listed, ['huge.bin', 10 ** 12, 1]], more: false });
    } else if (msg.op === 'get') {
      const body = files.find(([p]) => p === msg.path)?.[1] ?? '';
      send({ t: 'chunk', id: msg.id, d: b64(body) });
      send({ t: 'done', id: msg.id, ok: true, size: body.length, mtime_ms: 1_700_000_000_000 });
    }
  });
  const { failed } = await pullFiles(channel, new Map(), dir, 1 << 20, silentLogger, 'sess_x');
  assert.deepEqual(await readdir(dir), ['ok.txt']);
  assert.equal(await readFile(join(dir, 'ok.txt'), 'utf8'), 'fine');
  assert.equal(await readFile(join(root, 'outside.txt'), 'utf8'), 'untouched');
  assert.deepEqual(failed.map((f) => f.path).sort(), [
    '../outside.txt',
    '.sandgate-tmp-forged',
    '/etc/escape',
    'a/../../b.txt',
    'huge.bin',
    'liar.txt',
  ]);
  assert.match(failed.find((f) => f.path === 'huge.bin')!.reason, /over the session's disk quota/);
  assert.match(failed.find((f) => f.path === 'liar.txt')!.reason, /more than the 4 bytes/);
});

test('a manifest is bounded, however many files the agent claims to have', async (t) => {
  let frames = 0;
  const channel = await hostileAgent(t, (msg, send) => {
    if (msg.op !== 'manifest') return;
    // An endless manifest: 1000 entries a frame, never "more: false".
    const more = () => {
      if (frames++ > 50) return;
      send({
        t: 'manifest',
        id: msg.id,
        files: Array.from({ length: 1000 }, (_, i) => [`f${frames}-${i}`, 1, 1]),
        more: true,
      });
      setImmediate(more);
    };
    more();
  });
  const manifest = await channel.manifest(10_000);
  assert.equal(manifest.files.length, MAX_MANIFEST_ENTRIES);
  assert.equal(manifest.truncated, true);
});

test("a volume's files are bounded in all by its size: what does not fit is not kept, and the pull says so", async (t) => {
  const { dir } = await store(t);
  await writeFile(join(dir, 'kept.bin'), 'k'.repeat(400));
  const files: [string, string][] = [
    ['kept.bin', 'k'.repeat(400)],
    ['fits.bin', 'f'.repeat(500)],
    ['over.bin', 'o'.repeat(200)],
  ];
  const roots = new Set<string>();
  const channel = await hostileAgent(t, (msg, send) => {
    roots.add(String(msg.root));
    if (msg.op === 'manifest') {
      send({ t: 'manifest', id: msg.id, files: files.map(([p, body]) => [p, body.length, 1]), more: false });
    } else if (msg.op === 'get') {
      const body = files.find(([p]) => p === msg.path)?.[1] ?? '';
      send({ t: 'chunk', id: msg.id, d: b64(body) });
      send({ t: 'done', id: msg.id, ok: true, size: body.length, mtime_ms: 1 });
    }
  });
  const pulled = await pullFiles(channel.files('/mnt/volumes/v'), new Map(), dir, 1000, silentLogger, 'sess_x', {
    what: 'the size of volume v',
    totalBytes: 1000,
  });
  assert.deepEqual(roots, new Set(['/mnt/volumes/v']), 'every request names the volume as its root');
  assert.deepEqual((await readdir(dir)).sort(), ['fits.bin', 'kept.bin']);
  assert.equal(pulled.full, true);
  assert.deepEqual(
    pulled.failed.map((f) => f.path),
    ['over.bin'],
  );
  assert.match(pulled.failed[0]!.reason, /1100 bytes, over the size of volume v of 1000/);
});

/**
 * A Pod's workspace in memory, behind the FileChannel the worker syncs through: the three-way rules below are the
 * worker's, whatever carries the bytes (the hostile agent above checks the carrying).
 */
class PodFiles implements FileChannel {
  readonly files = new Map<string, { body: string; mtimeMs: number }>();
  fetched: string[] = [];

  async manifest(): Promise<AgentManifest> {
    return { files: [...this.files].map(([p, f]) => [p, Buffer.byteLength(f.body), f.mtimeMs]), truncated: false };
  }
  async put(path: string, source: Readable, mtimeMs: number): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of source) chunks.push(Buffer.from(chunk as Buffer));
    this.files.set(path, { body: Buffer.concat(chunks).toString(), mtimeMs });
  }
  get(path: string): { data: Readable; done: Promise<{ mtimeMs: number }> } {
    this.fetched.push(path);
    const file = this.files.get(path)!;
    return { data: Readable.from([Buffer.from(file.body)]), done: Promise.resolve({ mtimeMs: file.mtimeMs }) };
  }
  async remove(paths: string[]): Promise<void> {
    for (const p of paths) this.files.delete(p);
  }
  /** Code in the Pod writes a file (a run, a terminal, a service): a new mtime. */
  write(path: string, body: string): void {
    this.files.set(path, { body, mtimeMs: (this.files.get(path)?.mtimeMs ?? 1_700_000_000_000) + 60_000 });
  }
}

/** The API writes a file in the store (an upload): a new mtime. */
async function upload(dir: string, path: string, body: string, at = 1_800_000_000_000): Promise<void> {
  await writeFile(join(dir, path), body);
  await utimes(join(dir, path), new Date(at), new Date(at));
}

const contents = async (dir: string): Promise<Record<string, string>> => {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) out[name] = await readFile(join(dir, name), 'utf8');
  return out;
};

/** A session whose store and Pod hold `files`, synced: the baseline of that sync. */
async function synced(t: TestContext, files: Record<string, string>) {
  const { dir } = await store(t);
  for (const [path, body] of Object.entries(files)) await upload(dir, path, body, 1_700_000_000_000);
  const pod = new PodFiles();
  const pushed = await pushFiles(pod, dir, silentLogger);
  assert.equal(pushed.whole, true);
  assert.deepEqual(pod.fetched, []);
  return { dir, pod, baseline: pushed.baseline };
}

const pull = (pod: PodFiles, baseline: Baseline | undefined, dir: string) =>
  pullFiles(pod, baseline, dir, 1 << 20, silentLogger, 'sess_x');

test('after a run: what the Pod changed is brought back, an upload that came during the run is kept', async (t) => {
  const { dir, pod, baseline } = await synced(t, { 'out.txt': 'old', 'data.csv': 'v1', 'same.txt': 's' });
  pod.write('out.txt', 'written by the run');
  pod.write('new.txt', 'made by the run');
  await upload(dir, 'data.csv', 'v2 uploaded during the run');
  const { failed, synced: after } = await pull(pod, baseline, dir);
  assert.deepEqual(failed, []);
  assert.deepEqual(await contents(dir), {
    'data.csv': 'v2 uploaded during the run',
    'new.txt': 'made by the run',
    'out.txt': 'written by the run',
    'same.txt': 's',
  });
  assert.deepEqual(pod.fetched.sort(), ['new.txt', 'out.txt'], 'only what the Pod changed is fetched');
  // The next push takes the upload to the Pod; the sync after it has nothing to bring back.
  assert.ok(after !== undefined);
  const next = await pushFiles(pod, dir, silentLogger);
  assert.equal(pod.files.get('data.csv')?.body, 'v2 uploaded during the run');
  pod.fetched = [];
  await pull(pod, next.baseline, dir);
  assert.deepEqual(pod.fetched, []);
  assert.equal(await readFile(join(dir, 'data.csv'), 'utf8'), 'v2 uploaded during the run');
});

test('between runs: what a terminal wrote in the Pod is brought back before the push, which then keeps it', async (t) => {
  const { dir, pod, baseline } = await synced(t, { 'a.txt': 'a', 'gone-in-pod.txt': 'g', 'gone-in-store.txt': 'x' });
  const after = (await pull(pod, baseline, dir)).synced!;
  // A terminal writes, changes and deletes in the Pod; the API uploads and deletes in the store.
  pod.write('made-here.txt', 'from-the-terminal');
  pod.write('a.txt', 'a, edited in the terminal');
  pod.files.delete('gone-in-pod.txt');
  await upload(dir, 'uploaded.txt', 'through the API');
  await rm(join(dir, 'gone-in-store.txt'));
  // Before the next run: pull what the Pod changed, then push what the store changed.
  await pull(pod, after, dir);
  await pushFiles(pod, dir, silentLogger);
  const expected = {
    'a.txt': 'a, edited in the terminal',
    'made-here.txt': 'from-the-terminal',
    'uploaded.txt': 'through the API',
  };
  assert.deepEqual(await contents(dir), expected);
  assert.deepEqual(Object.fromEntries([...pod.files].map(([p, f]) => [p, f.body]).sort()), expected);
});

test('both sides changed a file since the last sync: the Pod wins; a deletion yields to a change', async (t) => {
  const { dir, pod, baseline } = await synced(t, { 'both.txt': 'base', 'del-pod.txt': 'd', 'del-store.txt': 'd' });
  pod.write('both.txt', "the Pod's");
  await upload(dir, 'both.txt', "the store's");
  // Deleted on one side, changed on the other: the change stays.
  pod.files.delete('del-pod.txt');
  await upload(dir, 'del-pod.txt', 'uploaded again');
  await rm(join(dir, 'del-store.txt'));
  pod.write('del-store.txt', 'changed in the Pod');
  await pull(pod, baseline, dir);
  assert.deepEqual(await contents(dir), {
    'both.txt': "the Pod's",
    'del-pod.txt': 'uploaded again',
    'del-store.txt': 'changed in the Pod',
  });
});

test('deletions: what the Pod deleted goes from the store, what the store deleted goes from the Pod', async (t) => {
  const { dir, pod, baseline } = await synced(t, { 'by-pod.txt': '1', 'by-api.txt': '2', 'kept.txt': '3' });
  pod.files.delete('by-pod.txt');
  await rm(join(dir, 'by-api.txt'));
  await pull(pod, baseline, dir);
  assert.deepEqual(Object.keys(await contents(dir)), ['kept.txt'], 'the API deletion is not undone by the pull');
  await pushFiles(pod, dir, silentLogger);
  assert.deepEqual([...pod.files.keys()], ['kept.txt']);
});

test('without a baseline: every Pod file that differs from the store is brought back, nothing removed', async (t) => {
  const { dir, pod } = await synced(t, { 'data.csv': 'v1', 'only-in-store.txt': 'o' });
  pod.files.delete('only-in-store.txt');
  await upload(dir, 'data.csv', 'v2');
  const { synced: after } = await pull(pod, undefined, dir);
  // The old behaviour: the Pod's copy wins over an upload, and no deletion is known to be the Pod's.
  assert.deepEqual(await contents(dir), { 'data.csv': 'v1', 'only-in-store.txt': 'o' });
  assert.deepEqual([...after!.keys()], ['data.csv'], 'the sync gives a baseline for the next one');
});

test('a file not kept stays out of the baseline, so the next sync tries it again; the bounds hold', async (t) => {
  const { dir, pod, baseline } = await synced(t, {});
  pod.write('big.bin', 'x'.repeat(2000));
  const first = await pullFiles(pod, baseline, dir, 1000, silentLogger, 'sess_x');
  assert.equal(first.full, true);
  assert.deepEqual(await readdir(dir), []);
  assert.equal(first.synced!.has('big.bin'), false);
  const again = await pullFiles(pod, first.synced, dir, 1000, silentLogger, 'sess_x');
  assert.deepEqual(
    again.failed.map((f) => f.path),
    ['big.bin'],
  );
});

test("a session Pod's baselines are kept for that Pod only, whole or not at all, and go with the session", async (t) => {
  const { root } = await store(t);
  const kept = new SyncedFiles(root);
  const workspace: Baseline = new Map([['a.txt', ['a.txt', 1, 2]]]);
  const volume: Baseline = new Map([['v.txt', ['v.txt', 3, 4]]]);
  await kept.save('sess_a', 'uid-1', { workspace, volumes: new Map([['vol_1:/mnt/v', volume]]) });
  const loaded = await kept.load('sess_a', 'uid-1');
  assert.deepEqual(loaded.workspace, workspace);
  assert.deepEqual(loaded.volumes.get('vol_1:/mnt/v'), volume);
  assert.equal((await kept.load('sess_a', 'uid-2')).workspace, undefined, "another Pod's baseline is not this one's");
  assert.equal((await kept.load('sess_b', 'uid-1')).workspace, undefined);
  // Malformed or over the bound: none, the old behaviour.
  await writeFile(join(root, 'pod-files', 'sess_c.json'), '{"uid":"u","workspace":[["a",1]]}');
  assert.equal((await kept.load('sess_c', 'u')).workspace, undefined);
  const many = Array.from({ length: MAX_WALK_ENTRIES + 1 }, (_, i) => [`f${i}`, 1, 1]);
  await writeFile(join(root, 'pod-files', 'sess_d.json'), JSON.stringify({ uid: 'u', workspace: many }));
  assert.equal((await kept.load('sess_d', 'u')).workspace, undefined);
  await kept.retain(new Set(['sess_a']));
  assert.deepEqual(await readdir(join(root, 'pod-files')), ['sess_a.json']);
  await kept.remove('sess_a');
  assert.deepEqual(await readdir(join(root, 'pod-files')), []);
});
