import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ServiceAgents } from '@sandgate/backends/services';
import { Sandgate } from '@sandgate/client';
import { FileEvents } from '@sandgate/gateway';
import { startStack, until, type Stack } from './harness.ts';

const ACME = 'file-events-acme-key-0123456789abcdef';
const GLOBEX = 'file-events-globex-key-0123456789abcdef';
const MAX_PER_INTERVAL = 50;
const KEEP = 20;
const MAX_WATCHES = 20;

interface Ev {
  id: string | undefined;
  event: string;
  data: { path?: string; size_bytes?: number; modified_at?: string; code?: string; list_url?: string; detail?: string };
}

/** A client following a session's file events, as a browser's EventSource would. */
class Follower {
  readonly events: Ev[] = [];
  readonly #ac = new AbortController();
  readonly #waiters = new Set<() => void>();
  status = 0;
  readonly ready: Promise<void>;

  constructor(url: string, headers: Record<string, string>) {
    this.ready = (async () => {
      const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: this.#ac.signal });
      this.status = res.status;
      if (!res.ok || !res.body) return;
      const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      void (async () => {
        try {
          for await (const v of reader as unknown as AsyncIterable<{ id?: string; event?: string; data: string }>) {
            this.events.push({ id: v.id, event: v.event ?? 'message', data: JSON.parse(v.data) as Ev['data'] });
            for (const w of this.#waiters) w();
          }
        } catch {
          // aborted
        }
      })();
    })();
  }

  /** Waits for an event that `match` accepts, and answers it. */
  async next(what: string, match: (e: Ev) => boolean, timeoutMs = 30_000): Promise<Ev> {
    await this.ready;
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.events.find(match);
        if (found) {
          done();
          resolve(found);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${what} among ${JSON.stringify(this.events.slice(-30))}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  of(path: string): Ev[] {
    return this.events.filter((e) => e.data.path === path);
  }

  close(): void {
    this.#ac.abort();
  }
}

test('file events of a session over SSE', async (t) => {
  const s: Stack = await startStack({
    env: {
      SANDGATE_API_KEYS: `${ACME}:acme,${GLOBEX}:globex`,
      SANDGATE_FILE_EVENTS_MAX_PER_INTERVAL: String(MAX_PER_INTERVAL),
      SANDGATE_FILE_EVENTS_KEEP: String(KEEP),
      SANDGATE_FILE_EVENTS_MAX_WATCHES: String(MAX_WATCHES),
    },
  });
  t.after(() => s.close());
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const agents = new ServiceAgents(s.config.dataDir);
  const followers: Follower[] = [];
  t.after(() => followers.forEach((f) => f.close()));
  const follow = (id: string, headers: Record<string, string> = {}, key = ACME) => {
    const f = new Follower(`${s.url}/v1/sessions/${id}/files/events`, { ...as(key), ...headers });
    followers.push(f);
    return f;
  };
  const newSession = async (): Promise<string> => {
    const r = await s.api('POST', '/v1/sessions', {}, as(ACME));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return (r.body as { id: string }).id;
  };
  const run = async (id: string, code: string) => {
    const r = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'python', code }, as(ACME));
    assert.equal(r.body.state, 'completed', JSON.stringify(r.body));
    assert.equal(r.body.result.exit_code, 0, JSON.stringify(r.body.result));
    return r.body;
  };
  const upload = async (id: string, path: string, text: string, overwrite = false) => {
    const res = await fetch(`${s.url}/v1/sessions/${id}/files/${path}${overwrite ? '?overwrite=true' : ''}`, {
      method: 'PUT',
      headers: as(ACME),
      body: text,
    });
    assert.equal(res.status, 201, await res.text());
  };
  /** A session whose sandbox runs with a client following its events, once the sandbox's watch is in place. */
  const watched = async (): Promise<{ id: string; f: Follower }> => {
    const id = await newSession();
    await run(id, 'pass');
    const f = follow(id);
    await f.ready;
    assert.equal(f.status, 200);
    await until('the sandbox watches the session directory', async () => (await agents.watchesOpen(id)) === 1, 30_000);
    return { id, f };
  };

  await t.test('a run writes a file: created, then one modified for many appends; subdirectories', async () => {
    const { id, f } = await watched();
    await run(
      id,
      [
        'import os, time',
        "open('out.txt', 'w').write('a')",
        'time.sleep(1)',
        "with open('out.txt', 'a') as fh:",
        '    for i in range(200):',
        "        fh.write('b'); fh.flush()",
        "os.makedirs('sub/deeper')",
        "open('sub/deeper/x.txt', 'w').write('xyz')",
      ].join('\n'),
    );
    const last = await f.next('out.txt at 201 bytes', (e) => e.data.path === 'out.txt' && e.data.size_bytes === 201);
    const nested = await f.next('sub/deeper/x.txt', (e) => e.data.path === 'sub/deeper/x.txt');
    assert.equal(nested.event, 'created');
    assert.equal(nested.data.size_bytes, 3);
    const outs = f.of('out.txt');
    assert.equal(outs[0]!.event, 'created');
    assert.equal(outs[0]!.data.size_bytes, 1);
    assert.equal(last.event, 'modified');
    // 200 writes within well under a second: one event per interval (250 ms), not one per write.
    assert.ok(outs.length <= 4, `coalesced: ${JSON.stringify(outs)}`);
    assert.ok(Date.parse(last.data.modified_at!) > 0);

    await run(id, "import os, shutil\nos.remove('out.txt')\nshutil.rmtree('sub')");
    await f.next('out.txt deleted', (e) => e.data.path === 'out.txt' && e.event === 'deleted');
    await f.next('sub/deeper/x.txt deleted', (e) => e.data.path === 'sub/deeper/x.txt' && e.event === 'deleted');
    assert.equal(f.of('out.txt').at(-1)!.data.size_bytes, 0);
  });

  await t.test('an upload or a delete through the API is one event, though the sandbox sees it too', async () => {
    const { id, f } = await watched();
    await upload(id, 'up.txt', 'hello');
    // A run after the upload (it also brings the upload into a Kubernetes Pod): its file's event comes after anything
    // the sandbox had to say about the upload.
    await run(id, "open('marker-1', 'w').write('1')");
    await f.next('marker-1', (e) => e.data.path === 'marker-1');
    assert.deepEqual(
      f.of('up.txt').map((e) => [e.event, e.data.size_bytes]),
      [['created', 5]],
    );
    await upload(id, 'up.txt', 'hello, world', true);
    await s.api('DELETE', `/v1/sessions/${id}/files/gone.txt`, undefined, as(ACME)); // 404: nothing to report
    await upload(id, 'dir/nested.txt', 'n');
    const del = await s.api('DELETE', `/v1/sessions/${id}/files/dir/nested.txt`, undefined, as(ACME));
    assert.equal(del.status, 204);
    await run(id, "open('marker-2', 'w').write('2')");
    await f.next('marker-2', (e) => e.data.path === 'marker-2');
    assert.deepEqual(
      f.of('up.txt').map((e) => [e.event, e.data.size_bytes]),
      [
        ['created', 5],
        ['modified', 12],
      ],
    );
    assert.deepEqual(
      f.of('dir/nested.txt').map((e) => e.event),
      ['created', 'deleted'],
    );
    assert.equal(f.of('gone.txt').length, 0);
  });

  await t.test('a run that makes many files at once gives an overflow, not an event per file', async () => {
    const { id, f } = await watched();
    const many = MAX_PER_INTERVAL * 10;
    await run(id, `import os\nos.mkdir('many')\nfor i in range(${many}):\n    open('many/f%d' % i, 'w').close()`);
    const overflow = await f.next('overflow', (e) => e.event === 'overflow');
    assert.equal(overflow.data.code, 'file_events_overflow');
    assert.equal(overflow.data.list_url, `/v1/sessions/${id}/files`);
    assert.ok(overflow.id, 'an overflow has an id: it is resumed past like any event');
    await run(id, "open('after', 'w').write('1')");
    await f.next('the file after the flood', (e) => e.data.path === 'after');
    const fromFlood = f.events.filter((e) => e.data.path?.startsWith('many/'));
    assert.ok(fromFlood.length < many, `${fromFlood.length} events for ${many} files`);
    // Consecutive overflows are one.
    const kinds = f.events.map((e) => e.event);
    assert.ok(!kinds.some((k, i) => k === 'overflow' && kinds[i + 1] === 'overflow'), kinds.join(','));
  });

  await t.test('past SANDGATE_FILE_EVENTS_MAX_WATCHES directories, an overflow', async () => {
    const { id, f } = await watched();
    await run(id, `import os\nfor i in range(${MAX_WATCHES + 5}):\n    os.makedirs('d%d/e' % i)`);
    const overflow = await f.next('overflow', (e) => e.event === 'overflow');
    assert.equal(overflow.data.code, 'file_events_overflow');
    assert.match(String(overflow.data.detail), /more than 20 directories/);
    // What is watched still reports.
    await run(id, "open('top.txt', 'w').write('t')");
    await f.next('top.txt', (e) => e.data.path === 'top.txt');
  });

  await t.test("a deleted session's stream ends with session_not_found", async () => {
    const id = await newSession();
    const f = follow(id);
    await upload(id, 'kept-a-while.txt', 'x');
    await f.next('the upload', (e) => e.data.path === 'kept-a-while.txt');
    assert.equal(await s.deps.redis.exists(s.deps.keys.fileEvents(id)), 1);
    const del = await s.api('DELETE', `/v1/sessions/${id}`, undefined, as(ACME));
    assert.equal(del.status, 204, JSON.stringify(del.body));
    const err = await f.next('the error event', (e) => e.event === 'error');
    assert.equal(err.data.code, 'session_not_found');
    assert.equal(await s.deps.redis.exists(s.deps.keys.fileEvents(id)), 0, 'its events went with it');
  });

  await t.test('Last-Event-ID resumes with what was missed; an id older than the window says missed', async () => {
    const id = await newSession();
    const first = follow(id);
    await upload(id, 'a.txt', 'a');
    const a = await first.next('a.txt', (e) => e.data.path === 'a.txt');
    first.close();
    await upload(id, 'b.txt', 'b');
    await upload(id, 'c.txt', 'c');
    const resumed = follow(id, { 'last-event-id': a.id! });
    await resumed.next('c.txt', (e) => e.data.path === 'c.txt');
    assert.deepEqual(
      resumed.events.map((e) => e.data.path),
      ['b.txt', 'c.txt'],
    );
    // The same through ?last_event_id= and through the client library, which resumes by itself.
    const byQuery = new Follower(`${s.url}/v1/sessions/${id}/files/events?last_event_id=${a.id!}`, as(ACME));
    followers.push(byQuery);
    await byQuery.next('c.txt by query', (e) => e.data.path === 'c.txt');
    assert.deepEqual(
      byQuery.events.map((e) => e.data.path),
      ['b.txt', 'c.txt'],
    );
    const client = new Sandgate({ baseUrl: s.url, apiKey: ACME });
    const ac = new AbortController();
    const got: string[] = [];
    for await (const ev of client.fileEvents(id, { lastEventId: a.id!, signal: ac.signal })) {
      got.push(`${ev.event} ${'path' in ev.data ? ev.data.path : ''}`);
      if (got.length === 2) ac.abort();
    }
    assert.deepEqual(got, ['created b.txt', 'created c.txt']);

    for (let i = 0; i < KEEP + 5; i++) await upload(id, `flood/${i}.txt`, 'x');
    const late = follow(id, { 'last-event-id': a.id! });
    const missed = await late.next('missed', (e) => e.event === 'missed');
    assert.equal(late.events[0], missed);
    assert.equal(missed.data.code, 'file_events_missed');
    assert.equal(missed.data.list_url, `/v1/sessions/${id}/files`);
    await upload(id, 'after-missed.txt', 'x');
    await late.next('the next change', (e) => e.data.path === 'after-missed.txt');
    assert.deepEqual(
      late.events.map((e) => e.event),
      ['missed', 'created'],
    );

    const bad = await fetch(`${s.url}/v1/sessions/${id}/files/events`, {
      headers: { ...as(ACME), 'last-event-id': 'nope' },
    });
    assert.equal(bad.status, 400);
  });

  await t.test('one watch per sandbox however many gateways listen; another takes over from the holder', async () => {
    const id = await newSession();
    await run(id, 'pass');
    // Two gateway processes' feeders (each its own lease owner), on the same Redis and data directory.
    const [a, b] = [new FileEvents(s.deps), new FileEvents(s.deps)];
    const [acA, acB] = [new AbortController(), new AbortController()];
    t.after(async () => {
      acA.abort();
      acB.abort();
      await Promise.all([a.close(), b.close()]);
    });
    const lease = s.deps.keys.fileWatchLease(id);
    a.listen(id, acA.signal);
    await until('a watches', async () => (await agents.watchesOpen(id)) === 1, 30_000);
    const holder = await s.deps.redis.get(lease);
    assert.ok(holder);
    b.listen(id, acB.signal);
    // b tries for the lease every second and renews nothing: over a few of its tries, one watch, one holder.
    for (const end = Date.now() + 3_000; Date.now() < end;) {
      assert.equal(await agents.watchesOpen(id), 1);
      assert.equal(await s.deps.redis.get(lease), holder);
      await new Promise((r) => setTimeout(r, 250));
    }
    acA.abort();
    await until('b takes over', async () => {
      const now = await s.deps.redis.get(lease);
      return now !== null && now !== holder && (await agents.watchesOpen(id)) === 1;
    });
    await run(id, "open('taken-over.txt', 'w').write('1')");
    const key = s.deps.keys.fileEvents(id);
    await until('the new holder feeds the stream', async () =>
      (await s.deps.redis.xrange(key, '-', '+')).some(([, f]) => f.includes('taken-over.txt')),
    );
    acB.abort();
    await until(
      'no watch and no lease once nobody listens',
      async () => (await agents.watchesOpen(id)) === 0 && (await s.deps.redis.exists(lease)) === 0,
    );
  });

  await t.test('another tenant gets 404, as on every session route', async () => {
    const id = await newSession();
    const res = await fetch(`${s.url}/v1/sessions/${id}/files/events`, { headers: as(GLOBEX) });
    assert.equal(res.status, 404);
    assert.equal(((await res.json()) as { code: string }).code, 'session_not_found');
    const none = await fetch(`${s.url}/v1/sessions/sess_000000000000/files/events`, { headers: as(ACME) });
    assert.equal(none.status, 404);
    const anonymous = await fetch(`${s.url}/v1/sessions/${id}/files/events`);
    assert.equal(anonymous.status, 401);
  });

  await t.test('a paused session has API events; the sandbox events come back with it', async () => {
    const { id, f } = await watched();
    const paused = await s.api('POST', `/v1/sessions/${id}/pause`, {}, as(ACME));
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    await upload(id, 'while-paused.txt', 'zz');
    const ev = await f.next('while-paused.txt', (e) => e.data.path === 'while-paused.txt');
    assert.equal(ev.event, 'created');
    await run(id, 'pass'); // resumes the session: a new sandbox
    await until('the new sandbox is watched', async () => (await agents.watchesOpen(id)) === 1, 30_000);
    await run(id, "open('after-resume.txt', 'w').write('r')");
    await f.next('after-resume.txt', (e) => e.data.path === 'after-resume.txt' && e.event === 'created');
    assert.equal(f.of('while-paused.txt').length, 1);
    // Nobody listens any more: the watch in the sandbox ends.
    f.close();
    await until('the watch ends with its last client', async () => (await agents.watchesOpen(id)) === 0, 30_000);
  });
});
