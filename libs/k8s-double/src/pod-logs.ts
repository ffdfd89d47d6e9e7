import type Dockerode from 'dockerode';
import type { PodWorker } from './kubelet.ts';
import { ApiError, badRequest } from './status.ts';
import type { PodSpec } from './pod-types.ts';
import type { K8sObject } from './store.ts';

/** One line (or part of a line) as the runtime logged it, with its time in nanoseconds. */
interface Entry {
  ts: string;
  ns: bigint;
  bytes: Buffer;
}

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

export function nanos(ts: string): bigint {
  const m = /^(.*?:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  if (!m) return 0n;
  return BigInt(Date.parse(`${m[1]}Z`)) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0').slice(0, 9));
}

/** Splits `docker logs` output (8-byte frame headers, timestamps on) into entries, stdout and stderr in order. */
export function parseDockerLog(buf: Buffer): Entry[] {
  const out: Entry[] = [];
  for (let at = 0; at + 8 <= buf.length;) {
    const size = buf.readUInt32BE(at + 4);
    const payload = buf.subarray(at + 8, at + 8 + size);
    at += 8 + size;
    const space = payload.indexOf(0x20);
    if (space < 0) continue;
    const ts = payload.subarray(0, space).toString('latin1');
    out.push({ ts, ns: nanos(ts), bytes: payload.subarray(space + 1) });
  }
  return out;
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
 * timestamps as a prefix, and limitBytes cutting wherever the count ends, mid-line or mid-character.
 */
export async function readLog(
  worker: PodWorker,
  pod: K8sObject,
  name: string,
  q: LogQuery,
  view: LogView,
): Promise<Buffer> {
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
  if (q.follow) throw badRequest('k8s-double: follow=true is not implemented; read the log with discrete requests');
  if (q.previous) throw badRequest(`previous terminated container "${name}" in pod "${podName}" not found`);
  const rec = worker.model.record(name)!;
  if ('waiting' in rec.state) {
    const r = rec.state.waiting.reason;
    const why = r === 'ErrImagePull' || r === 'ImagePullBackOff' ? 'trying and failing to pull image' : r;
    throw badRequest(`container "${name}" in pod "${podName}" is waiting to start: ${why}`);
  }
  const container = worker.containers.get(name);
  if (!container || worker.removedLogs.has(name)) {
    return Buffer.from(
      rec.state && 'terminated' in rec.state && rec.dockerId
        ? `unable to retrieve container logs for docker://${rec.dockerId}`
        : '',
    );
  }
  const entries = visible(await dockerEntries(container), `${worker.ref.uid}/${name}`, view);
  return render(entries, q);
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

/** What the kubelet can serve now: nothing from rotated files, nothing the lag has not yet delivered. */
function visible(entries: Entry[], key: string, view: LogView): Entry[] {
  const rotated = view.rotatedAt.get(key) ?? -1n;
  const newest = BigInt(Date.now() - view.lagMs) * 1_000_000n;
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
  return entries.slice(start).filter((e) => e.ns > rotated && (view.lagMs === 0 || e.ns <= newest));
}

function render(entries: Entry[], q: LogQuery): Buffer {
  let list = entries;
  if (q.tailLines !== undefined) list = tail(list, q.tailLines);
  const since =
    q.sinceTime !== undefined
      ? nanos(q.sinceTime)
      : q.sinceSeconds !== undefined
        ? BigInt(Date.now() - q.sinceSeconds * 1000) * 1_000_000n
        : undefined;
  if (since !== undefined) list = list.filter((e) => e.ns >= since);
  const parts = list.map((e) => (q.timestamps ? Buffer.concat([Buffer.from(`${e.ts} `), e.bytes]) : e.bytes));
  const all = Buffer.concat(parts);
  return q.limitBytes === undefined ? all : all.subarray(0, q.limitBytes);
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
