import type Dockerode from 'dockerode';
import { poolLabels } from '../housekeeping/labels.ts';
import type { BackendLogger } from '../logger.ts';
import type { AgentChannel } from '../agent/agent-channel.ts';
import { SandboxPool, type PoolMember } from '../pool/sandbox-pool.ts';
import { attachAgent } from './agent-attach.ts';
import { agentSpec } from './agent-spec.ts';
import type { SandboxLimits, SandboxSettings } from './container-spec.ts';
import { forceRemove } from './engine-errors.ts';
import type { SlotDirs } from './pool-dirs.ts';

export type { PoolStats } from '../pool/sandbox-pool.ts';

/** A started container whose agent has answered on its attach, waiting for a run. */
export interface PooledSandbox extends PoolMember {
  readonly container: Dockerode.Container;
  /** Host path of the directory mounted at /mnt/data: empty there between runs, a session's during one. */
  readonly slotDir: string;
  /** Its memory and CPUs: the pool's when made, a run's after `docker update`. */
  limits: SandboxLimits;
}

export interface WarmPoolOptions {
  docker: Dockerode;
  settings: SandboxSettings;
  slots: SlotDirs;
  instanceId: string;
  size: number;
  /** Memory and CPUs every pooled sandbox is made with: the deployment's, whatever a run asks for. */
  limits: SandboxLimits;
  log: BackendLogger;
  readyTimeoutMs: number;
  /** Runs one sandbox may serve, with a reset between two; 1 makes every sandbox single-use. */
  maxRuns: number;
  /** Reset sandboxes kept for their tenant's next run (the runs in flight at once is a good bound); 0 keeps none. */
  maxRecycled: number;
  /** How long a reset sandbox waits for its tenant's next run before it is removed. */
  recycledIdleMs: number;
  /** The template of its sandboxes (their image is settings.image); absent: the runtime image's pool. */
  template?: string;
}

/** The Docker backend's warm pool: containers running the agent, each with a slot directory as its /mnt/data. */
export class WarmPool extends SandboxPool<PooledSandbox> {
  constructor(o: WarmPoolOptions) {
    super({
      size: o.size,
      log: o.log,
      maxRuns: o.maxRuns,
      maxRecycled: o.maxRecycled,
      recycledIdleMs: o.recycledIdleMs,
      make: (closed) => makeSandbox(o, closed),
      discard: (sandbox) => discard(o, sandbox.container, sandbox.slotDir),
    });
  }
}

async function makeSandbox(o: WarmPoolOptions, closed: () => boolean): Promise<PooledSandbox | undefined> {
  const { docker, settings, slots, instanceId, limits } = o;
  const { slot, dir } = await slots.create();
  const name = `sandgate-p-${slot}`;
  let container: Dockerode.Container;
  let channel: AgentChannel;
  try {
    container = await docker.createContainer(
      agentSpec(
        {
          name,
          labels: poolLabels(settings.deployment, instanceId, o.template),
          limits,
          workspaceDir: dir,
          prewarm: 'fresh',
        },
        settings,
      ),
    );
  } catch (err) {
    await slots.remove(dir).catch(() => {});
    throw err;
  }
  try {
    channel = await attachAgent(container);
  } catch (err) {
    await discard(o, container, dir);
    throw err;
  }
  try {
    if (!closed()) await container.start();
    if (!closed()) await channel.handshake(o.readyTimeoutMs);
  } catch (err) {
    channel.close();
    await discard(o, container, dir);
    throw err;
  }
  const sandbox: PooledSandbox = { name, container, channel, slotDir: dir, limits, runs: 0, tenant: undefined };
  if (closed()) {
    channel.close();
    await discard(o, container, dir);
    return undefined;
  }
  return sandbox;
}

async function discard(o: WarmPoolOptions, container: Dockerode.Container, slotDir: string): Promise<void> {
  await forceRemove(container).catch((err: unknown) =>
    o.log.warn({ container: container.id, err }, 'could not remove pooled sandbox; sweep will retry'),
  );
  // A slot a run adopted is a session directory now, and its old path is gone: nothing to do then.
  await o.slots
    .remove(slotDir)
    .catch((err: unknown) => o.log.warn({ dir: slotDir, err }, 'could not remove slot directory'));
}
