import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chown, mkdir, mkdtemp, readdir, readFile, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import Dockerode from 'dockerode';
import { AgentChannel } from '../agent/agent-channel.ts';
import { connectWithin } from '../agent/connect.ts';
import { IMAGE } from '../testing/docker.ts';

const docker = new Dockerode();
const PORT = 8702;
const TOKEN = 'the-token-of-this-pod';

/** The volumes container of a session Pod, run as the Pod runs it: one volume mounted, one directory that is not. */
async function volumesContainer(t: TestContext): Promise<{ ip: string; volume: string; other: string }> {
  const base = await mkdtemp(join(tmpdir(), 'sandgate-volumes-'));
  t.after(() => rm(base, { recursive: true, force: true }));
  const [volume, other] = [join(base, 'volume'), join(base, 'other')];
  for (const dir of [volume, other]) {
    await mkdir(dir);
    await chown(dir, 1000, 1000);
  }
  await writeFile(join(other, 'secret.txt'), 'not a volume of this session');
  const container = await docker.createContainer({
    Image: process.env.SANDGATE_IMAGE ?? IMAGE,
    Cmd: [
      'python3',
      '-u',
      '-I',
      '-S',
      '/usr/lib/sandgate/agent/sandgate_volumes.py',
      `--listen=${PORT}`,
      '--root=/mnt/volumes/a',
    ],
    User: '1000:1000',
    Env: [`SANDGATE_AGENT_TOKEN_SHA256=${createHash('sha256').update(TOKEN).digest('hex')}`],
    HostConfig: {
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Mounts: [
        { Type: 'bind', Source: volume, Target: '/mnt/volumes/a' },
        { Type: 'bind', Source: other, Target: '/mnt/volumes/b' },
      ],
    },
  });
  t.after(() => container.remove({ force: true }).catch(() => {}));
  await container.start();
  const ip = (await container.inspect()).NetworkSettings.Networks.bridge!.IPAddress;
  return { ip, volume, other };
}

async function connect(ip: string, token: string): Promise<AgentChannel> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const socket = await connectWithin(ip, PORT, 2000);
      const channel = new AgentChannel(socket);
      channel.sendRaw(`${JSON.stringify({ op: 'hello', token })}\n`);
      await channel.handshake(2000);
      return channel;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

test('the volumes container serves its volumes only, to the holder of the token only, never outside them', async (t) => {
  const { ip, volume, other } = await volumesContainer(t);
  const channel = await connect(ip, TOKEN);
  t.after(() => channel.close());
  await assert.rejects(
    (async () => {
      const socket = await connectWithin(ip, PORT, 2000);
      const wrong = new AgentChannel(socket);
      wrong.sendRaw(`${JSON.stringify({ op: 'hello', token: 'guessed' })}\n`);
      try {
        await wrong.handshake(2000);
      } finally {
        wrong.close();
      }
    })(),
    'a wrong token gets no answer',
  );

  const a = channel.files('/mnt/volumes/a');
  await a.put('dir/x.txt', Readable.from([Buffer.from('hello')]), 1_700_000_000_000, 5000);
  assert.equal(await readFile(join(volume, 'dir/x.txt'), 'utf8'), 'hello');
  assert.deepEqual((await a.manifest(5000)).files, [['dir/x.txt', 5, 1_700_000_000_000]]);
  const got = a.get('dir/x.txt', 100, 5000);
  assert.equal(await text(got.data), 'hello');
  await assert.rejects(a.put('../escape.txt', Readable.from([Buffer.from('x')]), 1, 5000), /invalid path/);
  await assert.rejects(a.put('/etc/passwd', Readable.from([Buffer.from('x')]), 1, 5000), /invalid path/);
  assert.deepEqual(await readdir(join(volume, '..')).then((n) => n.sort()), ['other', 'volume']);

  // A directory the container sees but was not given as a volume: not listed, not read, not written.
  const b = channel.files('/mnt/volumes/b');
  assert.deepEqual(await b.manifest(5000), { files: [], truncated: true });
  const secret = b.get('secret.txt', 100, 5000);
  await assert.rejects(secret.done, /no volume/);
  await assert.rejects(b.put('planted.txt', Readable.from([Buffer.from('x')]), 1, 5000), /no volume/);
  assert.deepEqual(await readdir(other), ['secret.txt']);
  // Nor the container's own root, whatever root a request names.
  await assert.rejects(channel.files('/').get('etc/passwd', 1 << 20, 5000).done, /no volume/);
  await assert.rejects(channel.files().get('etc/passwd', 1 << 20, 5000).done, /no volume/);

  await a.remove(['dir/x.txt'], 5000);
  assert.deepEqual(await readdir(join(volume, 'dir')), []);
});
