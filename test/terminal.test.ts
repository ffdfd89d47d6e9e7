import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import WebSocket from 'ws';
import { Sandgate, SandgateApiError, resizeTerminal } from '@sandgate/client';
import { TEST_BACKEND, startStack, until, type Stack } from './harness.ts';

const ACME = 'terminal-acme-key-0123456789abcdef';
const GLOBEX = 'terminal-globex-key-0123456789abcdef';
const PIDS_LIMIT = 64;
const MAX_TERMINALS = 2;

/** A terminal as a person uses it: keys in, the screen's bytes out, and how it closed. */
class Term {
  output = '';
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly #waiters = new Set<() => void>();

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, binary: boolean) => {
      if (!binary) return;
      this.output += data.toString('utf8');
      for (const w of this.#waiters) w();
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString('utf8') })),
    );
  }

  type(keys: string): void {
    this.ws.send(Buffer.from(keys));
  }

  /** Waits until the output (from `from` on) matches `re`. */
  async expect(re: RegExp, from = 0, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    const found = () => this.output.slice(from).match(re);
    return new Promise((resolve, reject) => {
      const check = () => {
        const m = found();
        if (m) {
          done();
          resolve(m);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${re} in the terminal's output: ${JSON.stringify(this.output.slice(-2000))}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Runs `command` and answers what it printed between two markers (its own echo of the line is not counted). */
  async run(command: string): Promise<string> {
    const tag = Math.random().toString(36).slice(2, 8);
    const from = this.output.length;
    this.type(`echo "<${tag}"; ${command}; echo "${tag}>"\r`);
    const m = await this.expect(new RegExp(`[\\r\\n]<${tag}\\r\\n([^]*?)${tag}>`), from);
    return m[1]!.replace(/\r\n$/, '');
  }
}

/** Opens a terminal at `url` with `headers`; resolves once it is open. */
async function open(url: string, headers: Record<string, string> = {}): Promise<Term> {
  const ws = new WebSocket(url, { headers });
  const term = new Term(ws);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => reject(new Error(`refused: ${res.statusCode} ${text}`)));
    });
    ws.once('error', reject);
  });
  return term;
}

/** The answer to an upgrade that is refused: status, headers and problem body. */
async function refused(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: { code?: string; detail?: string } }> {
  const ws = new WebSocket(url, { headers });
  try {
    return await new Promise((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString('utf8')));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text || '{}') }),
        );
      });
      ws.once('open', () => reject(new Error('the websocket opened')));
      ws.once('error', reject);
    });
  } finally {
    ws.terminate();
  }
}

test('terminals of a session over websockets', async (t) => {
  const s: Stack = await startStack({
    env: {
      SANDGATE_API_KEYS: `${ACME}:acme,${GLOBEX}:globex`,
      SANDGATE_PIDS_LIMIT: String(PIDS_LIMIT),
      SANDGATE_MAX_TERMINALS: String(MAX_TERMINALS),
    },
  });
  t.after(() => s.close());
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const ws = s.url.replace(/^http/, 'ws');
  const newSession = async (body: Record<string, unknown> = {}): Promise<string> => {
    const r = await s.api('POST', '/v1/sessions', body, as(ACME));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return (r.body as { id: string }).id;
  };
  const terminalUrl = (id: string, query = '') => `${ws}/v1/sessions/${id}/terminal${query}`;
  const opened: Term[] = [];
  const openAs = async (id: string, query = '', headers: Record<string, string> = as(ACME)) => {
    const term = await open(terminalUrl(id, query), headers);
    opened.push(term);
    return term;
  };
  t.after(() => opened.forEach((term) => term.ws.terminate()));

  await t.test('a login shell as the sandbox user, in the session directory, beside runs', async () => {
    const id = await newSession();
    // The session has no sandbox yet: the terminal makes it.
    const term = await openAs(id);
    assert.equal(await term.run('echo "$((6 * 7))"'), '42');
    const run = await s.api(
      'POST',
      '/v1/executions?wait=60',
      { session_id: id, language: 'bash', code: 'id -u; id -g' },
      as(ACME),
    );
    assert.equal(run.body.state, 'completed', JSON.stringify(run.body.result));
    assert.equal(await term.run('id -u; id -g'), run.body.result.stdout.trim().replace(/\n/g, '\r\n'));
    assert.notEqual(await term.run('id -u'), '0');
    assert.equal(await term.run('pwd'), '/mnt/data');
    assert.match(await term.run('shopt -q login_shell && echo login'), /^login$/);
    // What the terminal writes is the session's: a run sees it (on Kubernetes the worker brings what the Pod changed
    // since the last run back to the store before the next one), and the shell outlives the run's end.
    await term.run('echo from-the-terminal > made-here.txt');
    const read = await s.api(
      'POST',
      '/v1/executions?wait=60',
      { session_id: id, language: 'bash', code: 'cat made-here.txt 2>/dev/null; true' },
      as(ACME),
    );
    assert.equal(read.body.result.stdout, 'from-the-terminal\n');
    const listed = await s.api('GET', `/files/${id}/made-here.txt`, undefined, as(ACME));
    assert.equal(listed.body, 'from-the-terminal\n', 'the session store holds it');
    assert.equal(await term.run('echo still-here'), 'still-here');
    const session = await s.api('GET', `/v1/sessions/${id}`, undefined, as(ACME));
    assert.equal(session.body.state, 'idle', 'an open terminal does not make the session busy');
    term.type('exit 3\r');
    assert.deepEqual(await term.closed, { code: 1000, reason: 'the shell exited with code 3' });
  });

  await t.test('resize: the pty has the size asked for, then the size sent', async () => {
    const id = await newSession();
    const term = await openAs(id, '?cols=100&rows=30');
    assert.equal(await term.run('stty size'), '30 100');
    term.ws.send(JSON.stringify({ type: 'resize', cols: 132, rows: 43 }));
    assert.equal(await term.run('stty size'), '43 132');
    // Through the client library's helper, and its terminal().
    const client = new Sandgate({ baseUrl: s.url, apiKey: ACME });
    const other = new Term(await client.terminal(id, { cols: 90, rows: 20 }));
    opened.push(other);
    assert.equal(await other.run('stty size'), '20 90');
    resizeTerminal(other.ws, 200, 50);
    assert.equal(await other.run('stty size; tput cols'), '50 200\r\n200');
    // Anything else as text closes it: keys go as binary.
    term.ws.send('ls');
    const closed = await term.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /resize/);
  });

  await t.test('at most SANDGATE_MAX_TERMINALS per session; the client sees the code', async () => {
    const id = await newSession();
    const terms = [await openAs(id), await openAs(id)];
    assert.deepEqual((await s.api('GET', `/v1/sessions/${id}/terminal`, undefined, as(ACME))).body, {
      open: MAX_TERMINALS,
      max: MAX_TERMINALS,
    });
    const third = await refused(terminalUrl(id), as(ACME));
    assert.equal(third.status, 429);
    assert.equal(third.body.code, 'too_many_terminals');
    assert.equal(third.headers['retry-after'], '10');
    const client = new Sandgate({ baseUrl: s.url, apiKey: ACME });
    await assert.rejects(client.terminal(id), (err: unknown) => {
      assert.ok(err instanceof SandgateApiError);
      assert.equal(err.code, 'too_many_terminals');
      assert.equal(err.status, 429);
      return true;
    });
    // Another session has its own.
    await openAs(await newSession());
    // Closing one makes room (once the sandbox has hung it up).
    terms[0]!.ws.close();
    await terms[0]!.closed;
    const again = await until('room for a terminal', async () => {
      try {
        return await openAs(id);
      } catch {
        return null;
      }
    });
    assert.equal(await again.run('echo ok'), 'ok');
  });

  await t.test('who may open one: a key of the tenant, a signed URL once, an allowed origin', async () => {
    const id = await newSession();
    const none = await refused(terminalUrl(id));
    assert.equal(none.status, 401);
    assert.equal(none.body.code, 'unauthorized');
    const foreign = await refused(terminalUrl(id), as(GLOBEX));
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.code, 'session_not_found');
    const wrongKey = await refused(terminalUrl(id), as('not-a-key-of-anyone-0123456789'));
    assert.equal(wrongKey.status, 401);
    const fromElsewhere = await refused(terminalUrl(id), { ...as(ACME), origin: 'https://evil.example' });
    assert.equal(fromElsewhere.status, 403);
    assert.equal(fromElsewhere.body.code, 'origin_not_allowed');
    const fromHere = await openAs(id, '', { ...as(ACME), origin: new URL(s.config.publicUrl).origin });
    assert.equal(await fromHere.run('echo same-origin'), 'same-origin');
    fromHere.ws.close();

    // Without the upgrade: how many are open (none now), and how many may be.
    await fromHere.closed;
    const status = await until('the closed terminal to be hung up', async () => {
      const r = await s.api('GET', `/v1/sessions/${id}/terminal`, undefined, as(ACME));
      return r.body.open === 0 && r;
    });
    assert.deepEqual(status.body, { open: 0, max: MAX_TERMINALS });
    assert.equal((await s.api('GET', `/v1/sessions/${id}/terminal`, undefined, as(GLOBEX))).status, 404);
    assert.equal((await fetch(`${s.url}/v1/sessions/${id}/terminal`)).status, 401);

    // A signed URL, for a browser: no key, once.
    const signed = await s.api('POST', `/v1/sessions/${id}/terminal/url`, undefined, as(ACME));
    assert.equal(signed.status, 201, JSON.stringify(signed.body));
    const { url, expires_at } = signed.body as { url: string; expires_at: string };
    assert.match(url, /^ws:\/\/.*\/terminal\?expires=\d+&sig=[A-Za-z0-9_-]{43}$/);
    assert.ok(Date.parse(expires_at) - Date.now() <= 60_000);
    const byUrl = await open(`${url}&cols=70&rows=10`);
    opened.push(byUrl);
    assert.equal(await byUrl.run('stty size'), '10 70');
    const reused = await refused(url);
    assert.equal(reused.status, 403);
    assert.equal(reused.body.code, 'forbidden');
    byUrl.ws.close();
    const other = (await s.api('POST', `/v1/sessions/${id}/terminal/url`, undefined, as(ACME))).body.url as string;
    const tampered = other.replace(/sig=(.)/, (_m, c: string) => `sig=${c === 'A' ? 'B' : 'A'}`);
    assert.equal((await refused(tampered)).status, 403);
    const anotherSession = await newSession();
    assert.equal((await refused(other.replace(id, anotherSession))).status, 403, 'a URL opens its session only');
    const expired = s.deps.signer.signGrant('terminal', id, -1);
    const late = await refused(terminalUrl(id, `?expires=${expired.expires}&sig=${expired.sig}`));
    assert.equal(late.status, 403);
    // A download's signature is no terminal's.
    const download = new URL(s.deps.signer.downloadUrl(id, 'x.txt'));
    const query = `?expires=${download.searchParams.get('expires')}&sig=${download.searchParams.get('sig')}`;
    assert.equal((await refused(terminalUrl(id, query))).status, 403);
    assert.equal((await refused(other, { origin: 'https://evil.example' })).status, 403, 'Origin is checked too');
    // The other tenant cannot make one.
    const theirs = await s.api('POST', `/v1/sessions/${id}/terminal/url`, undefined, as(GLOBEX));
    assert.equal(theirs.status, 404);
  });

  await t.test(
    "the session's limits hold in the terminal: its memory limit; on Docker a fork bomb meets the pids limit",
    async () => {
      const id = await newSession();
      const probe = await openAs(id);
      const limit = await probe.run(
        'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes',
      );
      assert.equal(Number(limit), s.config.memoryMb * (1 << 20), "the shell's cgroup has the session's memory limit");
      probe.ws.close();
      await probe.closed;
      // Kubernetes has no limit of processes per sandbox (the node's podPidsLimit applies: docs/kubernetes.md).
      if (TEST_BACKEND !== 'docker') return;
      const bomb =
        'import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(600)\n' +
        '            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print("forked", n, "then errno", e.errno)\n';
      const put = await fetch(`${s.url}/v1/sessions/${id}/files/bomb.py`, {
        method: 'PUT',
        headers: as(ACME),
        body: bomb,
      });
      assert.equal(put.status, 201);
      const term = await openAs(id);
      const said = await term.run('python3 bomb.py');
      const m = /forked (\d+) then errno 11/.exec(said);
      assert.ok(m, said);
      assert.ok(Number(m[1]) < PIDS_LIMIT, `forked ${m[1]} processes with a limit of ${PIDS_LIMIT}`);
      // Closing the terminal ends all it started: a new one has room again.
      term.ws.close();
      await term.closed;
      const next = await until('a terminal once the sleepers are gone', async () => {
        try {
          const t2 = await openAs(id);
          return (await t2.run('echo ok')) === 'ok' && t2;
        } catch {
          return null;
        }
      });
      const count = Number(await next.run("ls /proc | grep -c '^[0-9]'"));
      assert.ok(count < 20, `${count} processes left in the sandbox`);
    },
  );

  await t.test('closed when the session is paused, and when it is deleted; a terminal brings it back', async () => {
    const id = await newSession();
    const term = await openAs(id);
    assert.equal(await term.run('echo up'), 'up');
    const ran = await s.api(
      'POST',
      '/v1/executions?wait=60',
      { session_id: id, language: 'bash', code: 'true' },
      as(ACME),
    );
    assert.equal(ran.body.state, 'completed');
    // Written after the last run: the pause keeps it (on Kubernetes, brought back before the Pod goes).
    await term.run('echo before-the-pause > paused.txt');
    const paused = await s.api('POST', `/v1/sessions/${id}/pause`, {}, as(ACME));
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.deepEqual(await term.closed, { code: 4409, reason: 'the session was paused' });
    assert.equal((await s.api('GET', `/files/${id}/paused.txt`, undefined, as(ACME))).body, 'before-the-pause\n');
    // Opening one resumes it.
    const back = await openAs(id);
    assert.equal(await back.run('cat /proc/1/cmdline >/dev/null && echo back'), 'back');
    assert.equal((await s.api('GET', `/v1/sessions/${id}`, undefined, as(ACME))).body.state, 'idle');
    const deleted = await s.api('DELETE', `/v1/sessions/${id}`, undefined, as(ACME));
    assert.equal(deleted.status, 204);
    assert.deepEqual(await back.closed, { code: 4404, reason: 'the session was deleted' });
  });

  await t.test(
    'a terminal in use keeps its session from pausing as idle; left alone, it pauses and closes',
    async () => {
      const id = await newSession({ idle_pause_seconds: 10 });
      const term = await openAs(id);
      const pausesAt = async () =>
        Date.parse((await s.api('GET', `/v1/sessions/${id}`, undefined, as(ACME))).body.pauses_at as string);
      const before = await pausesAt();
      await until(
        'the pause time to move on with keys',
        async () => {
          term.type(' \b');
          return (await pausesAt()) > before;
        },
        20_000,
        500,
      );
      const closed = await term.closed;
      assert.equal(closed.code, 4409);
      assert.equal((await s.api('GET', `/v1/sessions/${id}`, undefined, as(ACME))).body.state, 'paused');
    },
  );
});
