import type Dockerode from 'dockerode';
import type { LiveSet } from '../backend.ts';
import { deploymentOf, isOrphan, roleOf, MANAGED_SELECTOR, ownerOf } from '../housekeeping/labels.ts';
import type { BackendLogger } from '../logger.ts';
import { WORKDIR } from '../run/sandbox.ts';
import { isNotFound } from './engine-errors.ts';
import type { SlotDirs } from './pool-dirs.ts';

export interface SweepScope {
  docker: Dockerode;
  deployment: string;
  /** Containers younger than this are kept: the live set the caller computed may predate them. */
  graceMs: number;
  slots: SlotDirs;
  log: BackendLogger;
}

/**
 * Removes every container of this deployment that nothing in `live` owns (see isOrphan), and the slot directories
 * of the warm-pool ones. Answers with what each removed container belonged to: its execution, session or worker.
 */
export async function sweepContainers(scope: SweepScope, live: LiveSet): Promise<string[]> {
  const { docker, deployment, graceMs, log } = scope;
  const newest = Date.now() / 1000 - graceMs / 1000;
  const containers = await docker.listContainers({ all: true, filters: { label: [MANAGED_SELECTOR] } });
  const removed: string[] = [];
  for (const info of containers) {
    if (!(isOrphan(info.Labels, live, deployment) || isDeadPoolSandbox(info, deployment)) || info.Created > newest)
      continue;
    try {
      await docker.getContainer(info.Id).remove({ force: true });
    } catch (err) {
      // Already gone (a concurrent sweep or the run itself got there first) is what we wanted.
      if (!isNotFound(err))
        log.warn({ container: info.Id, err }, 'could not remove orphaned sandbox; the next sweep will retry');
      continue;
    }
    removed.push(ownerOf(info.Labels) ?? info.Id);
    if (roleOf(info.Labels) === 'pool') await removeSlot(scope, info);
  }
  return removed;
}

/**
 * A warm-pool sandbox that has stopped is of no use to anyone, even when its worker lives: an engine restart stops
 * them all while the pool cannot remove them (the engine is down when it learns of it), and nothing else would.
 * Another deployment's are its own sweep's to remove.
 */
function isDeadPoolSandbox(info: Dockerode.ContainerInfo, deployment: string): boolean {
  if (deploymentOf(info.Labels) !== deployment || roleOf(info.Labels) !== 'pool') return false;
  return info.State === 'exited' || info.State === 'dead';
}

/** A pool container's slot directory, learnt from its mount; a slot a run adopted is gone already. */
async function removeSlot(scope: SweepScope, info: Dockerode.ContainerInfo): Promise<void> {
  const source = info.Mounts.find((m) => m.Destination === WORKDIR)?.Source;
  if (source === undefined || !scope.slots.owns(source)) return;
  await scope.slots
    .remove(source)
    .catch((err: unknown) => scope.log.warn({ dir: source, err }, 'could not remove slot directory'));
}
