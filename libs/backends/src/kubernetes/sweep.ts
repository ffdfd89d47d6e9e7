import type * as k8s from '@kubernetes/client-node';
import type { LiveSet } from '../backend.ts';
import { isOrphan, LABELS, ownerOf } from '../housekeeping/labels.ts';
import type { BackendLogger } from '../logger.ts';
import { clusterError, messageOf, statusOf, type PodApi } from './api.ts';

/**
 * Deletes the sandbox Pods of this deployment that nothing in `live` owns (isOrphan, the rule the Docker backend
 * sweeps by), once older than `graceMs`; each by its uid, so a Pod made meanwhile under the same name stays. Looks
 * through `seen`, the worker's watch of them, when it has one in sync (a Pod it shows that is gone already is a 404,
 * one made since it last heard is younger than any orphan worth removing), else lists them. Their
 * transfer Secrets go with them: each is owned by its Pod (ownerReferences), so the garbage collector deletes it, and
 * the worker needs no right to list or delete Secrets. Answers the executions, sessions or workers they belonged to.
 */
export async function sweepPods(
  api: PodApi,
  deployment: string,
  live: LiveSet,
  graceMs: number,
  log: BackendLogger,
  seen?: k8s.V1Pod[],
): Promise<string[]> {
  const selector = `${LABELS.managed}=true,${LABELS.deployment}=${deployment}`;
  const newest = Date.now() - graceMs;
  const removed: string[] = [];
  let next: string | undefined;
  do {
    const page = seen
      ? { items: seen, metadata: {} as k8s.V1ListMeta }
      : await api.listPods(selector, next).catch((err: unknown) => {
          throw clusterError(err, 'listing Pods to sweep');
        });
    for (const pod of page.items) {
      const { name, uid, labels, creationTimestamp } = pod.metadata ?? {};
      if (name === undefined || !isOrphan(labels, live, deployment)) continue;
      if (new Date(creationTimestamp ?? 0).getTime() > newest) continue;
      try {
        await api.deletePod(name, uid);
        removed.push(ownerOf(labels) ?? name);
      } catch (err) {
        // Gone already (its run, or another sweep, got there first) is what we wanted.
        if (statusOf(err) !== 404 && statusOf(err) !== 409)
          log.warn({ pod: name, err: messageOf(err) }, 'could not sweep; the next sweep retries');
      }
    }
    next = page.metadata?._continue || undefined;
  } while (next !== undefined);
  return removed;
}
