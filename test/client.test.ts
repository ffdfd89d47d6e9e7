import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Sandgate, SandgateApiError, putFile, type ExecutionStreamEvent } from '@sandgate/client';
import { startStack } from './harness.ts';

test('@sandgate/client: uploads, paths with "/", events that resume, errors, run() that waits', async (t) => {
  const s = await startStack();
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-client-'));
  t.after(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });
  const sandgate = new Sandgate({ baseUrl: s.url });
  const session = (await sandgate.createSession()).id;

  await t.test('upload from a path, a Node stream, bytes and a Blob; download back to a file', async () => {
    const local = join(dir, 'local.txt');
    await writeFile(local, 'from a file\n');
    const sources = {
      'in/file.txt': { file: local },
      'in/stream.txt': Readable.from([Buffer.from('from a '), Buffer.from('stream\n')]),
      'in/bytes.bin': new Uint8Array([0, 1, 2, 255]),
      'in/blob.csv': new Blob(['a,b\n1,2\n']),
    };
    for (const [path, source] of Object.entries(sources))
      assert.equal((await sandgate.upload(session, path, source)).path, path);
    assert.deepEqual(
      (await sandgate.files(session)).map((f) => f.path),
      Object.keys(sources).sort(),
    );
    await sandgate.download({ sessionId: session, path: 'in/stream.txt' }, join(dir, 'back.txt'));
    assert.equal(await readFile(join(dir, 'back.txt'), 'utf8'), 'from a stream\n');
  });

  await t.test('the generated putFile sends {path} with "/" where it belongs (no file named {*})', async () => {
    const r = await putFile({
      client: sandgate.client,
      path: { id: session, path: 'deep/er/x.txt' },
      body: 'x' as never,
    });
    assert.equal(r.response?.status, 201);
    assert.equal(r.data!.files[0]!.path, 'deep/er/x.txt');
    assert.ok(!(await sandgate.files(session)).some((f) => f.path.includes('{')));
  });

  await t.test("errors are SandgateApiError with the problem's code", async () => {
    const err = await sandgate.upload(session, 'in/file.txt', 'again').catch((e: unknown) => e);
    assert.ok(err instanceof SandgateApiError);
    assert.equal(err.status, 409);
    assert.equal(err.code, 'file_exists');
    assert.equal((await sandgate.upload(session, 'in/file.txt', 'again', { overwrite: true })).size_bytes, 5);
  });

  await t.test(
    'events() resumes after a dropped connection with Last-Event-ID: every line once, then the result',
    async () => {
      const code = 'import time\nfor i in range(1, 31):\n    print(f"line {i}", flush=True)\n    time.sleep(0.05)\n';
      const created = await s.api('POST', '/v1/executions', { session_id: session, language: 'python', code });
      let connections = 0;
      const resumedWith: (string | null)[] = [];
      // A fetch whose first connection breaks after the 8th chunk of the stream, as a flaky proxy would.
      const flaky: typeof fetch = async (url, init) => {
        connections++;
        resumedWith.push(new Headers(init?.headers).get('last-event-id'));
        const res = await fetch(url, init);
        if (connections > 1 || !res.body) return res;
        let chunks = 0;
        const cut = res.body.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, ctl) {
              if (++chunks > 8) ctl.error(new Error('connection reset'));
              else ctl.enqueue(chunk);
            },
          }),
        );
        return new Response(cut, { status: res.status, headers: res.headers });
      };
      const client = new Sandgate({ baseUrl: s.url, fetch: flaky });
      const events: ExecutionStreamEvent[] = [];
      for await (const ev of client.events(created.body.id, { retryMs: 50 })) events.push(ev);
      assert.ok(connections >= 2, `reconnected (${connections} connections)`);
      assert.equal(resumedWith[0], null);
      assert.match(resumedWith[1] ?? '', /^\d+-\d+$/, 'the second connection resumed with Last-Event-ID');
      const ids = events.flatMap((e) => ('id' in e ? [e.id] : []));
      assert.equal(new Set(ids).size, ids.length, 'no event twice');
      const stdout = events.flatMap((e) => (e.event === 'stdout' ? [e.data.text] : [])).join('');
      assert.equal(stdout, Array.from({ length: 30 }, (_, i) => `line ${i + 1}\n`).join(''));
      assert.equal(events.at(-1)!.event, 'result');
      // After the end, tailing again from the result ends at once (the server answers 204).
      const after: ExecutionStreamEvent[] = [];
      for await (const ev of sandgate.events(created.body.id, { lastEventId: ids.at(-1)! })) after.push(ev);
      assert.deepEqual(after, []);
    },
  );

  await t.test('run() answers the result of a run that takes seconds', async () => {
    const run = await sandgate.run(
      { language: 'python', code: 'import time\ntime.sleep(2)\nprint("late")' },
      { timeoutSeconds: 60 },
    );
    assert.equal(run.state, 'completed');
    assert.equal(run.result!.stdout, 'late\n');
  });
});
