import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { freePort } from '../redis-and-ports.ts';
import { until } from '../harness.ts';
import { api, newDeployment, startGatewayProc, startWorkerProc } from './processes.ts';

interface Seen {
  ids: string[];
  stdout: string;
  result: any;
  connections: number;
}

/**
 * A client that follows one run's events as a browser tab would: on a dropped connection it reconnects to the next
 * gateway with Last-Event-ID, until the `result` event.
 */
async function follow(urls: string[], id: string, onFirst: () => void): Promise<Seen> {
  const seen: Seen = { ids: [], stdout: '', result: null, connections: 0 };
  for (let attempt = 0; attempt < 20 && !seen.result; attempt++) {
    const url = urls[Math.min(seen.connections, urls.length - 1)]!;
    const last = seen.ids.at(-1);
    try {
      const res = await fetch(`${url}/v1/executions/${id}/events`, { headers: last ? { 'last-event-id': last } : {} });
      seen.connections++;
      const reader = res
        .body!.pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream())
        .getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        seen.ids.push(value.id!);
        if (value.event === 'stdout') {
          seen.stdout += JSON.parse(value.data).text;
          onFirst();
        }
        if (value.event === 'result') seen.result = JSON.parse(value.data).result;
      }
    } catch {
      // The gateway died under us: reconnect (to the next one) with what we have.
    }
  }
  return seen;
}

test('a gateway SIGKILLed while 50 clients tail SSE: they resume on a second gateway with Last-Event-ID and miss nothing', async (t) => {
  const d = await newDeployment();
  t.after(() => d.cleanup());
  const a = await startGatewayProc(d.env);
  t.after(() => a.kill('SIGKILL'));
  const b = await startGatewayProc(d.env, String(await freePort()));
  t.after(() => b.kill('SIGKILL'));
  const worker = await startWorkerProc(d.env);
  t.after(() => worker.kill('SIGKILL'));

  const code = 'import time\nfor i in range(40):\n    print(i, flush=True)\n    time.sleep(0.1)';
  const run = await api(a.url, 'POST', '/v1/executions', { language: 'python', code });
  let started = 0;
  const clients = Array.from({ length: 50 }, () => {
    let counted = false;
    return follow([a.url, b.url], run.body.id, () => {
      if (!counted) {
        counted = true;
        started++;
      }
    });
  });
  await until('every client to have seen output', async () => started === 50, 60_000, 20);
  a.kill('SIGKILL');
  assert.equal(await a.exited, 'SIGKILL');

  const seen = await Promise.all(clients);
  const expected = Array.from({ length: 40 }, (_, i) => `${i}\n`).join('');
  for (const s of seen) {
    assert.equal(s.result?.state, 'completed');
    assert.equal(s.stdout, expected, 'every line once, in order');
    assert.equal(new Set(s.ids).size, s.ids.length, 'no event twice');
    assert.ok(s.connections >= 2, 'the client did reconnect');
  }
  // Everyone saw the same events, with the same ids: the ones Redis keeps for the run.
  assert.equal(new Set(seen.map((s) => s.ids.join(','))).size, 1);
});
