/**
 * A Redis Sentinel deployment of the test's own, on loopback ports it picks: a primary, a replica and three sentinels
 * (quorum 2), each a Debian `redis-server` / `redis-sentinel` process in a temp directory. The shared Redis on 6379 is
 * never touched.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../redis-and-ports.ts';
import { until } from '../harness.ts';

export const SENTINEL_NAME = 'sandgate-test';

export interface SentinelGroup {
  /** SANDGATE_REDIS_SENTINELS for these sentinels. */
  sentinels: string;
  /** The port of the server the sentinels call primary now. */
  primaryPort(): Promise<number>;
  /** A plain connection to one server (by port), for the test's own reads. */
  connect(port: number): Redis;
  /** SIGKILLs the server on `port`; resolves once it has exited. */
  kill(port: number): Promise<void>;
  close(): Promise<void>;
}

interface Server {
  port: number;
  proc: ChildProcess;
}

const DOWN_AFTER_MS = 1000;

export async function startSentinelGroup(): Promise<SentinelGroup> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-sentinel-'));
  const servers: Server[] = [];
  const spawnIn = (cmd: string, args: string[]): ChildProcess => spawn(cmd, args, { stdio: 'ignore' });
  const connections: Redis[] = [];
  const connect = (port: number) => {
    const c = new Redis({
      port,
      host: '127.0.0.1',
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      retryStrategy: () => 100,
    });
    c.on('error', () => {});
    connections.push(c);
    return c;
  };
  const ping = async (port: number) => {
    const c = connect(port);
    try {
      return (await c.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      c.disconnect();
    }
  };

  const startNode = async (name: string, extra: string[]) => {
    const port = await freePort();
    const nodeDir = join(dir, name);
    await mkdir(nodeDir);
    // As sandgate asks of its Redis: an append-only file, noeviction.
    const proc = spawnIn('redis-server', [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      nodeDir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--maxmemory-policy',
      'noeviction',
      ...extra,
    ]);
    servers.push({ port, proc });
    await until(`redis-server ${name} on ${port}`, () => ping(port), 20_000);
    return port;
  };

  try {
    const primary = await startNode('primary', []);
    const replica = await startNode('replica', ['--replicaof', '127.0.0.1', String(primary)]);
    const replicaClient = connect(replica);
    await until(
      'the replica to be in sync',
      async () => /master_link_status:up/.test(await replicaClient.info('replication')),
      20_000,
    );
    const sentinelPorts: number[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${i}.conf`);
      // Sentinel rewrites its configuration file (what it learns of replicas and other sentinels): one each.
      await writeFile(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${primary} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_NAME} ${DOWN_AFTER_MS}`,
          `sentinel failover-timeout ${SENTINEL_NAME} 10000`,
          `sentinel parallel-syncs ${SENTINEL_NAME} 1`,
          '',
        ].join('\n'),
      );
      servers.push({ port, proc: spawnIn('redis-sentinel', [conf]) });
      sentinelPorts.push(port);
    }
    // A failover needs the quorum to agree and a majority of sentinels to elect a leader: each must know the others
    // and the replica before the primary may be killed.
    for (const port of sentinelPorts) {
      const sentinel = connect(port);
      await until(
        `sentinel ${port} to know the replica and the other sentinels`,
        async () => {
          try {
            const info = (await sentinel.call('SENTINEL', 'MASTER', SENTINEL_NAME)) as string[];
            const f = Object.fromEntries(info.flatMap((v, i) => (i % 2 ? [] : [[v, info[i + 1]]])));
            return f['num-slaves'] === '1' && f['num-other-sentinels'] === '2';
          } catch {
            return false;
          }
        },
        30_000,
        200,
      );
    }
    const sentinelClient = connect(sentinelPorts[0]!);
    return {
      sentinels: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
      async primaryPort() {
        const [, port] = (await sentinelClient.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_NAME)) as string[];
        return Number(port);
      },
      connect,
      async kill(port) {
        const s = servers.find((x) => x.port === port);
        if (!s || s.proc.exitCode !== null || s.proc.signalCode !== null) return;
        const gone = new Promise((r) => s.proc.once('exit', r));
        s.proc.kill('SIGKILL');
        await gone;
      },
      close: () => close(),
    };
  } catch (err) {
    await close();
    throw err;
  }

  async function close(): Promise<void> {
    for (const c of connections) c.disconnect();
    await Promise.all(
      servers.map(async ({ proc }) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return;
        const gone = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGKILL');
        await gone;
      }),
    );
    await rm(dir, { recursive: true, force: true });
  }
}
