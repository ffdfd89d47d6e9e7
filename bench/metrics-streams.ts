/**
 * What metric streams cost the gateway: its process's CPU over a window with no stream, with one, and with eight
 * clients on the same session (one sample per second is shared among them). The stack's worker runs in the same
 * process, so the idle window is its baseline.
 *
 *   SANDGATE_IMAGE=sandgate/runtime:metrics node --import tsx bench/metrics-streams.ts
 */
import { startStack } from '../test/harness.ts';

const WINDOW_MS = 20_000;

const s = await startStack();
try {
  const id = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const run = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'bash', code: 'true' });
  if (run.body.state !== 'completed') throw new Error(JSON.stringify(run.body));
  const measure = async (streams: number): Promise<number> => {
    const acs = Array.from({ length: streams }, () => new AbortController());
    const events = { n: 0 };
    for (const ac of acs) {
      void fetch(`${s.url}/v1/sessions/${id}/metrics/stream`, { signal: ac.signal })
        .then(async (r) => {
          for await (const chunk of r.body!) if (String(Buffer.from(chunk)).includes('event: metrics')) events.n += 1;
        })
        .catch(() => {});
    }
    await new Promise((r) => setTimeout(r, 2000));
    const before = process.cpuUsage();
    await new Promise((r) => setTimeout(r, WINDOW_MS));
    const used = process.cpuUsage(before);
    acs.forEach((ac) => ac.abort());
    const ms = (used.user + used.system) / 1000;
    console.log(`${streams} streams: ${((100 * ms) / WINDOW_MS).toFixed(2)} % of a core, ${events.n} events received`);
    return ms;
  };
  await measure(0);
  await measure(1);
  await measure(8);
  await measure(0);
} finally {
  await s.close();
}
