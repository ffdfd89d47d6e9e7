import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentChannel, MAX_MANIFEST_ENTRIES } from '../agent/agent-channel.ts';
import { silentLogger } from '../logger.ts';
import { pullFiles } from './session-files.ts';

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
