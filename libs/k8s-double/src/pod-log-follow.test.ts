import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { pod, shContainer, startDouble, terminal, waitForPod, type DoubleFixture } from './testing.ts';

/** A followed log through the client library's Log: the text so far, waits on it, and its end. */
interface Followed {
  text(): string;
  /** Resolves once the text holds `n` lines (or more); fails after `timeoutMs`. */
  lines(n: number, timeoutMs?: number): Promise<string[]>;
  /** Resolves with the whole text when the answer ends. */
  ended: Promise<string>;
  stop(): void;
}

async function follow(t: TestContext, f: DoubleFixture, name: string, options: k8s.LogOptions): Promise<Followed> {
  const sink = new PassThrough();
  let text = '';
  const waiters = new Set<() => void>();
  sink.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    for (const w of waiters) w();
  });
  const ended = new Promise<string>((resolve) => sink.on('end', () => resolve(text)));
  const controller = await new k8s.Log(f.kc).log(f.namespace, name, 'main', sink, { ...options, follow: true });
  t.after(() => controller.abort());
  const lines = (n: number, timeoutMs = 20_000) =>
    new Promise<string[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`fewer than ${n} lines: ${JSON.stringify(text)}`)), timeoutMs);
      const check = () => {
        const all = text.split('\n').slice(0, -1);
        if (all.length < n) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve(all);
      };
      waiters.add(check);
      check();
    });
  return { text: () => text, lines, ended, stop: () => controller.abort() };
}

/** A Pod whose one container prints `line-0`, `line-1`, … every 50 ms, `count` lines in all. */
async function counter(f: DoubleFixture, name: string, count: number): Promise<void> {
  const script = `i=0; while [ $i -lt ${count} ]; do echo line-$i; i=$((i+1)); sleep 0.05; done`;
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod(name, { containers: [shContainer('main', script)] }),
  });
  await waitForPod(f, name, (p) => p.status?.phase === 'Running');
}

const numbers = (lines: string[]) => lines.map((l) => Number(/line-(\d+)$/.exec(l)?.[1]));
const consecutive = (ns: number[]) => ns.every((n, i) => i === 0 || n === ns[i - 1]! + 1);

test('follow: the log so far, then each line as it is written, ending when the container does', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('follow-1', { containers: [shContainer('main', 'echo one; sleep 2; echo two; sleep 1; echo three')] }),
  });
  await waitForPod(f, 'follow-1', (p) => p.status?.phase === 'Running');
  const followed = await follow(t, f, 'follow-1', {});
  assert.deepEqual(await followed.lines(1), ['one']);
  const meanwhile = await f.core.readNamespacedPod({ name: 'follow-1', namespace: f.namespace });
  assert.ok(meanwhile.status?.containerStatuses?.[0]?.state?.running, 'streaming while the container runs');
  assert.equal(await followed.ended, 'one\ntwo\nthree\n');
  const done = await waitForPod(f, 'follow-1', terminal);
  assert.equal(done.pod.status?.phase, 'Succeeded');

  const again = await follow(t, f, 'follow-1', { timestamps: true });
  const stamped = await again.ended;
  assert.match(stamped, /^\S+Z one\n\S+Z two\n\S+Z three\n$/, 'a stopped container: its whole log, then the end');
  const logCalls = f.double.calls.filter((c) => c.subresource === 'log');
  assert.deepEqual(
    logCalls.map((c) => [c.verb, c.query.follow, c.status]),
    [
      ['get', 'true', 200],
      ['get', 'true', 200],
    ],
  );
});

test('follow joins the log so far and new lines without a gap or a repeat; the read filters apply', async (t) => {
  const f = await startDouble(t);
  await counter(f, 'follow-2', 400);
  const all = await follow(t, f, 'follow-2', {});
  await all.lines(21);

  const tailed = await follow(t, f, 'follow-2', { tailLines: 3, timestamps: true });
  const lines = await tailed.lines(15);
  assert.ok(
    lines.every((l) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z line-\d+$/.test(l)),
    lines.join('\n'),
  );
  const ns = numbers(lines);
  assert.ok(ns[0]! >= 18, `tailLines=3 of at least 21 lines starts at line-${ns[0]}`);
  assert.ok(consecutive(ns), ns.join());
  tailed.stop();

  const cut = await follow(t, f, 'follow-2', { limitBytes: 20 });
  assert.equal(await cut.ended, 'line-0\nline-1\nline-2', 'limitBytes from the start of the log');
  const grown = await follow(t, f, 'follow-2', { tailLines: 1, limitBytes: 71 });
  const text = await grown.ended;
  assert.equal(Buffer.byteLength(text), 71, 'limitBytes reached on lines written after the request');
  assert.ok(consecutive(numbers(text.split('\n').slice(0, -1))), text);
  const still = await f.core.readNamespacedPod({ name: 'follow-2', namespace: f.namespace });
  assert.equal(still.status?.phase, 'Running', 'ended by limitBytes, not by the container');

  const since = new Date(Math.ceil(Date.now() / 1000) * 1000 + 1000);
  const late = await follow(t, f, 'follow-2', {
    sinceTime: since.toISOString().replace('.000Z', 'Z'),
    timestamps: true,
  });
  const after = await late.lines(5);
  assert.ok(
    after.every((l) => Date.parse(l.slice(0, 23) + 'Z') >= since.getTime()),
    `${since.toISOString()}\n${after.join('\n')}`,
  );
  assert.ok(consecutive(numbers(after)), after.join());
});

test('follow under a lagging runtime: each line comes out no sooner than a discrete read would show it', async (t) => {
  const f = await startDouble(t);
  await counter(f, 'follow-3', 400);
  f.double.scenarios.logLagMs = 700;
  const followed = await follow(t, f, 'follow-3', { timestamps: true, tailLines: 0 });
  const arrivals: number[] = [];
  for (let n = 1; n <= 6; n++) {
    await followed.lines(n);
    arrivals.push(Date.now());
  }
  const stamps = followed
    .text()
    .split('\n')
    .slice(0, 6)
    .map((l) => Date.parse(l.slice(0, 23) + 'Z'));
  stamps.forEach((ts, i) => assert.ok(arrivals[i]! - ts >= 650, `line ${i} came ${arrivals[i]! - ts} ms after`));
  assert.ok(consecutive(numbers(followed.text().split('\n').slice(0, 6))), followed.text());
});

test('a client that goes away while following ends the engine stream behind it', async (t) => {
  const f = await startDouble(t);
  await counter(f, 'follow-4', 4000);
  const followed = await follow(t, f, 'follow-4', {});
  await followed.lines(3);
  assert.equal(f.double.streams.size, 1);
  followed.stop();
  // The answer's stream closes only once the engine's followed log has closed.
  await f.double.streams.idle();
  assert.equal(f.double.streams.size, 0);
  const stillRunning = await f.core.readNamespacedPod({ name: 'follow-4', namespace: f.namespace });
  assert.equal(stillRunning.status?.phase, 'Running');
});
