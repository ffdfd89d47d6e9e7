/** The session lifecycle API (pause, resume, fork, snapshots) as the benches of sessions that last use it, timed. */
import { timed, type Timed } from './api.ts';
import { expectStatus, request } from './http.ts';
import type { Stack } from './stack.ts';

/** POST /v1/sessions/{id}/<path>, timed; throws unless it answered one of `ok`. */
async function post(stack: Stack, path: string, body: unknown, ok: number[]): Promise<Timed & { json: any }> {
  const t = await timed('POST', `${stack.url}/v1/sessions/${path}`, body, stack.headers);
  expectStatus(t.res, ok, `POST /v1/sessions/${path}`);
  return { ...t, json: t.res.json };
}

/** Pauses a session: a stateful one's variables are saved, its sandbox removed. */
export async function pause(stack: Stack, id: string): Promise<Timed & { json: any }> {
  const t = await post(stack, `${id}/pause`, {}, [200]);
  if (t.json?.session?.state !== 'paused') throw new Error(`pause of ${id} left it ${t.json?.session?.state}`);
  return t;
}

/** Brings a paused session back now (no run); `json.resumed` says how long the worker took and what came back. */
export async function resume(stack: Stack, id: string): Promise<Timed & { json: any }> {
  const t = await post(stack, `${id}/resume`, {}, [200]);
  if (t.json?.resumed == null) throw new Error(`resume of ${id} answered resumed null: it was not paused`);
  return t;
}

/** One copy of a session (paused); answers the timing and the copy's id. */
export async function fork(stack: Stack, id: string): Promise<Timed & { copy: string }> {
  const t = await post(stack, `${id}/fork`, { count: 1 }, [201]);
  const copy = t.json?.sessions?.[0]?.id;
  if (typeof copy !== 'string') throw new Error(`fork of ${id} answered no session: ${t.res.text.slice(0, 200)}`);
  return { ...t, copy };
}

/** A named snapshot of the session; `json` is {name, size_bytes, created_at, variables}. */
export function snapshot(stack: Stack, id: string, name: string): Promise<Timed & { json: any }> {
  return post(stack, `${id}/snapshots`, { name }, [201]);
}

export async function deleteSnapshot(stack: Stack, id: string, name: string): Promise<void> {
  expectStatus(
    await request('DELETE', `${stack.url}/v1/sessions/${id}/snapshots/${name}`, { headers: stack.headers }),
    [204, 404],
    `DELETE /v1/sessions/${id}/snapshots/${name}`,
  );
}

/** POST /v1/sessions/{id}/undo, timed. */
export function undo(stack: Stack, id: string): Promise<Timed & { json: any }> {
  return post(stack, `${id}/undo`, {}, [200]);
}
