import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { networkInterfaces } from 'node:os';
import type { Socket } from 'node:net';
import { startStack, TEST_BACKEND, until } from './harness.ts';
import { b64, mcpClient, structured } from './mcp-client.ts';

/**
 * Network modes (docs/network.md): sandboxes have no network, except the sessions of a tenant SANDGATE_EGRESS
 * allows, which reach the listed hosts through sandgate's egress proxy and nothing else. A session marked private
 * (POST /v1/sessions/:id/private, or an upload with private=true) loses network for good: open connections are cut
 * at once, its sandbox is recreated without network, its files stay. Every server here is one this test opens.
 */

const ACME = 'a'.repeat(32);
/**
 * On Kubernetes a sandbox has a network interface and a default route, as every CNI gives a Pod, and what keeps its
 * packets from going anywhere is the chart's NetworkPolicy (on the test node, the node's firewall standing in for it:
 * scripts/kube-node.sh), which drops them: a connection times out. A Docker sandbox has no interface but loopback.
 */
const K8S = TEST_BACKEND === 'kubernetes';
const NO_WAY_OUT = K8S ? /^failed TimeoutError/ : /^failed OSError .*(unreachable|Network)/i;
const WAIT_S = K8S ? 4 : 10;
const GLOBEX = 'g'.repeat(32);

interface TestServer {
  server: Server;
  port: number;
  /** Connections open right now. */
  open: Set<Socket>;
}

async function listen(host: string, body: string): Promise<TestServer> {
  const open = new Set<Socket>();
  const server = createServer((_req, res) => res.end(body));
  server.on('connection', (s: Socket) => {
    open.add(s);
    s.once('close', () => open.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return { server, port: (server.address() as { port: number }).port, open };
}

/** An address of this machine that is not loopback: where a sandbox with a route out would reach the host. */
const hostAddress = (): string =>
  Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal)!.address;

/**
 * Python that prints one line per attempt: what the allowed server said, or why there was no answer. The attempts run
 * side by side, so that three that time out take one timeout.
 */
const probes = (allowed: number, other: number, host: string) =>
  [
    'import concurrent.futures, socket, urllib.request',
    'def attempt(label, fn):',
    '    try:',
    '        return "%s ok %s" % (label, fn())',
    '    except Exception as e:',
    '        return "%s failed %s %s" % (label, type(e).__name__, str(e)[:120].replace("\\n", " "))',
    'def direct():',
    '    s = socket.socket(); s.settimeout(3)',
    `    s.connect(("${host}", ${other}))`,
    '    return "connected"',
    'with concurrent.futures.ThreadPoolExecutor(3) as pool:',
    '    for line in pool.map(lambda a: attempt(*a), [',
    `        ("allowed", lambda: urllib.request.urlopen("http://${host}:${allowed}/", timeout=${WAIT_S}).read().decode()),`,
    `        ("other", lambda: urllib.request.urlopen("http://${host}:${other}/", timeout=${WAIT_S}).read().decode()),`,
    '        ("direct", direct),',
    '    ]):',
    '        print(line)',
  ].join('\n');

/** The lines of probes(): label → the rest of its line. */
const outcome = (stdout: string): Record<string, string> =>
  Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((l) => [l.split(' ')[0]!, l.slice(l.indexOf(' ') + 1)]),
  );

test('network modes: egress through the proxy to allowed hosts only; the private ratchet cuts it for good', async (t) => {
  const allowed = await listen('0.0.0.0', 'hello from the allowed server');
  const other = await listen('0.0.0.0', 'the other server');
  t.after(async () => {
    for (const { server } of [allowed, other]) {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
  const host = hostAddress();
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${ACME}:acme,${GLOBEX}:globex`,
      // The host's own address (programs in a sandbox reach their own loopback directly, as NO_PROXY says),
      // loopback for the tunnels below, and a name that resolves to loopback.
      SANDGATE_EGRESS: JSON.stringify({ acme: [`${host}:${allowed.port}`, `127.0.0.1:${allowed.port}`, 'localhost'] }),
      SANDGATE_EGRESS_MAX_CONNECTIONS: '3',
    },
  });
  t.after(() => s.close());
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const session = async (key: string, mode = 'process') => {
    const r = await s.api('POST', '/v1/sessions', { mode }, as(key));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body as { id: string; network: string; private: boolean };
  };
  const run = async (key: string, body: Record<string, unknown>) => {
    const r = await s.api('POST', '/v1/executions?wait=60', { language: 'python', ...body }, as(key));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.result?.state, 'completed', JSON.stringify(r.body.result));
    return r.body.result as { stdout: string; stderr: string };
  };
  const probe = async (key: string, sessionId?: string) =>
    outcome(
      (
        await run(key, {
          code: probes(allowed.port, other.port, host),
          ...(sessionId ? { session_id: sessionId } : {}),
        })
      ).stdout,
    );

  await t.test(
    'a session of an allowed tenant reaches the allowed host through the proxy, and nothing else',
    async () => {
      const sess = await session(ACME);
      assert.deepEqual([sess.network, sess.private], ['egress', false]);
      const seen = await probe(ACME, sess.id);
      assert.equal(seen.allowed, 'ok hello from the allowed server');
      assert.match(seen.other!, /^failed HTTPError .*403/, 'the proxy refuses a host not on the list');
      assert.match(seen.direct!, NO_WAY_OUT, 'no way out but the proxy');
    },
  );

  await t.test('HTTPS goes by CONNECT, checked the same way; a name is checked after it is resolved', async () => {
    const sess = await session(ACME);
    const r = await run(ACME, {
      session_id: sess.id,
      code: [
        'import http.client, os',
        // Docker: the session's own proxy socket, nothing of other sessions'. Kubernetes: no socket at all.
        K8S
          ? 'print(os.path.exists("/run/sandgate/egress"), os.environ["HTTPS_PROXY"])'
          : 'print(sorted(os.listdir("/run/sandgate/egress")), os.environ["HTTPS_PROXY"])',
        'def tunnel(port):',
        '    c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=10)',
        '    c.set_tunnel("127.0.0.1", port)',
        '    try:',
        '        c.request("GET", "/"); return c.getresponse().read().decode()',
        '    except OSError as e:',
        '        return str(e)',
        `print(tunnel(${allowed.port}))`,
        `print(tunnel(${other.port}))`,
        // localhost is listed by name (any port), but it resolves to loopback, which only an address entry allows.
        'c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=10)',
        `c.request("GET", "http://localhost:${other.port}/")`,
        'r = c.getresponse(); print(r.status, r.read().decode().strip())',
      ].join('\n'),
    });
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines[0], `${K8S ? 'False' : "['proxy.sock']"} http://127.0.0.1:3128`);
    assert.equal(lines[1], 'hello from the allowed server');
    assert.match(lines[2]!, /Tunnel connection failed: 403/);
    assert.match(lines[3]!, /^403 .*127\.0\.0\.1 is a loopback address, not listed/);
  });

  await t.test('a session holds at most SANDGATE_EGRESS_MAX_CONNECTIONS connections at once', async () => {
    const sess = await session(ACME);
    const r = await run(ACME, {
      session_id: sess.id,
      code: [
        'import socket',
        'held = []',
        'for i in range(4):',
        '    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)',
        `    s.sendall(b"CONNECT 127.0.0.1:${allowed.port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")`,
        '    print(s.recv(200).split(b"\\r\\n")[0].decode())',
        '    held.append(s)',
      ].join('\n'),
    });
    assert.deepEqual(r.stdout.trim().split('\n'), [
      'HTTP/1.1 200 Connection Established',
      'HTTP/1.1 200 Connection Established',
      'HTTP/1.1 200 Connection Established',
      'HTTP/1.1 429 Too Many Requests',
    ]);
  });

  await t.test('a tenant without egress, and every one-shot, have no network at all', async () => {
    const sess = await session(GLOBEX);
    assert.deepEqual([sess.network, sess.private], ['none', false]);
    for (const seen of [await probe(GLOBEX, sess.id), await probe(ACME)]) {
      assert.match(seen.allowed!, /^failed URLError/);
      assert.match(seen.other!, /^failed URLError/);
      assert.match(seen.direct!, NO_WAY_OUT);
    }
  });

  await t.test('marking a stateful session private cuts its open connections at once; files stay', async () => {
    const sess = await session(ACME, 'stateful');
    const opened = await run(ACME, {
      session_id: sess.id,
      code: [
        'import socket',
        'open("/mnt/data/kept.txt", "w").write("still here")',
        'held = socket.create_connection(("127.0.0.1", 3128), timeout=10)',
        `held.sendall(b"CONNECT 127.0.0.1:${allowed.port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")`,
        'print(held.recv(200).split(b"\\r\\n")[0].decode())',
      ].join('\n'),
    });
    assert.equal(opened.stdout.trim(), 'HTTP/1.1 200 Connection Established');
    await until('the tunnel to reach the allowed server', async () => allowed.open.size > 0);
    const marked = await s.api('POST', `/v1/sessions/${sess.id}/private`, undefined, as(ACME));
    assert.equal(marked.status, 200, JSON.stringify(marked.body));
    assert.deepEqual([marked.body.network, marked.body.private], ['none', true]);
    await until('the proxy to cut the open tunnel', async () => allowed.open.size === 0);
    const after = await run(ACME, {
      session_id: sess.id,
      code: `${probes(allowed.port, other.port, host)}\nprint("file", open("/mnt/data/kept.txt").read())`,
    });
    const seen = outcome(after.stdout);
    assert.match(seen.allowed!, /^failed URLError/);
    assert.match(seen.other!, /^failed URLError/);
    assert.match(seen.direct!, NO_WAY_OUT);
    assert.equal(seen.file, 'still here');
  });

  await t.test('an upload flagged private ratchets the session; a restart does not undo it', async () => {
    const sess = await session(ACME);
    assert.equal((await probe(ACME, sess.id)).allowed, 'ok hello from the allowed server');
    const up = await s.api(
      'POST',
      `/v1/sessions/${sess.id}/files?private=true`,
      { path: 'patients.csv', content_base64: Buffer.from('id,name\n1,A\n').toString('base64') },
      as(ACME),
    );
    assert.equal(up.status, 201, JSON.stringify(up.body));
    const restarted = await s.api('POST', `/v1/sessions/${sess.id}/restart`, undefined, as(ACME));
    assert.deepEqual([restarted.body.network, restarted.body.private], ['none', true]);
    const again = await s.api('POST', `/v1/sessions/${sess.id}/private`, undefined, as(ACME));
    assert.deepEqual([again.status, again.body.private], [200, true]);
    const seen = await probe(ACME, sess.id);
    assert.match(seen.allowed!, /^failed URLError/);
    assert.match(seen.other!, /^failed URLError/);
    const other = await s.api('POST', `/v1/sessions/${sess.id}/private`, undefined, as(GLOBEX));
    assert.equal(other.status, 404, "another tenant's session is not found");
  });

  await t.test('over MCP, upload_file with private: true ratchets the session it uploads to', async () => {
    const sess = await session(ACME);
    const { client } = await mcpClient(s, { apiKey: ACME });
    t.after(() => client.close());
    const up = await client.callTool({
      name: 'upload_file',
      arguments: { session_id: sess.id, filename: 'secret.txt', content_base64: b64('s3cret'), private: true },
    });
    assert.equal(structured(up).path, '/mnt/data/secret.txt', JSON.stringify(up));
    const now = await s.api('GET', `/v1/sessions/${sess.id}`, undefined, as(ACME));
    assert.deepEqual([now.body.network, now.body.private], ['none', true]);
  });
});
