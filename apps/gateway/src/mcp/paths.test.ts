import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SandgateError } from '@sandgate/contracts';
import { UrlSigner } from '@sandgate/storage';
import { checkSessionId, mcpArtifact, sandboxPath, sessionPath } from './paths.ts';

const code = (expected: string) => (e: unknown) => e instanceof SandgateError && e.code === expected;

test('sessionPath takes paths under /mnt/data/ or relative ones, and refuses everything else', () => {
  assert.equal(sessionPath('/mnt/data/chart.png'), 'chart.png');
  assert.equal(sessionPath('chart.png'), 'chart.png');
  assert.equal(sessionPath('/mnt/data/out/report.pdf'), 'out/report.pdf');
  for (const bad of [
    '/etc/passwd',
    '/mnt/data',
    '/mnt/data/',
    '/mnt/database.csv',
    '../x',
    'a/../../x',
    '/mnt/data/../x',
    '/mnt/data//x',
    'a\\b',
    '.sandgate-tmp-x',
    '',
  ]) {
    assert.throws(() => sessionPath(bad), code('invalid_path'), bad);
  }
});

test('sandboxPath and mcpArtifact show files as the sandbox sees them, with a signed URL', () => {
  assert.equal(sandboxPath('a/b.csv'), '/mnt/data/a/b.csv');
  const signer = new UrlSigner({ key: Buffer.alloc(32, 1), publicUrl: 'http://127.0.0.1:1', ttlSeconds: 60 });
  const a = mcpArtifact(signer, 'sess_0123456789ab', { path: 'out/chart.png', size: 12 });
  assert.deepEqual(
    { ...a, download_url: undefined },
    {
      path: '/mnt/data/out/chart.png',
      filename: 'chart.png',
      size_bytes: 12,
      mime_type: 'image/png',
      download_url: undefined,
    },
  );
  const url = new URL(a.download_url);
  assert.equal(url.pathname, '/files/sess_0123456789ab/out/chart.png');
  const [expires, sig] = [url.searchParams.get('expires') ?? '', url.searchParams.get('sig') ?? ''];
  assert.ok(signer.verify('sess_0123456789ab', 'out/chart.png', expires, sig));
});

test('a session id that cannot exist is session_not_found, as the contract words it', () => {
  assert.equal(checkSessionId('sess_0123456789ab'), 'sess_0123456789ab');
  for (const bad of ['sess_123', 'sess_0123456789AB', '../sess_0123456789ab', 'x'.repeat(64)]) {
    assert.throws(() => checkSessionId(bad), code('session_not_found'), bad);
  }
});
