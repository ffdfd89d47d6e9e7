import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, configWarnings, loadConfig, parseBytes } from './config.ts';
import { egressEntries } from './egress.ts';

test('defaults need nothing else', () => {
  const c = loadConfig({});
  assert.equal(c.redisUrl, 'redis://127.0.0.1:6379');
  assert.equal(c.memoryMb, 512);
  assert.equal(c.maxOutputBytes, 100_000);
  assert.equal(c.maxUploadBytes, 50_000_000);
  assert.equal(c.execTimeoutMs, 60_000);
  assert.equal(c.sessionTtlSeconds, 7 * 86_400);
  assert.equal(c.sessionIdlePauseSeconds, 300);
  assert.equal(c.undoDepth, 5);
  assert.equal(c.maxSnapshots, 10);
  assert.equal(c.host, '127.0.0.1');
  assert.equal(c.publicUrl, 'http://127.0.0.1:8080');
  assert.deepEqual(c.apiKeys, {});
});

test('sizes, durations and keys are parsed', () => {
  assert.equal(parseBytes('512m'), 512 << 20);
  assert.equal(parseBytes('50MB'), 50_000_000);
  assert.equal(parseBytes('100 KiB'), 102_400);
  assert.ok(Number.isNaN(parseBytes('lots')));
  const c = loadConfig({
    SANDGATE_EXEC_TIMEOUT_S: '2.5',
    SANDGATE_API_KEYS: 'abcdefghijklmnop:acme, qrstuvwxyz012345:beta',
    SANDGATE_PUBLIC_URL: 'https://sg.example.test',
  });
  assert.equal(c.execTimeoutMs, 2500);
  assert.deepEqual(c.apiKeys, { abcdefghijklmnop: 'acme', qrstuvwxyz012345: 'beta' });
  assert.equal(c.publicUrl, 'https://sg.example.test');
});

test('one error names every bad variable', () => {
  let err: unknown;
  try {
    loadConfig({
      SANDGATE_MEMORY_LIMIT: 'lots',
      SANDGATE_RUNTIME: 'kata',
      SANDGATE_PORT: '99999',
      SANDGATE_API_KEYS: 'short:acme',
      SANDGATE_DATA_DIR: 'relative/dir',
      SANDGATE_BACKEND: 'nomad',
      SANDGATE_PUBLIC_URL: 'ftp://x/',
    });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ConfigError);
  const text = err.message;
  for (const name of ['SANDGATE_MEMORY_LIMIT', 'SANDGATE_API_KEYS']) assert.match(text, new RegExp(name));
  // Parse errors are reported first; the schema pass then names the rest.
  let err2: unknown;
  try {
    loadConfig({
      SANDGATE_RUNTIME: 'kata',
      SANDGATE_PORT: '99999',
      SANDGATE_DATA_DIR: 'relative/dir',
      SANDGATE_BACKEND: 'nomad',
      SANDGATE_PUBLIC_URL: 'ftp://x/',
    });
  } catch (e) {
    err2 = e;
  }
  assert.ok(err2 instanceof ConfigError);
  for (const name of [
    'SANDGATE_RUNTIME',
    'SANDGATE_PORT',
    'SANDGATE_DATA_DIR',
    'SANDGATE_BACKEND',
    'SANDGATE_PUBLIC_URL',
  ]) {
    assert.match(err2.message, new RegExp(name), `${name} in ${err2.message}`);
  }
});

test('operator keys, the metrics port, timeouts and the log format', () => {
  const d = loadConfig({});
  assert.deepEqual(
    [d.operatorKeys, d.metricsPort, d.metricsHost, d.requestTimeoutMs, d.shutdownGraceMs, d.logFormat],
    [[], null, '127.0.0.1', 300_000, 30_000, null],
  );
  const c = loadConfig({
    SANDGATE_OPERATOR_KEYS: 'op-key-0123456789ab, op-key-ba9876543210',
    SANDGATE_METRICS_PORT: '9464',
    SANDGATE_REQUEST_TIMEOUT_S: '2.5',
    SANDGATE_SHUTDOWN_GRACE_S: '0',
    SANDGATE_LOG_FORMAT: 'json',
  });
  assert.deepEqual(c.operatorKeys, ['op-key-0123456789ab', 'op-key-ba9876543210']);
  assert.deepEqual([c.metricsPort, c.requestTimeoutMs, c.shutdownGraceMs, c.logFormat], [9464, 2500, 0, 'json']);
  let err: unknown;
  try {
    loadConfig({ SANDGATE_OPERATOR_KEYS: 'op-key-0123456789ab,tooshortsecret', SANDGATE_LOG_FORMAT: 'xml' });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ConfigError);
  assert.match(err.message, /SANDGATE_OPERATOR_KEYS: operator key #2 is shorter than 16 characters/);
  assert.doesNotMatch(err.message, /tooshortsecret/, 'a key is never printed');
  let err2: unknown;
  try {
    loadConfig({ SANDGATE_LOG_FORMAT: 'xml' });
  } catch (e) {
    err2 = e;
  }
  assert.match((err2 as Error).message, /SANDGATE_LOG_FORMAT/);
});

test('SANDGATE_EGRESS: allow-lists per tenant, checked, on either backend', () => {
  const c = loadConfig({ SANDGATE_EGRESS: '{"acme": ["pypi.org", "*.pythonhosted.org", "10.0.0.5:5432"]}' });
  assert.deepEqual(egressEntries(c.egress, 'acme'), ['pypi.org', '*.pythonhosted.org', '10.0.0.5:5432']);
  assert.deepEqual(egressEntries(c.egress, 'beta'), []);
  assert.throws(() => loadConfig({ SANDGATE_EGRESS: '{"acme": ["http://pypi.org/"]}' }), /SANDGATE_EGRESS/);
  const k8s = loadConfig({
    SANDGATE_EGRESS: '{"acme": ["pypi.org"]}',
    SANDGATE_BACKEND: 'kubernetes',
    SANDGATE_K8S_GATEWAY_URL: 'http://gw:8080',
  });
  assert.deepEqual(egressEntries(k8s.egress, 'acme'), ['pypi.org']);
});

test('SANDGATE_PREVIEW_ORIGIN: previews on hosts of their own, one label under a domain', () => {
  assert.equal(loadConfig({}).previewOrigin, null);
  assert.deepEqual(loadConfig({ SANDGATE_PREVIEW_ORIGIN: 'https://{preview}.Previews.Example.com' }).previewOrigin, {
    scheme: 'https',
    base: 'previews.example.com',
    port: '',
  });
  assert.deepEqual(loadConfig({ SANDGATE_PREVIEW_ORIGIN: 'http://{preview}.localhost:8080/' }).previewOrigin, {
    scheme: 'http',
    base: 'localhost',
    port: '8080',
  });
  const problems = (env: Record<string, string>): string[] => {
    try {
      loadConfig(env);
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      return e.problems;
    }
    return [];
  };
  for (const bad of [
    'https://previews.example.com',
    'https://{preview}previews.example.com',
    'ftp://{preview}.example.com',
    'https://{preview}.127.0.0.1',
    'https://{preview}.example.com:99999',
    'https://{preview}.example.com/path',
    'https://{preview}.-bad-.com',
  ]) {
    const listed = problems({ SANDGATE_PREVIEW_ORIGIN: bad, SANDGATE_PORT: 'x' });
    assert.equal(listed.length, 2, `${bad}: ${listed.join('; ')}`);
    // One error lists it beside every other bad variable.
    assert.deepEqual(listed.map((p) => p.split(':')[0]).sort(), ['SANDGATE_PORT', 'SANDGATE_PREVIEW_ORIGIN']);
  }
  // A host the gateway answers as itself must not look like a preview's: requests to it would never reach the API.
  const origin = { SANDGATE_PREVIEW_ORIGIN: 'https://{preview}.previews.example.com' };
  assert.deepEqual(
    problems({ ...origin, SANDGATE_PUBLIC_URL: 'https://gw.previews.example.com', SANDGATE_ALLOWED_HOSTS: 'a.b.com' }),
    [
      'SANDGATE_PREVIEW_ORIGIN: gw.previews.example.com (SANDGATE_PUBLIC_URL) would be taken for a preview; use another domain',
    ],
  );
  assert.match(problems({ ...origin, SANDGATE_ALLOWED_HOSTS: 'x.previews.example.com:8443' }).join(), /ALLOWED_HOSTS/);
  assert.deepEqual(problems({ ...origin, SANDGATE_PUBLIC_URL: 'https://previews.example.com' }), []);
  assert.deepEqual(problems({ ...origin, SANDGATE_PUBLIC_URL: 'https://sandgate.example.com' }), []);
});

test('SANDGATE_REDIS_SENTINELS: Redis through Sentinel, checked at start', () => {
  const none = loadConfig({});
  assert.deepEqual(none.redisSentinels, []);
  assert.equal(none.redisSentinelName, 'mymaster');
  assert.equal(none.redisSentinelPassword, null);

  const c = loadConfig({
    SANDGATE_REDIS_SENTINELS: 'sentinel-0.redis:26379, 10.0.0.7:26380,[::1]:26381,sentinel-3',
    SANDGATE_REDIS_SENTINEL_NAME: 'sandgate-primary',
    SANDGATE_REDIS_SENTINEL_PASSWORD: 'sentinel secret',
    REDIS_URL: 'redis://:node-secret@ignored:6379/2',
  });
  assert.deepEqual(c.redisSentinels, [
    { host: 'sentinel-0.redis', port: 26379 },
    { host: '10.0.0.7', port: 26380 },
    { host: '::1', port: 26381 },
    { host: 'sentinel-3', port: 26379 },
  ]);
  assert.equal(c.redisSentinelName, 'sandgate-primary');
  assert.equal(c.redisSentinelPassword, 'sentinel secret');

  const problems = (env: Record<string, string>): string => {
    try {
      loadConfig(env);
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.message;
    }
    assert.fail('the configuration was accepted');
  };
  assert.match(problems({ SANDGATE_REDIS_SENTINELS: 'a:1,a:99999' }), /SANDGATE_REDIS_SENTINELS: port 99999 .*range/);
  assert.match(problems({ SANDGATE_REDIS_SENTINELS: '::1:26379' }), /SANDGATE_REDIS_SENTINELS: .*IPv6 .*brackets/);
  assert.match(problems({ SANDGATE_REDIS_SENTINELS: 'bad_host!:1' }), /"bad_host!" is not a host name/);
  assert.match(problems({ SANDGATE_REDIS_SENTINELS: 'a:1,a:1' }), /"a:1" is listed twice/);
  assert.match(problems({ SANDGATE_REDIS_SENTINELS: 'a:x' }), /"a:x" is not host:port/);
  assert.match(
    problems({ SANDGATE_REDIS_SENTINELS: 'a:1', SANDGATE_REDIS_SENTINEL_NAME: 'has space' }),
    /SANDGATE_REDIS_SENTINEL_NAME: /,
  );
  assert.match(
    problems({ SANDGATE_REDIS_SENTINELS: 'a:1', REDIS_URL: 'rediss://r:6380' }),
    /TLS .* not supported with Sentinel/,
  );
  assert.match(
    problems({ SANDGATE_REDIS_SENTINEL_PASSWORD: 'x' }),
    /SANDGATE_REDIS_SENTINEL_PASSWORD: set without SANDGATE_REDIS_SENTINELS/,
  );
});

test('SANDGATE_SESSION_TTL_M still sets the retention, with a warning; SANDGATE_SESSION_RETENTION_S wins', () => {
  assert.equal(loadConfig({ SANDGATE_SESSION_TTL_M: '30' }).sessionTtlSeconds, 1800);
  assert.match(configWarnings({ SANDGATE_SESSION_TTL_M: '30' })[0]!, /deprecated: it now sets the retention/);
  const both = { SANDGATE_SESSION_TTL_M: '30', SANDGATE_SESSION_RETENTION_S: '3600' };
  assert.equal(loadConfig(both).sessionTtlSeconds, 3600);
  assert.match(configWarnings(both)[0]!, /ignored/);
  assert.deepEqual(configWarnings({}), []);
  assert.throws(() => loadConfig({ SANDGATE_SESSION_TTL_M: 'soon' }), /SANDGATE_SESSION_RETENTION_S/);
});
