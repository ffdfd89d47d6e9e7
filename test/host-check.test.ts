import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './redis-and-ports.ts';
import { startStack } from './harness.ts';

const GATEWAY_MAIN = fileURLToPath(new URL('../apps/gateway/src/main.ts', import.meta.url));

/** A real HTTP request with the Host (and Origin) a browser would send for a page on another name. */
function get(url: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => {
        text += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('open mode answers only to its own host names and origins (DNS rebinding, cross-site requests)', async (t) => {
  const s = await startStack({ worker: false, env: { SANDGATE_ALLOWED_HOSTS: 'sandgate.internal,10.1.2.3:9999' } });
  t.after(() => s.close());
  const port = new URL(s.url).port;
  const cases: [string, Record<string, string>, number, string | null][] = [
    ['a rebound name', { host: `evil.example:${port}` }, 421, 'host_not_allowed'],
    ['a rebound name that looks like loopback', { host: `127.0.0.1.evil.example:${port}` }, 421, 'host_not_allowed'],
    ['an address of another interface', { host: `10.9.9.9:${port}` }, 421, 'host_not_allowed'],
    ['127.0.0.1', { host: `127.0.0.1:${port}` }, 200, null],
    ['localhost', { host: `localhost:${port}` }, 200, null],
    ['[::1]', { host: `[::1]:${port}` }, 200, null],
    ['an allowed host on any port', { host: 'sandgate.internal:8443' }, 200, null],
    ['an allowed host:port', { host: '10.1.2.3:9999' }, 200, null],
    ['an allowed host on another port', { host: '10.1.2.3:80' }, 421, 'host_not_allowed'],
    ['a foreign origin', { host: `127.0.0.1:${port}`, origin: 'http://evil.example' }, 403, 'origin_not_allowed'],
    ['a null origin', { host: `127.0.0.1:${port}`, origin: 'null' }, 403, 'origin_not_allowed'],
    ['a loopback origin', { host: `127.0.0.1:${port}`, origin: 'http://localhost:3000' }, 200, null],
    ['the public origin', { host: `127.0.0.1:${port}`, origin: s.config.publicUrl }, 200, null],
    ['an allowed host as origin', { host: `127.0.0.1:${port}`, origin: 'https://sandgate.internal' }, 200, null],
    ['an allowed host:port as origin', { host: `127.0.0.1:${port}`, origin: 'http://10.1.2.3:9999' }, 200, null],
    ['a lookalike origin', { host: `127.0.0.1:${port}`, origin: 'http://127.0.0.1.nip.io' }, 403, 'origin_not_allowed'],
  ];
  for (const [what, headers, status, code] of cases) {
    const r = await get(s.url, '/v1/sessions', headers);
    assert.equal(r.status, status, `${what}: ${JSON.stringify(r.body)}`);
    if (code) assert.equal(r.body.code, code, what);
  }
  assert.equal((await get(s.url, '/healthz', { host: 'evil.example' })).status, 200, 'health probes may use any host');
});

test('with API keys the host check is off until SANDGATE_ALLOWED_HOSTS is set', async (t) => {
  const key = 'k'.repeat(32);
  const s = await startStack({ worker: false, env: { SANDGATE_API_KEYS: `${key}:acme` } });
  t.after(() => s.close());
  const r = await get(s.url, '/v1/sessions', { host: 'gateway.example:80', authorization: `Bearer ${key}` });
  assert.equal(r.status, 200, 'a keyed deployment behind any name works as before');
});

test('open mode refuses a host name that starts with 127. but resolves elsewhere', async (t) => {
  // A mount namespace of the child's own gives it an /etc/hosts where 127.attacker.test is 0.0.0.0 (every interface).
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-hosts-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'hosts'), '0.0.0.0 127.attacker.test\n');
  const port = await freePort();
  const child = spawn(
    'unshare',
    [
      '--mount',
      '--',
      'sh',
      '-c',
      `mount --bind ${join(dir, 'hosts')} /etc/hosts && exec "$0" "$@"`,
      process.execPath,
      '--import',
      'tsx',
      GATEWAY_MAIN,
    ],
    {
      env: {
        ...process.env,
        SANDGATE_HOST: '127.attacker.test',
        SANDGATE_PORT: String(port),
        SANDGATE_REDIS_PREFIX: `sghost${port}`,
        SANDGATE_DATA_DIR: dir,
        SANDGATE_LOG_LEVEL: 'silent',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const exited = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => resolve(null), 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
  assert.equal(
    exited,
    1,
    `the gateway should refuse to start; it ${exited === null ? 'kept running' : `exited ${exited}`}: ${stderr}`,
  );
  assert.match(stderr, /refusing to listen on 127\.attacker\.test \(it resolves to 0\.0\.0\.0\)/);
});
