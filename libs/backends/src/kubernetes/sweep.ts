import type { LiveSet } from '../backend.ts';
import { isOrphan, LABELS, ownerOf } from '../shared/labels.ts';
import type { BackendLogger } from '../shared/logger.ts';
import { clusterError, messageOf, statusOf, type PodApi } from './api.ts';

interface Listed {
  metadata?: { name?: string; uid?: string; labels?: Record<string, string>; creationTimestamp?: Date | string };
}

/**
 * Deletes the sandbox Pods and transfer Secrets of this deployment that nothing in `live` owns (isOrphan, the rule
 * the Docker backend sweeps by), once older than `graceMs`; each Pod by its uid, so a Pod made meanwhile under the
 * same name stays. A Secret goes with its Pod anyway (ownerReferences); sweeping them too covers a worker that died
 * between making the two. Answers the executions, sessions or workers each removed object belonged to.
 */
export async function sweepPods(
  api: PodApi, deployment: string, live: LiveSet, graceMs: number, log: BackendLogger,
): Promise<string[]> {
  const selector = `${LABELS.managed}=true,${LABELS.deployment}=${deployment}`;
  const newest = Date.now() - graceMs;
  const orphaned = (o: Listed) => isOrphan(o.metadata?.labels, live, deployment)
    && new Date(o.metadata?.creationTimestamp ?? 0).getTime() <= newest;
  const removed: string[] = [];
  const remove = async (o: Listed, kind: 'Pod' | 'Secret') => {
    const name = o.metadata?.name;
    if (name === undefined) return;
    try {
      if (kind === 'Pod') await api.deletePod(name, o.metadata?.uid);
      else await api.deleteSecret(name);
      if (kind === 'Pod') removed.push(ownerOf(o.metadata?.labels) ?? name);
    } catch (err) {
      // Gone already (its run, another sweep or the garbage collector got there first) is what we wanted.
      if (statusOf(err) !== 404 && statusOf(err) !== 409) log.warn({ [kind.toLowerCase()]: name, err: messageOf(err) }, 'could not sweep; the next sweep retries');
    }
  };
  for (const kind of ['Pod', 'Secret'] as const) {
    let next: string | undefined;
    do {
      const page = await (kind === 'Pod' ? api.listPods(selector, next) : api.listSecrets(selector, next))
        .catch((err: unknown) => { throw clusterError(err, `listing ${kind}s to sweep`); });
      for (const o of page.items.filter(orphaned)) await remove(o, kind);
      next = page.metadata?._continue || undefined;
    } while (next !== undefined);
  }
  return removed;
}
