/**
 * sse-idle: BENCH_SSE_IDLE (10,000) SSE clients on one execution that sleeps and prints nothing, held open past one
 * heartbeat (BENCH_SSE_IDLE_HOLD_MS, 20 s; heartbeats every 15 s, the idle timeout is 75 s). Reports what they cost the
 * gateway (RSS growth) and how /healthz answers meanwhile (the timed samples), and checks none was cut.
 */
import { Agent, get, type IncomingMessage } from 'node:http';
import { expectStatus, request } from './lib/http.ts';
import { SSE_IDLE as CLIENTS, SSE_IDLE_HOLD_MS as HOLD_MS } from './lib/knobs.ts';
import { memoryOf, openFilesLimit } from './lib/proc.ts';
import { fanOut, main } from './lib/main.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, round, sleep, summarize } from './lib/stats.ts';

const BENCH = 'sse-idle';
const TARGET = `${CLIENTS} idle SSE clients stay open past a heartbeat; /healthz answers meanwhile`;

main(async () => {
  let stack: Stack | null = null;
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const responses: IncomingMessage[] = [];
  let closedByUs = false;
  try {
    const limit = await openFilesLimit();
    stack = await startStack(['gateway', 'worker'], { SANDGATE_EXEC_TIMEOUT_S: '300' });
    const gateway = stack.procs[0]!;
    const created = expectStatus(
      await request('POST', `${stack.url}/v1/executions`, {
        json: { language: 'python', code: 'import time\ntime.sleep(280)', timeout_ms: 300_000 },
        headers: stack.headers,
      }),
      [202],
      'POST',
    );
    const before = await memoryOf(gateway.pid);
    let closed = 0;
    let heartbeats = 0;
    const errors = new Map<string, number>();
    const failed = (why: string) => {
      closed++;
      errors.set(why, (errors.get(why) ?? 0) + 1);
    };
    // Clients arrive 200 at a time, each once the server has answered the one before on its loop: 10,000 in the same
    // millisecond would measure the kernel's listen backlog, not the gateway.
    const openMs = await fanOut(
      CLIENTS,
      200,
      () =>
        new Promise<void>((resolve) => {
          const req = get(
            `${stack!.url}/v1/executions/${created.json.id}/events`,
            { agent, headers: stack!.headers },
            (res) => {
              responses.push(res);
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => {
                if (chunk.includes(': heartbeat')) heartbeats++;
              });
              res.on('close', () => {
                if (!closedByUs) failed('closed by the server');
              });
              resolve();
            },
          );
          req.on('error', (e) => {
            failed(e.message);
            resolve();
          });
        }),
    );
    const health: number[] = [];
    const until = Date.now() + HOLD_MS;
    while (Date.now() < until) {
      const h0 = performance.now();
      expectStatus(await request('GET', `${stack.url}/healthz`), [200], '/healthz');
      health.push(performance.now() - h0);
      await sleep(250);
    }
    const held = await memoryOf(gateway.pid);
    const open = CLIENTS - closed;
    emit({
      bench: BENCH,
      ...summarize(health),
      clients: CLIENTS,
      open_after_hold: open,
      hold_ms: HOLD_MS,
      open_all_ms: round(openMs, 0),
      heartbeats_received: heartbeats,
      ...(errors.size ? { error: [...errors].map(([k, n]) => `${n}× ${k}`).join('; ') } : {}),
      gateway_rss_before_mb: round(before.rssMb, 1),
      gateway_rss_held_mb: round(held.rssMb, 1),
      gateway_rss_per_client_kb: round(((held.rssMb - before.rssMb) * 1024) / CLIENTS, 2),
      fd_limit_client: limit?.soft ?? null,
      target: TARGET,
      pass: open === CLIENTS && heartbeats >= CLIENTS,
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    closedByUs = true;
    for (const r of responses) r.destroy();
    agent.destroy();
    await stack?.close();
  }
});
