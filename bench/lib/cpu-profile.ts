/** Reads a V8 .cpuprofile: where the CPU time went, by category, by function and by sandgate frame (inclusive). */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** CLOCK_MONOTONIC in µs: the clock V8 stamps profile samples with, so a window taken here selects samples there. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

const NATIVE_WRITES = new Set(['writeUtf8String', 'writeBuffer', 'writev', 'writeLatin1String', 'writeAsciiString']);

/** The bucket a frame's self time goes to. */
function category(cf: CallFrame): string {
  if (['(idle)', '(garbage collector)', '(program)'].includes(cf.functionName)) return cf.functionName;
  if (!cf.url && NATIVE_WRITES.has(cf.functionName)) return 'socket writes (syscalls)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(cf.url)?.[1];
  if (pkg) {
    if (
      [
        'fastify',
        'find-my-way',
        'avvio',
        'light-my-request',
        'fast-json-stringify',
        'ajv',
        'fast-uri',
        'fast-querystring',
        '@fastify/ajv-compiler',
        'json-schema-ref-resolver',
      ].includes(pkg)
    )
      return 'fastify (routing, ajv, serializer)';
    return pkg;
  }
  const own = /\/(apps|libs|bench)\/([^/]+)\//.exec(cf.url);
  if (own) return `sandgate ${own[1]}/${own[2]}`;
  if (cf.url.startsWith('node:') || cf.url === '') return 'node runtime (http, streams, fs, timers, …)';
  return 'other';
}

export interface Breakdown {
  totalMs: number;
  busyMs: number;
  categories: Record<string, number>;
  functions: [string, number][];
  sandgateInclusive: Record<string, number>;
}

/** Self time by category, function and sandgate frame, of the samples inside `window` (µs, monotonic) if given. */
export function analyse(p: CpuProfile, window: { fromUs: number; toUs: number } | null = null, top = 15): Breakdown {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  let t = p.startTime;
  p.samples.forEach((id, i) => {
    t += p.timeDeltas[i] ?? 0;
    if (window && (t < window.fromUs || t > window.toUs)) return;
    self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000);
  });
  const categories: Record<string, number> = {};
  const functions = new Map<string, number>();
  const inclusive: Record<string, number> = {};
  let totalMs = 0;
  for (const [id, ms] of self) {
    const cf = byId.get(id)!.callFrame;
    totalMs += ms;
    const cat = category(cf);
    categories[cat] = (categories[cat] ?? 0) + ms;
    const fname = `${cf.functionName || '(anonymous)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`;
    functions.set(fname, (functions.get(fname) ?? 0) + ms);
    const seen = new Set<string>();
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) {
      const f = byId.get(x)!.callFrame;
      const m = /\/((?:apps|libs)\/[^/]+\/src\/[^/]+)$/.exec(f.url);
      if (!m) continue;
      const key = `${f.functionName || '(anonymous)'} ${m[1]}`;
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive[key] = (inclusive[key] ?? 0) + ms;
    }
  }
  const idle = categories['(idle)'] ?? 0;
  return {
    totalMs,
    busyMs: totalMs - idle,
    categories,
    functions: [...functions]
      .filter(([f]) => !f.startsWith('(idle)'))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top),
    sandgateInclusive: Object.fromEntries(
      Object.entries(inclusive)
        .sort((a, b) => b[1] - a[1])
        .slice(0, top),
    ),
  };
}
