/**
 * template-pool: a template's warm pool serves its one-shots as fast as the default pool serves the runtime image's.
 * The bench builds a small template through the API (POST /v1/templates?wait with the operator key: a file and an
 * environment variable on top of the runtime image, pool_size 2; its build time is reported), waits until its pool is
 * full (`sandgate_template_pool_ready` in /metrics), checks that a one-shot on it sees its file, then times one-shot
 * `print(1)`s with `template` and without, one of each in turn, with BENCH_POOL_PACE_MS after each so that the sandbox
 * is back in its pool (SANDGATE_POOL_SIZE=2 for the default pool). A run counts as pooled when the engine created no
 * container for it. Goal: the template's p50 within 1.1x the default pool's (as fast, within the noise of the machine).
 * Runs on the quick start's configuration (bench/lib/quick-start.ts). The template, and its image, are deleted after.
 */
import { deleteSession, runWait, timed } from './lib/api.ts';
import { DockerEventLog } from './lib/docker-events.ts';
import { expectStatus, request } from './lib/http.ts';
import { N, POOL_PACE_MS, WARMUP } from './lib/knobs.ts';
import { main, onCleanup, rounds } from './lib/main.ts';
import { quickStart, type QuickStart } from './lib/quick-start.ts';
import { docker } from './lib/raw-docker.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, ratioP25, round, sleep, summarize } from './lib/stats.ts';

const BENCH = 'template-pool';
const TARGET = 'p50 <= 1.1x default pool p50';
const POOL_SIZE = 2;
const NAME = 'bench-small';
const RECIPE = {
  name: NAME,
  description: 'a file and an environment variable on the runtime image',
  files: [{ path: '/opt/bench/hello.txt', content: 'hello from the template\n' }],
  env: { BENCH_TEMPLATE: '1' },
  pool_size: POOL_SIZE,
};
const PRINT = { language: 'python', code: 'print(1)' };

/** Builds the template and waits for it to be ready; answers how long the build took (ms, at the client). */
async function build(stack: Stack, op: Record<string, string>): Promise<number> {
  const t = await timed('POST', `${stack.url}/v1/templates?wait=1200`, RECIPE, op);
  expectStatus(t.res, [200, 201], 'POST /v1/templates?wait');
  if (t.res.json?.state !== 'ready') throw new Error(`template ${NAME} answered state ${t.res.json?.state}`);
  return t.ms;
}

/** Waits until the template's pool holds `want` ready sandboxes (/metrics); answers how long that took. */
async function poolReady(stack: Stack, op: Record<string, string>, want: number, timeoutMs = 180_000): Promise<number> {
  const t0 = performance.now();
  const line = new RegExp(`^sandgate_template_pool_ready\\{[^}]*template="${NAME}"[^}]*\\}\\s+(\\d+)`, 'm');
  let last = '';
  while (performance.now() - t0 < timeoutMs) {
    const res = await request('GET', `${stack.url}/metrics`, { headers: op });
    const ready = Number(line.exec(res.text)?.[1] ?? 0);
    if (ready >= want) return performance.now() - t0;
    last = `${res.status} ready=${ready}`;
    await sleep(250);
  }
  throw new Error(`the template's pool did not fill within ${timeoutMs} ms (${last})`);
}

async function measure(stack: Stack, events: DockerEventLog, setup: Record<string, number>): Promise<void> {
  const tpl: number[] = [];
  const dflt: number[] = [];
  const sessions: string[] = [];
  let tplPooled = 0;
  let dfltPooled = 0;
  for (let i = 0; i < N; i++) {
    const a = await runWait(stack, { ...PRINT, template: NAME });
    tpl.push(a.ms);
    sessions.push(a.exec.session_id);
    if (!events.byExecution.get(a.exec.id)?.create) tplPooled++;
    await sleep(POOL_PACE_MS);
    const b = await runWait(stack, PRINT);
    dflt.push(b.ms);
    sessions.push(b.exec.session_id);
    if (!events.byExecution.get(b.exec.id)?.create) dfltPooled++;
    await sleep(POOL_PACE_MS);
  }
  for (const id of sessions) await deleteSession(stack, id);
  const s = summarize(tpl);
  const base = summarize(dflt);
  const ratio = s.p50_ms / base.p50_ms;
  const ok = tplPooled > 0 && dfltPooled > 0;
  emit({
    bench: BENCH,
    ...s,
    default_pool_p50_ms: base.p50_ms,
    default_pool_p95_ms: base.p95_ms,
    template_served_from_pool: tplPooled,
    default_served_from_pool: dfltPooled,
    pool_size: POOL_SIZE,
    pace_ms: POOL_PACE_MS,
    ...setup,
    ...(ok ? {} : { error: 'a pool served none of its one-shots' }),
    target: TARGET,
    ratio_p25: ratioP25(tpl, dflt),
    ratio,
    pass: ok && ratio <= 1.1,
  });
}

main(async () => {
  let qs: QuickStart | null = null;
  let stack: Stack | null = null;
  const events = new DockerEventLog();
  try {
    qs = await quickStart();
    stack = await startStack(['standalone'], {
      ...qs.env,
      SANDGATE_POOL_SIZE: String(POOL_SIZE),
      SANDGATE_MAX_SESSIONS: '100000',
    });
    const op = { authorization: `Bearer ${qs.operatorKey}` };
    const prefix = stack.prefix;
    // An interrupted run leaves no template image behind (they are tagged sandgate-template/<deployment>).
    onCleanup(async () => {
      const images = await docker.listImages({ filters: { reference: [`sandgate-template/${prefix}`] } });
      for (const img of images)
        await docker
          .getImage(img.Id)
          .remove({ force: true })
          .catch(() => {});
    });
    await events.start();
    const buildMs = await build(stack, op);
    const fillMs = await poolReady(stack, op, POOL_SIZE);
    const probe = await runWait(
      stack,
      { language: 'python', template: NAME, code: "print(open('/opt/bench/hello.txt').read(), end='')" },
      { expectStdout: RECIPE.files[0]!.content },
    );
    await deleteSession(stack, probe.exec.session_id);
    const setup = { template_build_s: round(buildMs / 1000, 1), template_pool_filled_after_ms: round(fillMs) };
    for (let i = 0; i < WARMUP; i++) {
      for (const body of [{ ...PRINT, template: NAME }, PRINT]) {
        const r = await runWait(stack, body);
        await deleteSession(stack, r.exec.session_id);
        await sleep(POOL_PACE_MS);
      }
    }
    await rounds(async () => {
      try {
        await measure(stack!, events, setup);
      } catch (e) {
        emitError(BENCH, TARGET, e);
      }
    });
    expectStatus(
      await request('DELETE', `${stack.url}/v1/templates/${NAME}`, { headers: op }),
      [204, 404],
      `DELETE /v1/templates/${NAME}`,
    );
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    events.stop();
    await stack?.close().catch(() => {});
    await qs?.remove();
  }
});
