import type Dockerode from 'dockerode';
import { dockerName, podLabels, type PodRef } from './docker-labels.ts';
import type { NodeContext } from './node-context.ts';
import { k8sTime } from './pod-status.ts';
import type { ContainerState } from './pod-types.ts';

/** The Pod's network namespace: a small container on the Pods' network that every other container joins. */
export async function startPause(ctx: NodeContext, ref: PodRef): Promise<{ pause: Dockerode.Container; podIP: string | undefined }> {
  const pause = await ctx.docker.createContainer({
    name: dockerName(ref, 'pod'), Image: ctx.settings.pauseImage, Entrypoint: ['sleep', 'infinity'], Cmd: [],
    User: '65534:65534', Hostname: ref.name.slice(0, 63), Labels: podLabels(ref, 'POD'),
    HostConfig: {
      NetworkMode: ctx.network.name, ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'],
      Memory: 32 << 20, LogConfig: { Type: 'none', Config: {} },
    },
  });
  await pause.start();
  const info = await pause.inspect();
  return { pause, podIP: info.NetworkSettings.Networks[ctx.network.name]?.IPAddress || undefined };
}

/** The kubelet's message when the RuntimeClass handler is not on the node; undefined when it is (or none is asked). */
export async function missingHandler(ctx: NodeContext, handler: string | undefined): Promise<string | undefined> {
  if (handler === undefined || (await ctx.runtimes()).has(handler)) return undefined;
  return `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "${handler}" is configured`;
}

/** How a container that ran ended, from the engine: OOMKilled, Completed or Error, with its times. */
export async function exitState(container: Dockerode.Container): Promise<ContainerState | undefined> {
  const state = await container.inspect().then((i) => i.State, () => undefined);
  if (!state) return undefined;
  const reason = state.OOMKilled ? 'OOMKilled' : state.ExitCode === 0 ? 'Completed' : 'Error';
  return { terminated: { exitCode: state.ExitCode, reason, startedAt: k8sTime(state.StartedAt), finishedAt: k8sTime(state.FinishedAt),
    containerID: `docker://${container.id}` } };
}

/** A container the runtime could not start (a missing command, a bad mount): terminated 128 StartError, as containerd. */
export function startError(err: unknown, containerId: string): ContainerState {
  const at = k8sTime();
  return { terminated: { exitCode: 128, reason: 'StartError', message: errorText(err), startedAt: at, finishedAt: at, containerID: `docker://${containerId}` } };
}

export const errorText = (err: unknown): string =>
  ((err as { json?: { message?: string } }).json?.message ?? (err as Error).message ?? String(err)).trim();
