// Test support for the Docker backend tests (not itself a test file): real engine, real image, temp data dirs.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import Dockerode from 'dockerode';
import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import { Workspaces } from '@sandgate/storage';
import { RecordingSink } from './recording-sink.ts';
import { DockerBackend, type DockerBackendOptions } from '../docker/docker-backend.ts';
import { sessionContainerName } from '../docker/agent-spec.ts';
import { containerName } from '../docker/container-spec.ts';

/** The runtime image under test: SANDGATE_IMAGE, as for the rest of the suite. */
export const IMAGE = process.env.SANDGATE_IMAGE ?? 'sandgate/runtime:1';
export const docker = new Dockerode();
export const SANDBOX_UID = 1000;

export { RecordingSink };

export const artifactUrl = (sessionId: string, path: string): string => `http://files.test/files/${sessionId}/${path}`;

export interface Fixture {
  backend: DockerBackend;
  workspaces: Workspaces;
  dataDir: string;
  /** This fixture's own deployment: its sweeps never touch another test's containers. */
  deployment: string;
  instanceId: string;
  /** A job for this fixture's session; each call gets a fresh execution id. */
  job(over?: Partial<ExecutionJob>): ExecutionJob;
  /** Runs a job, removing its containers (one-shot or session) afterwards should the test fail half-way. */
  run(job: ExecutionJob, sink?: RecordingSink, signal?: AbortSignal): Promise<ExecutionResult>;
}

export const newSessionId = (): string => `sess_${randomBytes(6).toString('hex')}`;

/**
 * A backend over a fresh temp data dir and session, all removed when the test ends. No warm pool unless asked for
 * (poolSize), and no sweep grace, so a test sweeps exactly what it made.
 */
export async function fixture(t: TestContext, over: Partial<DockerBackendOptions> = {}): Promise<Fixture> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sandgate-backend-'));
  const workspaces = new Workspaces({ dataDir, owner: { uid: SANDBOX_UID, gid: SANDBOX_UID } });
  const deployment = `test-${randomBytes(4).toString('hex')}`;
  const instanceId = `worker-${randomBytes(4).toString('hex')}`;
  const backend = new DockerBackend({
    workspaces,
    artifactUrl,
    deployment,
    instanceId,
    image: IMAGE,
    poolSize: 0,
    sweepGraceMs: 0,
    ...over,
  });
  t.after(async () => {
    await backend.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  const sessionId = newSessionId();
  const job = (o: Partial<ExecutionJob> = {}): ExecutionJob => ({
    execution_id: `exec_${randomBytes(8).toString('hex')}`,
    tenant: 'test',
    session_id: sessionId,
    language: 'python',
    code: 'print(1)',
    timeout_ms: 30_000,
    memory_mb: 256,
    cpus: 1,
    env: {},
    stdin: null,
    sandbox: 'oneshot',
    generation: 0,
    ...o,
  });
  const run = (j: ExecutionJob, sink = new RecordingSink(), signal = new AbortController().signal) => {
    t.after(() => removeContainer(containerName(j.execution_id)));
    if (j.sandbox !== 'oneshot') t.after(() => removeContainer(sessionContainerName(j.session_id)));
    return backend.execute(j, sink, signal);
  };
  return { backend, workspaces, dataDir, deployment, instanceId, job, run };
}

/** Where a test's runs happen: a fresh container each, a warm-pool sandbox each, or the session's long-lived one. */
export type RunMode = 'cold' | 'pooled' | 'session';
export const RUN_MODES: readonly RunMode[] = ['cold', 'pooled', 'session'];

/**
 * A fixture whose jobs run in `mode`. In `pooled` mode every run waits for a warm sandbox and fails the test if
 * it did not get one, so a silent fall-back to a cold container cannot pass for the pooled path.
 */
export async function modeFixture(
  t: TestContext,
  mode: RunMode,
  over: Partial<DockerBackendOptions> = {},
): Promise<Fixture> {
  const f = await fixture(t, { poolSize: mode === 'pooled' ? 1 : 0, ...over });
  const sandbox = mode === 'session' ? 'session' : 'oneshot';
  const job = (o: Partial<ExecutionJob> = {}): ExecutionJob => f.job({ sandbox, ...o });
  const run: Fixture['run'] = async (j, sink, signal) => {
    if (mode !== 'pooled') return f.run(j, sink, signal);
    await f.backend.poolReady();
    const { hits } = f.backend.poolStats();
    const result = await f.run(j, sink, signal);
    if (f.backend.poolStats().hits !== hits + 1)
      throw new Error(`the run did not get a warm sandbox: ${JSON.stringify(f.backend.poolStats())}`);
    return result;
  };
  return { ...f, job, run };
}

/** Polls `condition` until it holds, failing after `timeoutMs`: for states the engine reaches on its own time. */
export async function until(what: string, condition: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function removeContainer(nameOrId: string): Promise<void> {
  await docker
    .getContainer(nameOrId)
    .remove({ force: true })
    .catch(() => {});
}

/** True when the engine has no container by that name or id. */
export async function containerGone(nameOrId: string): Promise<boolean> {
  return docker
    .getContainer(nameOrId)
    .inspect()
    .then(
      () => false,
      (err: { statusCode?: number }) => {
        if (err.statusCode === 404) return true;
        throw err;
      },
    );
}

/** The host's address on the default bridge, as a container on that bridge reaches it. */
export async function bridgeGateway(): Promise<string> {
  const config = ((await docker.getNetwork('bridge').inspect()).IPAM?.Config ?? []) as {
    Subnet?: string;
    Gateway?: string;
  }[];
  const v4 = config.find((c) => c.Subnet?.includes('.'));
  if (v4?.Gateway) return v4.Gateway;
  // Older engines leave Gateway empty for the default bridge; it is then the subnet's first address.
  // (docker0 itself is hidden from os.networkInterfaces() while no container is attached to it.)
  const [base] = (v4?.Subnet ?? '').split('/');
  const octets = (base ?? '').split('.').map(Number);
  if (octets.length !== 4 || octets.some((n) => !Number.isInteger(n)))
    throw new Error('cannot find the default bridge gateway');
  octets[3] = (octets[3] ?? 0) + 1;
  return octets.join('.');
}

/** Runs a plain container of the image with the engine's defaults (bridge network) and returns its exit code. */
export async function runPlain(t: TestContext, cmd: string[]): Promise<number> {
  const container = await docker.createContainer({
    Image: IMAGE,
    Cmd: cmd,
    Labels: { 'org.sandgate.test': 'control' },
  });
  t.after(() => removeContainer(container.id));
  const exited = container.wait({ condition: 'next-exit' });
  await container.start();
  const { StatusCode } = (await exited) as { StatusCode: number };
  return StatusCode;
}

export async function runtimes(): Promise<string[]> {
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
  return Object.keys(info.Runtimes ?? {});
}

/**
 * Kills the agent of an agent sandbox from outside, as a crash of it would end it (a run cannot: the agent is another
 * uid). Through `docker exec` as root, which the sandbox's KILL capability lets signal the agent.
 */
export async function killAgentOf(container: Dockerode.Container): Promise<void> {
  const script =
    'for p in /proc/[0-9]*; do case "$(tr "\\0" " " < "$p/cmdline")" in ' +
    'python3*sandgate_agent.py*) kill -KILL "${p#/proc/}";; esac; done';
  const exec = await container.exec({ Cmd: ['sh', '-c', script], User: '0:0', AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({});
  await new Promise<void>((resolve) => {
    stream.on('end', resolve);
    stream.on('error', () => resolve());
    stream.resume();
  });
}
