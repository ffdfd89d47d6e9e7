/**
 * A Docker engine of the test's own, for the fault that restarts the engine: the shared engine serves every other
 * test on this machine and is never restarted. It has its own data root, exec root, pidfile, socket and cgroup
 * parent, a bridge of its own and no iptables rules, so nothing it does reaches the shared engine's containers or
 * networks. Not `--bridge none`: an engine started that way deletes the host's docker0, the shared engine's bridge.
 * The runtime image is copied in from the shared engine (docker save | docker load).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import Dockerode from 'dockerode';
import { until } from '../harness.ts';

export interface OwnDockerd {
  /** DOCKER_HOST for a process that should use this engine. */
  host: string;
  docker: Dockerode;
  /** How long copying the image in took (ms). */
  loadMs: number;
  start(): Promise<void>;
  /** SIGTERM; without live-restore the engine stops its containers as it goes. Resolves once it has exited. */
  stop(): Promise<void>;
  close(): Promise<void>;
}

export async function ownDockerd(image: string): Promise<OwnDockerd> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-dockerd-'));
  const socket = join(dir, 'docker.sock');
  await writeFile(join(dir, 'daemon.json'), '{}\n');
  const bridge = `sgf${randomBytes(4).toString('hex')}`;
  await createBridge(bridge);
  const args = [
    '--config-file',
    join(dir, 'daemon.json'),
    '--data-root',
    join(dir, 'root'),
    '--exec-root',
    join(dir, 'exec'),
    '--pidfile',
    join(dir, 'docker.pid'),
    '-H',
    `unix://${socket}`,
    '--bridge',
    bridge,
    '--iptables=false',
    '--ip6tables=false',
    '--ip-masq=false',
    '--cgroup-parent',
    `/sandgate-fault-${randomBytes(3).toString('hex')}`,
    '--shutdown-timeout',
    '1',
  ];
  const docker = new Dockerode({ socketPath: socket });
  let proc: ChildProcess | null = null;
  const d: OwnDockerd = {
    host: `unix://${socket}`,
    docker,
    loadMs: 0,
    async start() {
      proc = spawn('dockerd', args, {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` },
      });
      proc.stderr!.resume();
      await until(
        'our dockerd to answer',
        () =>
          docker.ping().then(
            () => true,
            () => false,
          ),
        60_000,
        200,
      );
    },
    async stop() {
      const p = proc;
      if (!p || p.exitCode !== null) return;
      const gone = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await gone;
    },
    async close() {
      // Remove what is left while the engine runs, then stop it and its mounts, then its files.
      if (proc && proc.exitCode === null) {
        const all = await docker.listContainers({ all: true }).catch(() => []);
        await Promise.all(
          all.map((c) =>
            docker
              .getContainer(c.Id)
              .remove({ force: true })
              .catch(() => {}),
          ),
        );
      }
      await d.stop();
      await promisify(execFile)('sh', [
        '-c',
        `grep -o ' ${dir}[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l`,
      ]).catch(() => {});
      await rm(dir, { recursive: true, force: true });
      await sh(`ip link delete ${bridge}`).catch(() => {});
    },
  };
  await d.start();
  const t0 = Date.now();
  await promisify(execFile)('sh', ['-c', `docker save '${image}' | DOCKER_HOST='${d.host}' docker load -q`], {
    maxBuffer: 1 << 20,
  });
  d.loadMs = Date.now() - t0;
  return d;
}

const sh = (command: string) => promisify(execFile)('sh', ['-c', command]);

/** A bridge for the engine's default network, on a private /24 no other network here uses. */
async function createBridge(name: string): Promise<void> {
  const subnet = `10.231.${randomBytes(1)[0]}`;
  await sh(`ip link add ${name} type bridge && ip addr add ${subnet}.1/24 dev ${name} && ip link set ${name} up`);
}
