/**
 * sse-fanout: BENCH_SSE_SUBSCRIBERS (1,000) concurrent GET /v1/executions/:id/events on ONE execution that
 * sleeps 3 s (so every subscriber is connected before output starts) and then prints 20 lines over 2 s.
 * Checks that every subscriber got every event of the stream, in order, ending with `result`; the timed
 * samples are, per subscriber, from the moment the result was written to Redis to the end of its stream.
 */
import { Agent, get } from 'node:http';
import { createParser } from 'eventsource-parser';
import { keys } from '@sandgate/state';
import { expectStatus, request } from './lib/http.ts';
import { SSE_SUBSCRIBERS } from './lib/knobs.ts';
import { openFilesLimit } from './lib/proc.ts';
import { main, within } from './lib/main.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, percentile, round, sleep, summarize } from './lib/stats.ts';

const BENCH = 'sse-fanout';
const TARGET = `${SSE_SUBSCRIBERS} concurrent subscribers all receive every event`;
const LINES = 20;
/** Long enough for every subscriber to connect before output starts: 3 s, and 1 s more per 1,000 subscribers. */
const QUIET_S = 3 + Math.ceil(SSE_SUBSCRIBERS / 1000);
const CODE = `import time\ntime.sleep(${QUIET_S})\nfor i in range(${LINES}):\n    print('line', i, flush=True)\n    time.sleep(${2 / LINES})\n`;

interface Subscriber {
  connectedAt: number | null;
  ids: string[];
  /** Receive time of each event, by id. */
  receivedAt: Map<string, number>;
  types: string[];
  endedAt: number | null;
  error: string | null;
}

function subscribe(
  url: string,
  agent: Agent,
  headers: Record<string, string>,
): { sub: Subscriber; done: Promise<void> } {
  const sub: Subscriber = { connectedAt: null, ids: [], receivedAt: new Map(), types: [], endedAt: null, error: null };
  const done = new Promise<void>((resolve) => {
    const req = get(url, { agent, headers: { ...headers, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        sub.error = `HTTP ${res.statusCode}`;
        res.resume();
        resolve();
        return;
      }
      sub.connectedAt = Date.now();
      const parser = createParser({
        onEvent(ev) {
          const now = Date.now();
          if (ev.id) {
            sub.ids.push(ev.id);
            sub.receivedAt.set(ev.id, now);
          }
          sub.types.push(ev.event ?? 'message');
        },
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => parser.feed(chunk));
      res.on('end', () => {
        sub.endedAt = Date.now();
        resolve();
      });
      res.on('error', (e) => {
        sub.error = e.message;
        resolve();
      });
    });
    req.on('error', (e) => {
      sub.error = e.message;
      resolve();
    });
  });
  return { sub, done };
}

const streamMs = (id: string) => Number(id.split('-')[0]);

main(async () => {
  let stack: Stack | null = null;
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  try {
    const limit = await openFilesLimit();
    const needed = SSE_SUBSCRIBERS * 2 + 200;
    const fdWarning =
      limit && limit.soft < needed
        ? `ulimit -n is ${limit.soft}: below the ~${needed} descriptors ${SSE_SUBSCRIBERS} subscribers need (client and gateway); expect EMFILE`
        : null;
    stack = await startStack(['standalone'], { SANDGATE_EXEC_TIMEOUT_S: String(QUIET_S + 60) });
    const gatewayLimit = await openFilesLimit(stack.procs[0]!.pid);
    const created = expectStatus(
      await request('POST', `${stack.url}/v1/executions`, {
        json: { language: 'python', code: CODE, timeout_ms: (QUIET_S + 30) * 1000 },
        headers: stack.headers,
      }),
      [202],
      'POST /v1/executions',
    );
    const id: string = created.json.id;
    const t0 = Date.now();
    // In waves of 500, so that thousands of connects do not overflow the listen backlog at once.
    const subs: ReturnType<typeof subscribe>[] = [];
    while (subs.length < SSE_SUBSCRIBERS) {
      const wave = Array.from({ length: Math.min(500, SSE_SUBSCRIBERS - subs.length) }, () =>
        subscribe(`${stack!.url}/v1/executions/${id}/events`, agent, stack!.headers),
      );
      subs.push(...wave);
      while (wave.some((s) => s.sub.connectedAt === null && s.sub.error === null)) await sleep(20);
    }
    await within(90_000 + QUIET_S * 1000, 'the SSE streams', Promise.all(subs.map((s) => s.done)));
    const all = subs.map((s) => s.sub);
    // The truth: the stream as stored in Redis.
    const stored = (await stack.redis.xrange(keys(stack.prefix).events(id), '-', '+')) as [string, string[]][];
    const storedIds = stored.map(([sid]) => sid);
    const typeOf = (fields: string[]) => fields[fields.indexOf('type') + 1];
    const resultId = stored.find(([, f]) => typeOf(f) === 'result')?.[0];
    const firstOutput = stored.find(([, f]) => typeOf(f) === 'stdout')?.[0];
    if (!resultId) throw new Error('the execution has no result event');
    const complete = all.filter(
      (s) =>
        !s.error &&
        s.ids.length === storedIds.length &&
        s.ids.every((x, i) => x === storedIds[i]) &&
        s.types.at(-1) === 'result',
    );
    const errors = [...new Set(all.map((s) => s.error).filter(Boolean))].slice(0, 3);
    const resultWritten = streamMs(resultId);
    const doneLag = all.filter((s) => s.endedAt !== null).map((s) => s.endedAt! - resultWritten);
    const connectedBeforeOutput = firstOutput
      ? all.filter((s) => s.connectedAt !== null && s.connectedAt < streamMs(firstOutput)).length
      : 0;
    // Delivery lag of every live stdout event, over every subscriber.
    const stdoutIds = stored.filter(([, f]) => typeOf(f) === 'stdout').map(([sid]) => sid);
    const lags: number[] = [];
    for (const s of all)
      for (const sid of stdoutIds) {
        const at = s.receivedAt.get(sid);
        if (at !== undefined) lags.push(at - streamMs(sid));
      }
    lags.sort((a, b) => a - b);
    const connects = all.filter((s) => s.connectedAt !== null).map((s) => s.connectedAt! - t0);
    const allReceived = complete.length === SSE_SUBSCRIBERS;
    emit({
      bench: BENCH,
      ...summarize(doneLag),
      subscribers: SSE_SUBSCRIBERS,
      subscribers_complete: complete.length,
      all_received: allReceived,
      events_in_stream: storedIds.length,
      stdout_events: stdoutIds.length,
      result_to_last_subscriber_done_ms: doneLag.length ? Math.max(...doneLag) : null,
      connected_before_first_output: connectedBeforeOutput,
      connect_p50_ms: round(
        percentile(
          [...connects].sort((a, b) => a - b),
          50,
        ),
      ),
      connect_max_ms: connects.length ? Math.max(...connects) : null,
      stdout_delivery_p50_ms: round(percentile(lags, 50)),
      stdout_delivery_p99_ms: round(percentile(lags, 99)),
      fd_limit_client: limit?.soft ?? null,
      fd_limit_gateway: gatewayLimit?.soft ?? null,
      ...(fdWarning ? { fd_warning: fdWarning } : {}),
      ...(errors.length ? { error: `subscriber errors: ${errors.join('; ')}` } : {}),
      target: TARGET,
      pass: allReceived,
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    agent.destroy();
    await sleep(100);
    await stack?.close();
  }
});
