import { Readable } from 'node:stream';
import type { ApiAnswer, ApiContext, ApiRequest } from './api-context.ts';
import type { Change } from './change-log.ts';
import { listObjects, queryFlag, selection } from './objects.ts';
import { ApiError } from './status.ts';
import type { K8sObject, Kind } from './store.ts';
import { watchOptions, type WatchOptions } from './watch-options.ts';

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
type Selects = (obj: K8sObject) => boolean;

/** A watch sends its last bookmark this long before its timeout, as the watch cache does. */
const PRE_TIMEOUT_BOOKMARK_MS = 2000;

/** GET on a collection: a list, or with `watch` a stream of watch events. */
export function listOrWatch(ctx: ApiContext, kind: Kind, req: ApiRequest, fields: readonly string[]): ApiAnswer {
  if (!queryFlag(req.query, 'watch')) return { status: 200, body: listObjects(ctx, kind, req, fields) };
  const selects = selection(req, fields);
  const opts = watchOptions(kind, req);
  return { status: 200, body: undefined, contentType: 'application/json', stream: watch(ctx, kind, selects, opts) };
}

/**
 * A watch as the API server's watch cache serves it: newline-delimited `{type, object}` events, in resourceVersion
 * order. An object that starts to match the selectors is ADDED, one that stops matching is DELETED (its last
 * matching state at the new resourceVersion). A resume point older than the kept history is one ERROR event with a
 * 410 Expired Status. Ends at the timeout; destroying the stream (the client went away) stops the listening.
 */
function watch(ctx: ApiContext, kind: Kind, selects: Selects, opts: WatchOptions): Readable {
  const timers: NodeJS.Timeout[] = [];
  let stopListening = (): void => {};
  const stop = (): void => {
    stopListening();
    for (const t of timers) clearTimeout(t);
  };
  const out = new Readable({
    read() {},
    destroy(err, callback) {
      stop();
      callback(err);
    },
  });
  const send = (type: EventType, object: unknown): void => void out.push(`${JSON.stringify({ type, object })}\n`);
  const end = (): void => {
    stop();
    out.push(null);
  };
  let backlog: Change[];
  try {
    backlog = 'after' in opts.start ? ctx.store.changes.since(kind, opts.start.after) : [];
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    send('ERROR', err.toStatus());
    end();
    return out;
  }
  const bookmark = (initialEventsEnd = false) => send('BOOKMARK', bookmarkObject(kind, ctx, initialEventsEnd));
  if ('state' in opts.start) {
    for (const obj of ctx.store.list(kind).filter(selects)) send('ADDED', obj);
    if (opts.bookmarks) bookmark(true);
  }
  const forward = (c: Change): void => {
    const e = c.kind === kind ? eventFor(c, selects) : undefined;
    if (e) send(e.type, e.object);
  };
  backlog.forEach(forward);
  stopListening = ctx.store.changes.listen(forward);
  const deadline = Date.now() + opts.timeoutMs;
  timers.push(setTimeout(end, opts.timeoutMs));
  if (opts.bookmarks) scheduleBookmarks(timers, deadline, ctx.watchBookmarkMs, bookmark);
  return out;
}

/** What one change means to a watcher with these selectors (the cache watcher's convertToWatchEvent). */
export function eventFor(c: Change, selects: Selects): { type: EventType; object: K8sObject } | undefined {
  const now = c.type !== 'DELETED' && selects(c.object);
  const before = c.previous !== undefined && selects(c.previous);
  if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: c.object };
  if (!before) return undefined;
  const last = c.previous!;
  return { type: 'DELETED', object: { ...last, metadata: { ...last.metadata, resourceVersion: String(c.rv) } } };
}

/** Bookmarks every `intervalMs`, and one last time 2 s before the deadline (none when that is already past). */
function scheduleBookmarks(timers: NodeJS.Timeout[], deadline: number, intervalMs: number, send: () => void): void {
  const now = Date.now();
  const next = Math.min(now + intervalMs, deadline - PRE_TIMEOUT_BOOKMARK_MS);
  if (next <= now) return;
  timers.push(
    setTimeout(() => {
      send();
      scheduleBookmarks(timers, deadline, intervalMs, send);
    }, next - now),
  );
}

/** An object of the kind carrying only the current resourceVersion (and the end-of-initial-events annotation). */
function bookmarkObject(kind: Kind, ctx: ApiContext, initialEventsEnd: boolean): K8sObject {
  return {
    kind,
    apiVersion: 'v1',
    metadata: {
      resourceVersion: ctx.store.resourceVersion,
      ...(initialEventsEnd ? { annotations: { 'k8s.io/initial-events-end': 'true' } } : {}),
    },
  };
}
