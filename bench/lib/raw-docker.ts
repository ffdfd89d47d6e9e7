/**
 * The baseline: the same sandbox straight through the Docker API (dockerode), no gateway, queue or worker.
 * The host settings are sandgate's own (`hostConfig` of @sandgate/backends), so the only difference from a
 * sandgate run is sandgate itself.
 */
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Dockerode from 'dockerode';
import { hostConfig, WORKDIR, type SandboxSettings } from '@sandgate/backends/testing';
import { onCleanup } from './main.ts';

export const IMAGE = process.env.SANDGATE_IMAGE ?? 'sandgate/runtime:1';
/** Label on every container a bench makes itself, so cleanup finds exactly those. */
export const BENCH_LABEL = 'org.sandgate.bench';
export const docker = new Dockerode();

/** Sandgate's defaults (README "Configuration" and DockerBackend): 512m, 1 CPU, 128 pids, 64 MiB /tmp, nofile 1024. */
const LIMITS = { memory_mb: 512, cpus: 1 };
const SETTINGS: Omit<SandboxSettings, 'deployment'> = {
  image: IMAGE,
  runtime: undefined,
  user: '1000:1000',
  pidsLimit: 128,
  tmpfsBytes: 64 * 1024 * 1024,
  nofile: 1024,
};

export function sandboxSpec(runId: string, workspaceDir: string, cmd: string[]): Dockerode.ContainerCreateOptions {
  // The deployment only names the run here: hostConfig puts no label on the container, BENCH_LABEL does.
  const settings: SandboxSettings = { ...SETTINGS, deployment: runId };
  return {
    name: `sgbench-${runId}-${randomBytes(4).toString('hex')}`,
    Image: settings.image,
    Cmd: cmd,
    Env: [],
    User: settings.user,
    WorkingDir: WORKDIR,
    Labels: { [BENCH_LABEL]: runId },
    Tty: false,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: false,
    OpenStdin: false,
    StdinOnce: false,
    NetworkDisabled: true,
    HostConfig: hostConfig(LIMITS, workspaceDir, settings),
  };
}

/**
 * A temp directory owned by the sandbox user, like a session workspace, for the raw runs labelled `runId`.
 * `remove` takes away those containers and the directory; it also runs if the bench is interrupted.
 */
export async function makeWorkspace(runId: string): Promise<{ dir: string; remove(): Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), 'sandgate-bench-raw-'));
  const remove = async () => {
    unregister();
    await removeBenchContainers(runId).catch(() => {});
    await rm(root, { recursive: true, force: true });
  };
  const unregister = onCleanup(remove);
  await chmod(root, 0o711);
  const dir = join(root, 'ws');
  await mkdir(dir, 0o755);
  await chown(dir, 1000, 1000);
  return { dir, remove };
}

function collect(): { sink: PassThrough; text(): string } {
  const chunks: Buffer[] = [];
  const sink = new PassThrough();
  sink.on('data', (c: Buffer) => chunks.push(c));
  return { sink, text: () => Buffer.concat(chunks).toString('utf8') };
}

function endOf(stream: NodeJS.ReadableStream): Promise<void> {
  return new Promise((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
}

export interface ColdRun {
  totalMs: number;
  /** Per step: create, attach (+ wait registered), start, exit (start returned → exited and output drained), remove. */
  steps: Record<string, number>;
}

/** One cold `python3 -c print(1)`: create, attach, wait(next-exit) registered, start, exit, remove. */
export async function rawColdRun(runId: string, workspaceDir: string, code = 'print(1)'): Promise<ColdRun> {
  const t0 = performance.now();
  const c = await docker.createContainer(sandboxSpec(runId, workspaceDir, ['python3', '-c', code]));
  const t1 = performance.now();
  try {
    const stream = await c.attach({ stream: true, stdout: true, stderr: true });
    const out = collect();
    const err = collect();
    const drained = endOf(stream);
    c.modem.demuxStream(stream, out.sink, err.sink);
    const exited = c.wait({ condition: 'next-exit' }) as Promise<{ StatusCode: number }>;
    const t2 = performance.now();
    await c.start();
    const t3 = performance.now();
    const { StatusCode } = await exited;
    await drained;
    const t4 = performance.now();
    if (StatusCode !== 0 || out.text() !== '1\n') {
      throw new Error(
        `raw run ended with status ${StatusCode}, stdout ${JSON.stringify(out.text())}, stderr ${JSON.stringify(err.text().slice(0, 300))}`,
      );
    }
    await c.remove({ force: true });
    const t5 = performance.now();
    return {
      totalMs: t5 - t0,
      steps: { create: t1 - t0, attach: t2 - t1, start: t3 - t2, exit: t4 - t3, remove: t5 - t4 },
    };
  } catch (e) {
    await c.remove({ force: true }).catch(() => {});
    throw e;
  }
}

/** A long-lived container of the same image and flags, for execs. */
export async function startIdleContainer(runId: string, workspaceDir: string): Promise<Dockerode.Container> {
  const c = await docker.createContainer(sandboxSpec(runId, workspaceDir, ['sleep', 'infinity']));
  await c.start();
  return c;
}

/** One exec of `python3 -c print(1)`: create exec, start hijacked, wait for the stream's end, inspect the exit code. */
export async function rawExec(c: Dockerode.Container): Promise<number> {
  const t0 = performance.now();
  const exec = await c.exec({
    Cmd: ['python3', '-c', 'print(1)'],
    AttachStdout: true,
    AttachStderr: true,
    User: SETTINGS.user,
    WorkingDir: WORKDIR,
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  const out = collect();
  const err = collect();
  const drained = endOf(stream);
  c.modem.demuxStream(stream, out.sink, err.sink);
  await drained;
  const info = await exec.inspect();
  const ms = performance.now() - t0;
  if (info.ExitCode !== 0 || out.text() !== '1\n') {
    throw new Error(
      `exec ended with ${info.ExitCode}, stdout ${JSON.stringify(out.text())}, stderr ${JSON.stringify(err.text().slice(0, 300))}`,
    );
  }
  return ms;
}

/** Removes every container a bench run made itself (by its label). */
export async function removeBenchContainers(runId: string): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${BENCH_LABEL}=${runId}`] } });
  await Promise.all(
    list.map((i) =>
      docker
        .getContainer(i.Id)
        .remove({ force: true })
        .catch(() => {}),
    ),
  );
  return list.length;
}
