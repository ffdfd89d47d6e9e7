/** Sandgate's API as the benches use it, plus the timestamps sandgate itself records for a run. */
import type { Redis } from 'ioredis';
import { keys } from '@sandgate/state';
import { expectStatus, request, type Response } from './http.ts';
import type { Stack } from './stack.ts';

export interface Timed {
  ms: number;
  /** Wall clock (Date.now) when the request was sent and when the answer was complete. */
  sentAt: number;
  doneAt: number;
  res: Response;
}

export async function timed(
  method: string,
  url: string,
  json?: unknown,
  headers: Record<string, string> = {},
): Promise<Timed> {
  const sentAt = Date.now();
  const t0 = performance.now();
  const res = await request(method, url, json === undefined ? { headers } : { json, headers });
  const ms = performance.now() - t0;
  return { ms, sentAt, doneAt: Date.now(), res };
}

export async function createSession(stack: Stack, body: Record<string, unknown> = {}): Promise<any> {
  return expectStatus(
    await request('POST', `${stack.url}/v1/sessions`, { json: body, headers: stack.headers }),
    [201],
    'POST /v1/sessions',
  ).json;
}

export async function deleteSession(stack: Stack, id: string): Promise<void> {
  expectStatus(
    await request('DELETE', `${stack.url}/v1/sessions/${id}`, { headers: stack.headers }),
    [204, 404],
    `DELETE /v1/sessions/${id}`,
  );
}

/**
 * POST /v1/executions?wait=<s>, timed; throws unless it answered 200 with a completed run printing `expect`.
 * Returns the timing and the execution body.
 */
export async function runWait(
  stack: Stack,
  body: Record<string, unknown>,
  { wait = 30, expectStdout = '1\n' as string | null } = {},
): Promise<Timed & { exec: any }> {
  const t = await timed('POST', `${stack.url}/v1/executions?wait=${wait}`, body, stack.headers);
  expectStatus(t.res, [200], 'POST /v1/executions?wait');
  const exec = t.res.json;
  const r = exec?.result;
  if (r?.state !== 'completed' || (expectStdout !== null && r.stdout !== expectStdout)) {
    throw new Error(
      `execution ${exec?.id} ended ${r?.state} (${r?.reason ?? ''} ${r?.message ?? ''}) stdout=${JSON.stringify(r?.stdout)} stderr=${JSON.stringify(String(r?.stderr ?? '').slice(0, 300))}`,
    );
  }
  return { ...t, exec };
}

/** When each step of one execution happened (ms since epoch), from its record and its event stream in Redis. */
export interface Timeline {
  created: number;
  picked: number | null;
  finished: number | null;
  phases: Record<string, number>;
}

export async function timelineOf(redis: Redis, prefix: string, id: string): Promise<Timeline | null> {
  const k = keys(prefix);
  const h = await redis.hgetall(k.execution(id));
  if (!h.meta) return null;
  const meta = JSON.parse(h.meta) as { created_at: number };
  const phases: Record<string, number> = {};
  const entries = (await redis.xrange(k.events(id), '-', '+')) as [string, string[]][];
  for (const [, fields] of entries) {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
    if (f.type !== 'phase' || !f.data) continue;
    const ev = JSON.parse(f.data) as { phase: string; at: string };
    phases[ev.phase] ??= Date.parse(ev.at);
  }
  return {
    created: meta.created_at,
    picked: h.started_at ? Number(h.started_at) : null,
    finished: h.finished_at ? Number(h.finished_at) : null,
    phases,
  };
}

/**
 * One run cut into segments (ms). Names say where the time goes:
 * request → record created (HTTP, validation, session), → picked by a worker (enqueue, BullMQ pickup, markRunning),
 * → `starting` (workspace, snapshot), → `running` (sandbox create + start, or pool/session hand-over),
 * → `harvesting` (the program runs and exits, output drained), → `done` (artifacts, sandbox removal, finalize),
 * → response complete (event fan-out to the waiting request, record read, JSON, HTTP).
 */
export function segments(
  t: Timeline,
  sentAt: number,
  doneAt: number,
  engine?: Record<string, number>,
): Record<string, number> {
  const p = t.phases;
  const seg = (a: number | null | undefined, b: number | null | undefined) => (a != null && b != null ? b - a : NaN);
  const out: Record<string, number> = {
    request_to_created: seg(sentAt, t.created),
    created_to_picked: seg(t.created, t.picked),
    picked_to_starting: seg(t.picked, p.starting),
    starting_to_running: seg(p.starting ?? t.picked, p.running),
    running_to_harvesting: seg(p.running, p.harvesting),
    harvesting_to_done: seg(p.harvesting, p.done ?? t.finished),
    done_to_response: seg(p.done ?? t.finished, doneAt),
  };
  if (engine) {
    // From Docker's own events: when the engine reports each step of the container's life.
    out.engine_starting_to_create = seg(p.starting, engine.create);
    out.engine_create_to_start = seg(engine.create, engine.start);
    out.engine_start_to_running_phase = seg(engine.start, p.running);
    out.engine_start_to_die = seg(engine.start, engine.die);
    out.engine_die_to_harvesting = seg(engine.die, p.harvesting);
    out.engine_harvesting_to_destroy = seg(p.harvesting, engine.destroy);
    out.engine_destroy_to_done = seg(engine.destroy, p.done ?? t.finished);
  }
  for (const k of Object.keys(out)) if (!Number.isFinite(out[k])) delete out[k];
  return out;
}
