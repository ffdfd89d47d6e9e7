import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import Dockerode from 'dockerode';
import WebSocket from 'ws';
import { DEFAULT_AGENT_PORT, DEFAULT_SERVICES_PORT } from '@sandgate/backends/testing';
import { startStack, TEST_BACKEND, until } from './harness.ts';
import { readSse } from './sse-client.ts';
import { mcpClient, structured } from './mcp-client.ts';

/**
 * Services (docs/services.md): long-running programs in a session's sandbox, started over the API, followed by
 * their state, ports and logs, reached through the gateway's proxy (HTTP and websockets, with the tenant's key or a
 * signed preview link), stopped with SIGTERM then SIGKILL, and gone with the sandbox.
 */

const ACME = 'a'.repeat(32);
const GLOBEX = 'g'.repeat(32);
/** A tenant with a limit of 2 requests a minute. */
const INITECH = 'i'.repeat(32);

/** Headers a hostile service answers /origin-headers with: all but the last act on the origin they come from. */
const ORIGIN_HEADERS: [string, string][] = [
  ['Set-Cookie', 'flood=1; Path=/'],
  ['Set-Cookie', 'more=2; Path=/; Max-Age=99999'],
  ['Set-Cookie', 'wide=3; Domain=previews.test; Path=/'],
  ['Clear-Site-Data', '"storage", "cookies"'],
  ['Service-Worker-Allowed', '/'],
  ['Strict-Transport-Security', 'max-age=0'],
  ['Origin-Agent-Cluster', '?0'],
  ['Alt-Svc', 'h2=":9999"'],
  ['NEL', '{"report_to": "x", "max_age": 86400}'],
  ['Report-To', '{"group": "x", "max_age": 86400, "endpoints": [{"url": "https://evil.example/r"}]}'],
  ['Accept-CH', 'Sec-CH-UA-Model'],
  ['WWW-Authenticate', 'Basic realm="sandgate"'],
  ['X-Kept', 'yes'],
];

/**
 * A web app as an agent would write one: stdlib only; /ws is a websocket that echoes one message in capitals,
 * /origin-headers answers with ORIGIN_HEADERS.
 */
const APP = String.raw`
import base64, hashlib, http.server, json, os, signal, sys
def bye(*_):
    print("got SIGTERM, leaving", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/ws":
            return self.ws()
        if self.path == "/origin-headers":
            self.send_response(200)
            for k, v in ${JSON.stringify(ORIGIN_HEADERS)}:
                self.send_header(k, v)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.answer(b"")
    def do_POST(self):
        self.answer(self.rfile.read(int(self.headers.get("content-length", 0))))
    def answer(self, body):
        data = json.dumps({"method": self.command, "path": self.path, "body": body.decode(),
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def ws(self):
        key = self.headers["sec-websocket-key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.send_response(101)
        self.send_header("upgrade", "websocket")
        self.send_header("connection", "Upgrade")
        self.send_header("sec-websocket-accept", accept.decode())
        self.end_headers()
        self.wfile.flush()
        head = self.rfile.read(2)
        n = head[1] & 127
        mask = self.rfile.read(4)
        text = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n))).decode()
        out = ("echo: " + text.upper()).encode()
        self.wfile.write(bytes([0x81, len(out)]) + out)
        self.wfile.flush()
        self.close_connection = True
    def log_message(self, fmt, *args):
        print("request", self.command, self.path, flush=True)
print("serving on 8000", flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`;

interface Service {
  name: string;
  state: string;
  ports: number[];
  port: number | null;
  exit_code: number | null;
  message: string | null;
  proxy_url: string;
  log_bytes: number;
  execution_id: string;
}

/** Sends `text` on a websocket to `url` and answers the first message that comes back. */
async function echo(url: string, text: string, headers: Record<string, string> = {}): Promise<string> {
  const ws = new WebSocket(url, { headers });
  try {
    return await new Promise<string>((resolve, reject) => {
      ws.once('open', () => ws.send(text));
      ws.once('message', (data) => resolve(String(data)));
      ws.once('error', reject);
    });
  } finally {
    ws.terminate();
  }
}

/** The answer to a websocket request that does not upgrade: its status and headers. */
async function refusedUpgrade(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders }> {
  const ws = new WebSocket(url, { headers });
  try {
    return await new Promise((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      ws.once('open', () => reject(new Error('the websocket opened')));
      ws.once('error', reject);
    });
  } finally {
    ws.terminate();
  }
}

/** Sends `bytes` to the server at `url` and answers everything it sends back until it closes. */
async function rawRequest(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.end(bytes);
  let answer = '';
  for await (const chunk of socket) answer += String(chunk);
  return answer;
}

test('services', async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${ACME}:acme,${GLOBEX}:globex,${INITECH}:initech`,
      // An allowed host turns on the Host and Origin checks (always on in open mode).
      SANDGATE_ALLOWED_HOSTS: 'sandgate.test',
      SANDGATE_TENANT_LIMITS: JSON.stringify({ initech: { requests_per_min: 2 } }),
    },
  });
  t.after(() => s.close());
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const session = async (mode = 'process'): Promise<string> => {
    const r = await s.api('POST', '/v1/sessions', { mode }, as(ACME));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return (r.body as { id: string }).id;
  };
  const start = async (id: string, body: Record<string, unknown>) =>
    s.api('POST', `/v1/sessions/${id}/services`, body, as(ACME));
  const get = async (id: string, name: string): Promise<Service> => {
    const r = await s.api('GET', `/v1/sessions/${id}/services/${name}`, undefined, as(ACME));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as Service;
  };
  const listening = (id: string, name: string) =>
    until(`service ${name} to listen`, async () => {
      const svc = await get(id, name);
      assert.notEqual(svc.state, 'failed', JSON.stringify(svc));
      return svc.port !== null && svc;
    });
  const run = async (id: string, code: string, language = 'python') => {
    const r = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language, code }, as(ACME));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.result as { state: string; stdout: string; stderr: string; exit_code: number };
  };

  const id = await session();
  await run(id, `open("app.py", "w").write(${JSON.stringify(APP)})`);

  await t.test('a service starts, shows its port, and answers through the proxy without seeing the key', async () => {
    const r = await start(id, { name: 'web', command: 'exec python3 -u app.py' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.ok(['running', 'starting'].includes(r.body.state), JSON.stringify(r.body));
    const svc = await listening(id, 'web');
    assert.deepEqual(svc.ports, [8000]);
    assert.equal(svc.port, 8000);
    assert.equal(svc.proxy_url, `${s.url}/v1/sessions/${id}/services/web/proxy/`);

    // What a client claims of the hops before it is not passed on: the gateway trusts no proxy in front of it.
    const claims = { 'x-forwarded-for': '203.0.113.9', forwarded: 'for=203.0.113.9', 'x-real-ip': '203.0.113.9' };
    const res = await fetch(`${svc.proxy_url}hello?x=1`, { headers: { ...as(ACME), ...claims } });
    assert.equal(res.status, 200, await res.clone().text());
    assert.match(res.headers.get('content-security-policy') ?? '', /^sandbox /, 'pages are sandboxed');
    const seen = (await res.json()) as { path: string; method: string; headers: Record<string, string> };
    assert.equal(seen.path, '/hello?x=1');
    assert.equal(seen.headers.authorization, undefined, "the tenant's API key never reaches the service");
    assert.equal(seen.headers['x-forwarded-prefix'], `/v1/sessions/${id}/services/web/proxy`);
    assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1', "the socket's peer, not what the client said");
    assert.equal(seen.headers.forwarded, undefined);
    assert.equal(seen.headers['x-real-ip'], undefined);

    const posted = await fetch(`${svc.proxy_url}form`, {
      method: 'POST',
      headers: { ...as(ACME), 'content-type': 'text/plain' },
      body: 'a body of the request',
    });
    assert.equal(((await posted.json()) as { body: string }).body, 'a body of the request');
  });

  await t.test('websockets go through the proxy', async () => {
    const url = `${s.url.replace(/^http/, 'ws')}/v1/sessions/${id}/services/web/proxy/ws`;
    assert.equal(await echo(url, 'hello over a websocket', as(ACME)), 'echo: HELLO OVER A WEBSOCKET');
  });

  await t.test("a websocket from another site's page is refused, as any request of it would be", async () => {
    const url = `${s.url.replace(/^http/, 'ws')}/v1/sessions/${id}/services/web/proxy/ws`;
    const refused = await refusedUpgrade(url, { ...as(ACME), origin: 'http://evil.example' });
    assert.equal(refused.status, 403);
  });

  await t.test(
    "websockets meet what requests meet: rate limits, metrics, the gateway's headers on a refusal",
    async () => {
      const ws = s.url.replace(/^http/, 'ws');
      // A service that answers a websocket request without upgrading: its answer is relayed as any response is.
      const plain = await refusedUpgrade(`${ws}/v1/sessions/${id}/services/web/proxy/origin-headers`, as(ACME));
      assert.equal(plain.status, 200);
      assert.equal(plain.headers['x-kept'], 'yes', 'the answer came from the service');
      assert.match(String(plain.headers['content-security-policy']), /^sandbox /, 'sandboxed like any page');
      const passed = ORIGIN_HEADERS.filter(([k]) => k !== 'X-Kept' && plain.headers[k.toLowerCase()] !== undefined);
      assert.deepEqual(passed, []);
      // Counted against the tenant's requests per minute (2 for this one), before anything else is looked at.
      const elsewhere = `${ws}/v1/sessions/sess_000000000000/services/web/proxy/ws`;
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push(await refusedUpgrade(elsewhere, as(INITECH)));
      assert.deepEqual(
        statuses.map((r) => r.status),
        [404, 404, 429],
      );
      assert.ok(Number(statuses[2]!.headers['retry-after']) >= 1, 'a 429 says when to retry');
      // Any other route answers an upgrade request as a request (and closes); only GET is upgraded.
      assert.equal((await refusedUpgrade(`${ws}/v1/sessions/${id}/services`, as(ACME))).status, 200);
      const post = await rawRequest(
        s.url,
        `POST /v1/sessions/${id}/services/web/proxy/ws HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
          `Authorization: Bearer ${ACME}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n`,
      );
      assert.match(post, /^HTTP\/1.1 405 /);
      assert.match(post, /"code":"method_not_allowed"/);
      // Upgrades are measured (and logged) as requests: the 101s of the websockets above.
      const metrics = await s.deps.metrics.registry.getSingleMetricAsString('sandgate_http_request_duration_seconds');
      assert.match(
        metrics,
        /_count\{method="GET",route="\/v1\/sessions\/:id\/services\/:name\/proxy\/\*",status_code="101"\} [1-9]/,
      );
    },
  );

  await t.test('another tenant, or no key, gets nothing; a preview link opens it without a key', async () => {
    const proxy = `${s.url}/v1/sessions/${id}/services/web/proxy/`;
    assert.equal((await fetch(proxy, { headers: as(GLOBEX) })).status, 404);
    assert.equal((await fetch(proxy)).status, 401);
    const shared = await s.api('POST', `/v1/sessions/${id}/services/web/preview`, { ttl_seconds: 600 }, as(ACME));
    assert.equal(shared.status, 201, JSON.stringify(shared.body));
    const { url } = shared.body as { url: string };
    const viaLink = await fetch(`${url}page`, { headers: { origin: 'null' } });
    assert.equal(viaLink.status, 200);
    assert.equal(((await viaLink.json()) as { path: string }).path, '/page');
    const forged = url.replace(
      /-([0-9a-z]{25})\/$/,
      (_, sig: string) => `-${sig.slice(0, -1)}${sig.endsWith('a') ? 'b' : 'a'}/`,
    );
    assert.notEqual(forged, url);
    const refused = await fetch(`${forged}page`);
    assert.equal(refused.status, 403);
    assert.equal(await echo(`${url.replace(/^http/, 'ws')}ws`, 'by link'), 'echo: BY LINK');
  });

  await t.test(
    'a preview link opens the start of the service it was made for, until its links are revoked',
    async () => {
      const mine = await session();
      const page = (n: number) => ({
        name: 'page',
        command: `echo start ${n} > index.html; exec python3 -m http.server 8002`,
      });
      const share = async () => {
        const r = await s.api('POST', `/v1/sessions/${mine}/services/page/preview`, {}, as(ACME));
        assert.equal(r.status, 201, JSON.stringify(r.body));
        return (r.body as { url: string }).url;
      };
      const open = (url: string) =>
        until('an answer from the service', async () => {
          const res = await fetch(url);
          return res.status !== 409 && res.status !== 502 && { status: res.status, text: await res.text() };
        });
      assert.equal((await start(mine, page(1))).status, 201);
      const first = await share();
      assert.deepEqual(await open(first), { status: 200, text: 'start 1\n' });
      // Deleted, and a new service under the same name: the old link does not open it.
      assert.equal((await s.api('DELETE', `/v1/sessions/${mine}/services/page`, undefined, as(ACME))).status, 204);
      assert.equal((await start(mine, page(2))).status, 201);
      const old = await fetch(first);
      assert.equal(old.status, 403, 'a link of the deleted service opens nothing');
      assert.equal(((await old.json()) as { code: string }).code, 'forbidden');
      const second = await share();
      assert.deepEqual(await open(second), { status: 200, text: 'start 2\n' });
      // Revoked: every link made so far stops working; one made afterwards works.
      const third = await share();
      const revoke = (key: string, name = 'page') =>
        s.api('DELETE', `/v1/sessions/${mine}/services/${name}/preview`, undefined, as(key));
      assert.equal((await revoke(GLOBEX)).status, 404, "another tenant's session is not there");
      assert.equal((await revoke(ACME, 'nothing')).body.code, 'service_not_found');
      assert.equal((await revoke(ACME)).status, 204);
      for (const url of [second, third]) assert.equal((await fetch(url)).status, 403, url);
      assert.equal((await refusedUpgrade(`${second.replace(/^http/, 'ws')}ws`)).status, 403, 'websockets too');
      assert.deepEqual(await open(await share()), { status: 200, text: 'start 2\n' });
    },
  );

  await t.test(
    "on the gateway's origin a service sets nothing that acts on the origin, and gets no cookie",
    async () => {
      const shared = await s.api('POST', `/v1/sessions/${id}/services/web/preview`, {}, as(ACME));
      const proxy = `${s.url}/v1/sessions/${id}/services/web/proxy/`;
      for (const [url, headers] of [
        [(shared.body as { url: string }).url, {}],
        [proxy, as(ACME)],
      ] as const) {
        const res = await fetch(`${url}origin-headers`, { headers });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-kept'), 'yes', 'the answer came from the service');
        const passed = ORIGIN_HEADERS.filter(([k]) => k !== 'X-Kept' && res.headers.has(k)).map(([k]) => k);
        assert.deepEqual(passed, [], `${url}: headers that act on the gateway's origin`);
        assert.match(res.headers.get('content-security-policy') ?? '', /^sandbox /);
        const echoed = await fetch(`${url}cookies`, { headers: { ...headers, cookie: 'dashboard=the-operators' } });
        const seen = (await echoed.json()) as { headers: Record<string, string> };
        assert.equal(seen.headers.cookie, undefined, "the gateway origin's cookies never reach the service");
      }
    },
  );

  await t.test('logs: from an offset, and only what is new after next_offset', async () => {
    const first = await s.api('GET', `/v1/sessions/${id}/services/web/logs`, undefined, as(ACME));
    assert.equal(first.status, 200);
    assert.match(first.body.output, /^serving on 8000\n/);
    assert.match(first.body.output, /request GET \/hello\?x=1/);
    assert.equal(first.body.offset, 0);
    assert.equal(first.body.next_offset, Buffer.byteLength(first.body.output));
    await fetch(`${s.url}/v1/sessions/${id}/services/web/proxy/later`, { headers: as(ACME) });
    const next = await until('the new request in the log', async () => {
      const r = await s.api(
        'GET',
        `/v1/sessions/${id}/services/web/logs?offset=${first.body.next_offset}`,
        undefined,
        as(ACME),
      );
      return r.body.output !== '' && r.body;
    });
    assert.equal(next.output, 'request GET /later\n');
    assert.equal(next.offset, first.body.next_offset);
  });

  await t.test('a service outlives runs in its session, while a daemon a run leaves behind does not', async () => {
    const r = await run(
      id,
      [
        'import subprocess, urllib.request',
        'subprocess.Popen(["setsid", "sleep", "600"])',
        'print(urllib.request.urlopen("http://127.0.0.1:8000/from-a-run").read().decode()[:20])',
      ].join('\n'),
    );
    assert.equal(r.state, 'completed', r.stderr);
    assert.match(r.stdout, /^\{"method": "GET"/);
    const sleepers = [
      'import os',
      'def cmdline(pid):',
      '    try:',
      '        return open(f"/proc/{pid}/cmdline", "rb").read()',
      '    except OSError:',
      '        return b""',
      'print(sum(cmdline(p) == b"sleep\\x00600\\x00" for p in os.listdir("/proc") if p.isdigit()))',
    ].join('\n');
    assert.equal((await run(id, sleepers)).stdout.trim(), '0', "the run's daemon is gone");
    assert.equal((await get(id, 'web')).state, 'running');
    assert.equal((await fetch(`${s.url}/v1/sessions/${id}/services/web/proxy/`, { headers: as(ACME) })).status, 200);
  });

  await t.test('code in the session cannot use the services socket', async () => {
    // Docker: the agent's Unix socket. Kubernetes: the session Pod's services port, which code in the Pod can reach.
    const where =
      TEST_BACKEND === 'kubernetes'
        ? [`s = socket.socket(); s.settimeout(5)`, `s.connect(("127.0.0.1", ${DEFAULT_SERVICES_PORT}))`]
        : ['s = socket.socket(socket.AF_UNIX); s.settimeout(5)', 's.connect("/run/sandgate/services/agent.sock")'];
    const probe = [
      'import socket',
      'try:',
      ...where.map((line) => `    ${line}`),
      '    s.sendall(b\'{"op":"status","token":"guess"}\\n\')',
      '    print("answer", repr(s.recv(100)))',
      'except OSError as e:',
      '    print("refused", type(e).__name__)',
    ].join('\n');
    // On Docker the directory is the agent's (another uid) alone, in a stateful session too, whose interpreter is a
    // program the agent starts as the sandbox user. On Kubernetes (one uid) the token alone keeps code off.
    const refused = TEST_BACKEND === 'kubernetes' ? "answer b''" : 'refused PermissionError';
    assert.equal((await run(id, probe)).stdout.trim(), refused);
    const stateful = await session('stateful');
    assert.equal((await start(stateful, { name: 'idle', command: 'sleep 600' })).status, 201);
    assert.equal((await run(stateful, probe)).stdout.trim(), refused);
    assert.equal((await get(stateful, 'idle')).state, 'running', 'services run in stateful sessions too');
  });

  await t.test("the proxy never reaches the agent's own ports", async () => {
    const own = await session();
    for (const port of [DEFAULT_AGENT_PORT, DEFAULT_SERVICES_PORT]) {
      const name = `own-${port}`;
      assert.equal((await start(own, { name, command: 'sleep 600', port })).status, 201);
      const res = await fetch(`${s.url}/v1/sessions/${own}/services/${name}/proxy/`, { headers: as(ACME) });
      assert.equal(res.status, 502);
      assert.equal(((await res.json()) as { code: string }).code, 'service_unreachable');
    }
  });

  await t.test('follow streams the log until the service ends; stop sends SIGTERM first', async () => {
    const events: { event: string | undefined; data: string }[] = [];
    const followed = readSse(`${s.url}/v1/sessions/${id}/services/web/logs?follow=true&offset=0`, {
      headers: as(ACME),
      onEvent: (ev) => {
        events.push(ev);
      },
    });
    await until('the first log event', async () => events.length > 0);
    const stopped = await s.api('POST', `/v1/sessions/${id}/services/web/stop`, { grace_ms: 5000 }, as(ACME));
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    assert.equal(stopped.body.state, 'stopped');
    assert.deepEqual(stopped.body.ports, []);
    const { status } = await followed;
    assert.equal(status, 200);
    const end = events.at(-1)!;
    assert.equal(end.event, 'end');
    assert.equal(JSON.parse(end.data).state, 'stopped');
    const logged = events
      .filter((e) => e.event === 'log')
      .map((e) => (JSON.parse(e.data) as { output: string }).output)
      .join('');
    assert.match(logged, /^serving on 8000\n/);
    assert.match(logged, /got SIGTERM, leaving\n$/, 'the service had its SIGTERM and time to leave');
    const proxied = await fetch(`${s.url}/v1/sessions/${id}/services/web/proxy/`, { headers: as(ACME) });
    assert.equal(proxied.status, 409);
    assert.equal(((await proxied.json()) as { code: string }).code, 'service_not_running');
  });

  await t.test(
    'a service that ignores SIGTERM is killed after the grace; one that fails shows its status',
    async () => {
      assert.equal((await start(id, { name: 'stubborn', command: 'trap "" TERM; sleep 600 & wait' })).status, 201);
      const stopped = await s.api('POST', `/v1/sessions/${id}/services/stubborn/stop`, { grace_ms: 300 }, as(ACME));
      assert.equal(stopped.body.state, 'stopped');
      assert.equal(stopped.body.exit_code, 137, 'SIGKILL');
      assert.equal((await start(id, { name: 'broken', command: 'echo about to fail >&2; exit 3' })).status, 201);
      const failed = await until('the failure', async () => {
        const svc = await get(id, 'broken');
        return svc.state === 'failed' && svc;
      });
      assert.equal(failed.exit_code, 3);
      const logs = await s.api('GET', `/v1/sessions/${id}/services/broken/logs`, undefined, as(ACME));
      assert.equal(logs.body.output, 'about to fail\n');
      // A name may be used again once its service has ended.
      assert.equal((await start(id, { name: 'broken', command: 'sleep 600' })).body.state, 'running');
    },
  );

  await t.test('limits and bad input get clear codes', async () => {
    const dup = await start(id, { name: 'broken', command: 'sleep 1' });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.code, 'service_exists');
    const bad = await start(id, { name: 'Not A Name', command: 'sleep 1' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, 'validation_failed');
    const missing = await s.api('GET', `/v1/sessions/${id}/services/nothing`, undefined, as(ACME));
    assert.equal(missing.status, 404);
    assert.equal(missing.body.code, 'service_not_found');
    const other = await session();
    for (let i = 0; i < 8; i++) {
      const r = await start(other, { name: `s${i}`, command: 'sleep 600' });
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    const ninth = await start(other, { name: 's8', command: 'sleep 600' });
    assert.equal(ninth.status, 429);
    assert.equal(ninth.body.code, 'too_many_services');
    assert.equal(ninth.headers.get('retry-after'), '10', 'every 429 says when to retry');
    assert.equal(ninth.body.retry_after, 10);
    const list = await s.api('GET', `/v1/sessions/${other}/services`, undefined, as(ACME));
    assert.equal(list.body.services.length, 8);
    assert.ok(list.body.services.every((x: Service) => x.state === 'running'));
  });

  await t.test(
    'over MCP: an agent starts a service, hands a person its preview, reads its output, stops it',
    async () => {
      const { client } = await mcpClient(s, { apiKey: ACME });
      t.after(() => client.close());
      const call = async (name: string, args: Record<string, unknown>) => {
        const r = await client.callTool({ name, arguments: args });
        assert.notEqual(r.isError, true, JSON.stringify(r));
        return structured(r);
      };
      const mine = await session();
      const started = await call('start_service', {
        session_id: mine,
        name: 'files',
        command: 'echo hello > index.html; exec python3 -m http.server 8001',
      });
      assert.equal(started.service.state, 'running');
      const page = await until('the page through the preview link', async () => {
        const res = await fetch(started.preview_url as string);
        return res.status === 200 && res.text();
      });
      assert.equal(page, 'hello\n');
      const listed = await call('list_services', { session_id: mine });
      assert.deepEqual(
        listed.services.map((x: Service) => [x.name, x.state, x.ports]),
        [['files', 'running', [8001]]],
      );
      const logs = await call('service_logs', { session_id: mine, name: 'files' });
      assert.match(logs.output, /"GET \/ HTTP\/1.1" 200/);
      const again = await call('service_logs', { session_id: mine, name: 'files', offset: logs.next_offset });
      assert.equal(again.output, '');
      const revoked = await call('revoke_previews', { session_id: mine, name: 'files' });
      assert.deepEqual(revoked, { session_id: mine, name: 'files', status: 'revoked' });
      assert.equal((await fetch(started.preview_url as string)).status, 403, 'the link handed out is revoked');
      const stopped = await call('stop_service', { session_id: mine, name: 'files' });
      assert.equal(stopped.service.state, 'stopped');
      const unknown = await client.callTool({ name: 'stop_service', arguments: { session_id: mine, name: 'nope' } });
      assert.equal(unknown.isError, true);
      assert.equal(structured(unknown).error, 'service_not_found');
    },
  );

  await t.test('services stop with their sandbox: a restart ends them', async () => {
    assert.equal((await get(id, 'broken')).state, 'running');
    assert.equal((await s.api('POST', `/v1/sessions/${id}/restart`, undefined, as(ACME))).status, 200);
    await run(id, 'print("the sandbox is new")');
    const svc = await get(id, 'broken');
    assert.equal(svc.state, 'stopped');
    assert.match(svc.message ?? '', /sandbox ended or was replaced/);
    const del = await s.api('DELETE', `/v1/sessions/${id}/services/broken`, undefined, as(ACME));
    assert.equal(del.status, 204);
    assert.equal((await s.api('GET', `/v1/sessions/${id}/services/broken`, undefined, as(ACME))).status, 404);
  });
});

/** A GET to the gateway at `url` naming `host`, as a browser on that host sends it (fetch cannot set Host). */
async function viaHost(
  url: string,
  host: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, headers: { ...headers, host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.once('error', reject);
    req.end();
  });
}

test('previews on an origin of their own (SANDGATE_PREVIEW_ORIGIN): a host per link, the service at its root', async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${ACME}:acme`,
      SANDGATE_ALLOWED_HOSTS: 'sandgate.test',
      SANDGATE_PREVIEW_ORIGIN: 'http://{preview}.previews.test',
    },
  });
  t.after(() => s.close());
  const auth = { authorization: `Bearer ${ACME}` };
  const id = (await s.api('POST', '/v1/sessions', { mode: 'process' }, auth)).body.id as string;
  const wrote = await s.api(
    'POST',
    '/v1/executions?wait=60',
    { session_id: id, language: 'python', code: `open("app.py", "w").write(${JSON.stringify(APP)})` },
    auth,
  );
  assert.equal(wrote.body.result?.state, 'completed', JSON.stringify(wrote.body));
  const started = await s.api(
    'POST',
    `/v1/sessions/${id}/services`,
    { name: 'web', command: 'exec python3 -u app.py' },
    auth,
  );
  assert.equal(started.status, 201, JSON.stringify(started.body));
  await until('the service to listen', async () => {
    const r = await s.api('GET', `/v1/sessions/${id}/services/web`, undefined, auth);
    return r.body.port !== null;
  });
  const shared = await s.api('POST', `/v1/sessions/${id}/services/web/preview`, {}, auth);
  const link = new URL((shared.body as { url: string }).url);
  assert.match(link.href, /^http:\/\/[0-9a-z-]{1,63}\.previews\.test\/$/, 'a host of its own, its token a DNS label');
  const host = link.host;
  const token = host.split('.')[0]!;

  // At the root of its origin, every path is the service's (the gateway's own paths too), with its own credentials.
  const page = await viaHost(s.url, host, '/v1/sessions?x=1', { cookie: 'app=1', authorization: 'Basic dTpw' });
  assert.equal(page.status, 200, page.body);
  const seen = JSON.parse(page.body) as { path: string; headers: Record<string, string> };
  assert.equal(seen.path, '/v1/sessions?x=1');
  assert.equal(seen.headers.cookie, 'app=1', "the origin's cookies are the service's own");
  assert.equal(seen.headers.authorization, 'Basic dTpw');
  assert.equal(seen.headers['x-forwarded-host'], host);
  assert.equal(seen.headers['x-forwarded-prefix'], undefined, 'served at the root');
  // Its headers act on its own origin only: passed, but cookies kept to its host; no sandbox needed.
  const own = await viaHost(s.url, host, '/origin-headers');
  assert.deepEqual(own.headers['set-cookie'], ['flood=1; Path=/', 'more=2; Path=/; Max-Age=99999', 'wide=3; Path=/']);
  assert.equal(own.headers['clear-site-data'], '"storage", "cookies"');
  assert.equal(own.headers['content-security-policy'], undefined);
  assert.equal(await echo(`${s.url.replace(/^http/, 'ws')}/ws`, 'own origin', { host }), 'echo: OWN ORIGIN');

  // Nothing of the gateway is served on a preview host: a host that is no link is refused, key or not.
  const other = await viaHost(s.url, 'nothing.previews.test', '/v1/sessions', auth);
  assert.equal(other.status, 403);
  assert.equal(JSON.parse(other.body).code, 'forbidden');
  // On the gateway's origin a link's /preview/ path leads to its host; the API is there as ever.
  const moved = await fetch(`${s.url}/preview/${token}/page?q=1`, { redirect: 'manual' });
  assert.equal(moved.status, 308);
  assert.equal(moved.headers.get('location'), `http://${host}/page?q=1`);
  assert.equal((await s.api('GET', `/v1/sessions/${id}/services/web`, undefined, auth)).status, 200);
});

const runsc =
  TEST_BACKEND === 'docker' && 'runsc' in ((await new Dockerode().info()) as { Runtimes?: object }).Runtimes!;

test(
  'services under gVisor: the gateway reaches the socket the sandbox made (runsc with --host-uds=all, as setup.sh registers it)',
  { skip: runsc ? false : 'the Docker engine has no runsc runtime (docker info)' },
  async (t) => {
    const s = await startStack({ env: { SANDGATE_RUNTIME: 'runsc' } });
    t.after(() => s.close());
    const id = (await s.api('POST', '/v1/sessions', {})).body.id as string;
    const started = await s.api('POST', `/v1/sessions/${id}/services`, {
      name: 'web',
      command: 'echo under gvisor > index.html; exec python3 -m http.server 8000',
    });
    assert.equal(started.body.state, 'running', JSON.stringify(started.body));
    const svc = await until('its port', async () => {
      const r = await s.api('GET', `/v1/sessions/${id}/services/web`);
      return r.body.port !== null && r.body;
    });
    const page = await fetch(`${svc.proxy_url}index.html`);
    assert.equal(await page.text(), 'under gvisor\n');
  },
);
