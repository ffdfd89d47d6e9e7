import type { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import type { PodWorker } from './kubelet.ts';
import { format, nanos, parseDockerLog, type Entry } from './log-entries.ts';
import { followLog } from './pod-log-follow.ts';
import { ApiError, badRequest } from './status.ts';
import type { ContainerRecord } from './pod-status.ts';
import type { PodSpec } from './pod-types.ts';
import type { K8sObject } from './store.ts';

/** How pods/log narrows the log, from its query string. */
export interface LogQuery {
  container?: string;
  limitBytes?: number;
  tailLines?: number;
  sinceTime?: string;
  sinceSeconds?: number;
  timestamps: boolean;
  previous: boolean;
  follow: boolean;
}

export interface LogView {
  /** Per `podUid/container`: entries at or before this time are in rotated files, which pods/log no longer serves. */
  rotatedAt: Map<string, bigint>;
  lagMs: number;
  maxFileBytes: number;
}

/** The container a log request names, with the API server's errors for a missing or ambiguous name. */
export function containerFor(pod: K8sObject, requested: string | undefined): string {
  const spec = pod.spec as PodSpec;
  const app = spec.containers.map((c) => c.name);
  const init = (spec.initContainers ?? []).map((c) => c.name);
  const podName = pod.metadata.name!;
  if (requested === undefined || requested === '') {
    if (app.length === 1) return app[0]!;
    const initPart = init.length ? ` or one of the init containers: [${init.join(' ')}]` : '';
    throw badRequest(
      `a container name must be specified for pod ${podName}, choose one of: [${app.join(' ')}]${initPart}`,
    );
  }
  if (!app.includes(requested) && !init.includes(requested))
    throw badRequest(`container ${requested} is not valid for pod ${podName}`);
  return requested;
}

/**
 * pods/log as the kubelet serves it: the current log file only (rotation), tailLines first, then since,
 * timestamps as a prefix, and limitBytes cutting wherever the count ends, mid-line or mid-character. With follow,
 * a stream of that, then of each line as it is written until the container stops (see followLog).
 */
export async function readLog(
  worker: PodWorker,
  pod: K8sObject,
  name: string,
  q: LogQuery,
  view: LogView,
): Promise<Buffer | Readable> {
  const podName = pod.metadata.name!;
  if (worker.frozen) {
    const ip = worker.model.hostIP ?? '10.0.0.1';
    throw new ApiError(
      500,
      'InternalError',
      `Get "https://${ip}:10250/containerLogs/${pod.metadata.namespace}/${podName}/${name}": ` +
        `dial tcp ${ip}:10250: connect: no route to host`,
    );
  }
  const dockerId = runToRead(worker.model.record(name)!, q.previous, podName);
  const container = worker.runs.find(name, dockerId);
  if (!container || worker.removedLogs.has(name)) {
    return Buffer.from(dockerId ? `unable to retrieve container logs for docker://${dockerId}` : '');
  }
  const written = await dockerEntries(container);
  const file = currentFile(written, `${worker.ref.uid}/${name}`, view);
  const delivered = file.slice(0, deliveredCount(file, view.lagMs));
  const since = sinceOf(q);
  const shown = select(delivered, q, since).map((e) => format(e, q.timestamps));
  if (q.follow) {
    const held = file.slice(delivered.length);
    return followLog(container, { written, held, shown }, { since, query: q, view });
  }
  const all = Buffer.concat(shown);
  return q.limitBytes === undefined ? all : all.subarray(0, q.limitBytes);
}

/**
 * The engine id of the run a log request reads, in the kubelet's order: with previous, the run its lastState names;
 * else the current run once it started; else, while it waits to run again, the run that ended.
 */
function runToRead(rec: ContainerRecord, previous: boolean, podName: string): string | undefined {
  const last = rec.lastState && 'terminated' in rec.lastState ? rec.lastState.terminated : undefined;
  const lastId = last?.containerID?.replace(/^docker:\/\//, '');
  if (previous) {
    if (!lastId) throw badRequest(`previous terminated container "${rec.name}" in pod "${podName}" not found`);
    return lastId;
  }
  if (!('waiting' in rec.state)) return rec.dockerId;
  if (lastId) return lastId;
  const r = rec.state.waiting.reason;
  const why = r === 'ErrImagePull' || r === 'ImagePullBackOff' ? 'trying and failing to pull image' : r;
  throw badRequest(`container "${rec.name}" in pod "${podName}" is waiting to start: ${why}`);
}

async function dockerEntries(container: Dockerode.Container): Promise<Entry[]> {
  const raw = (await container.logs({
    stdout: true,
    stderr: true,
    timestamps: true,
    follow: false,
  })) as unknown as Buffer;
  return parseDockerLog(Buffer.isBuffer(raw) ? raw : Buffer.from(raw));
}

/** What the current log file holds: nothing from rotated files (rotateLogs, or past containerLogMaxBytes). */
function currentFile(entries: Entry[], key: string, view: LogView): Entry[] {
  const rotated = view.rotatedAt.get(key) ?? -1n;
  let start = 0;
  let fileBytes = 0;
  entries.forEach((e, i) => {
    // A CRI log line carries the time, the stream and a tag besides the text.
    fileBytes += e.bytes.length + e.ts.length + 10;
    if (fileBytes > view.maxFileBytes) {
      start = i;
      fileBytes = e.bytes.length + e.ts.length + 10;
    }
  });
  return entries.slice(start).filter((e) => e.ns > rotated);
}

/** How many of the entries a lagging runtime has delivered: those older than the lag. */
function deliveredCount(entries: Entry[], lagMs: number): number {
  if (lagMs === 0) return entries.length;
  const newest = BigInt(Date.now() - lagMs) * 1_000_000n;
  const first = entries.findIndex((e) => e.ns > newest);
  return first < 0 ? entries.length : first;
}

/** The log narrowed as pods/log narrows it: the last tailLines lines, then only those written at or after since. */
function select(entries: Entry[], q: LogQuery, since: bigint | undefined): Entry[] {
  const list = q.tailLines === undefined ? entries : tail(entries, q.tailLines);
  return since === undefined ? list : list.filter((e) => e.ns >= since);
}

/** sinceTime, or sinceSeconds back from now, in nanoseconds. */
function sinceOf(q: LogQuery): bigint | undefined {
  if (q.sinceTime !== undefined) return nanos(q.sinceTime);
  if (q.sinceSeconds !== undefined) return BigInt(Date.now() - q.sinceSeconds * 1000) * 1_000_000n;
  return undefined;
}

/** The last `n` lines: entries after the n-th newline from the end. */
function tail(entries: Entry[], n: number): Entry[] {
  if (n <= 0) return [];
  let lines = 0;
  for (let i = entries.length - 1; i >= 0; i--) {
    const last = entries[i]!.bytes;
    if (last[last.length - 1] === 0x0a || i === entries.length - 1) lines++;
    if (lines > n) return entries.slice(i + 1);
  }
  return entries;
}
