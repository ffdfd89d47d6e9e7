import { randomUUID } from 'node:crypto';
import type Dockerode from 'dockerode';
import { dockerName, podLabels, type PodRef } from './docker-labels.ts';
import type { NodeContext } from './node-context.ts';
import { k8sTime } from './pod-status.ts';
import type { ContainerState } from './pod-types.ts';

export interface PodSandbox {
  pause: Dockerode.Container;
  podIP: string | undefined;
}

/** A pause container: it holds a network namespace on the Pods' network that the Pod's containers join. */
async function createPause(
  ctx: NodeContext,
  name: string,
  hostname: string,
  labels: Record<string, string>,
): Promise<PodSandbox> {
  const pause = await ctx.docker.createContainer({
    name,
    Image: ctx.settings.pauseImage,
    Entrypoint: ['sleep', 'infinity'],
    Cmd: [],
    User: '65534:65534',
    Hostname: hostname,
    Labels: labels,
    HostConfig: {
      NetworkMode: ctx.network.name,
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Memory: 32 << 20,
      LogConfig: { Type: 'none', Config: {} },
    },
  });
  await pause.start();
  const info = await pause.inspect();
  return { pause, podIP: info.NetworkSettings.Networks[ctx.network.name]?.IPAddress || undefined };
}

/**
 * Network sandboxes made ahead of the Pods that will take them. Attaching a container to a bridge costs the engine
 * ~150 ms (veth, iptables), the bulk of the double's per-Pod cost, which a real node pays in its CNI instead; a warm
 * sandbox takes it off the Pod's start. A taken one is renamed after its Pod but keeps its pool labels (Docker
 * labels are fixed) and a generic hostname. `size` 0 makes every sandbox for its Pod, labelled and named by it.
 */
export class PausePool {
  readonly #ready: PodSandbox[] = [];
  #filling = false;
  #closed = false;

  constructor(
    private readonly ctx: NodeContext,
    private readonly size: number,
  ) {
    this.#fill();
  }

  async take(ref: PodRef): Promise<PodSandbox> {
    const warm = this.#ready.shift();
    this.#fill();
    if (!warm) return createPause(this.ctx, dockerName(ref, 'pod'), ref.name.slice(0, 63), podLabels(ref, 'POD'));
    await warm.pause.rename({ name: dockerName(ref, 'pod') }).catch(() => {});
    return warm;
  }

  #fill(): void {
    if (this.#filling || this.#closed || this.#ready.length >= this.size) return;
    this.#filling = true;
    const ref = { doubleId: this.ctx.doubleId, uid: randomUUID(), namespace: '', name: 'warm' };
    createPause(this.ctx, dockerName(ref, 'warm-pod'), 'pod', podLabels({ ...ref, uid: 'warm-pool' }, 'POD'))
      .then(
        (s) => {
          if (this.#closed) void s.pause.remove({ force: true }).catch(() => {});
          else this.#ready.push(s);
        },
        () => {},
      )
      .finally(() => {
        this.#filling = false;
        this.#fill();
      });
  }

  /** Stops refilling and removes the warm sandboxes no Pod took. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#ready.splice(0).map((s) => s.pause.remove({ force: true }).catch(() => {})));
  }
}

/** The kubelet's message when the RuntimeClass handler is not on the node; undefined when it is (or none is asked). */
export async function missingHandler(ctx: NodeContext, handler: string | undefined): Promise<string | undefined> {
  if (handler === undefined || (await ctx.runtimes()).has(handler)) return undefined;
  return (
    'Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: ' +
    `no runtime for "${handler}" is configured`
  );
}

/** How a container that ran ended, from the engine: OOMKilled, Completed or Error, with its times. */
export async function exitState(container: Dockerode.Container): Promise<ContainerState | undefined> {
  const state = await container.inspect().then(
    (i) => i.State,
    () => undefined,
  );
  if (!state) return undefined;
  const reason = state.OOMKilled ? 'OOMKilled' : state.ExitCode === 0 ? 'Completed' : 'Error';
  return {
    terminated: {
      exitCode: state.ExitCode,
      reason,
      startedAt: k8sTime(state.StartedAt),
      finishedAt: k8sTime(state.FinishedAt),
      containerID: `docker://${container.id}`,
    },
  };
}

/** A container the runtime could not start (missing command, bad mount): terminated 128 StartError, as containerd. */
export function startError(err: unknown, containerId: string): ContainerState {
  const at = k8sTime();
  return {
    terminated: {
      exitCode: 128,
      reason: 'StartError',
      message: errorText(err),
      startedAt: at,
      finishedAt: at,
      containerID: `docker://${containerId}`,
    },
  };
}

export const errorText = (err: unknown): string =>
  ((err as { json?: { message?: string } }).json?.message ?? (err as Error).message ?? String(err)).trim();

/**
 * Resolves once the container has stopped. A wait(next-exit) sent before start can still reach the engine after a
 * fast program has exited (two connections, no ordering), and would then wait for an exit that never comes; polling
 * the state closes that gap.
 */
export async function stopped(container: Dockerode.Container, exited: Promise<unknown>, pollMs = 250): Promise<void> {
  let done = false;
  void exited.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  while (!done) {
    await Promise.race([exited.catch(() => {}), new Promise((r) => setTimeout(r, pollMs))]);
    if (done) return;
    const running = await container.inspect().then(
      (i) => i.State.Running || i.State.Restarting,
      () => false,
    );
    if (!running) return;
  }
}
