import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { code } from './hostile-fixture.ts';
import { UrlSigner } from './url-signer.ts';

const key = randomBytes(32);
const signer = new UrlSigner({ key, publicUrl: 'https://sg.example.com/', ttlSeconds: 600 });
const NOW = 1_700_000_000_000;
const SESSION = 'sess_0123456789ab';

/** Splits a download URL back into what the gateway's route would hand to verify(). */
function parse(url: string): { session: string; path: string; expires: string | undefined; sig: string | undefined } {
  const u = new URL(url);
  const [, files, session, ...segments] = u.pathname.split('/');
  assert.equal(files, 'files');
  return {
    session: decodeURIComponent(session ?? ''),
    path: segments.map(decodeURIComponent).join('/'),
    expires: u.searchParams.get('expires') ?? undefined,
    sig: u.searchParams.get('sig') ?? undefined,
  };
}

test('round trip: a fresh URL verifies, with each segment encoded', () => {
  const url = signer.downloadUrl(SESSION, 'out dir/r#1?.csv', NOW);
  assert.match(
    url,
    /^https:\/\/sg\.example\.com\/files\/sess_0123456789ab\/out%20dir\/r%231%3F\.csv\?expires=1700000600&sig=[A-Za-z0-9_-]{43}$/,
  );
  const p = parse(url);
  assert.equal(p.path, 'out dir/r#1?.csv');
  assert.equal(signer.verify(p.session, p.path, p.expires, p.sig, NOW), true);
  assert.equal(signer.verify(p.session, p.path, p.expires, p.sig, NOW + 599_000), true);
  const unicode = parse(signer.downloadUrl(SESSION, 'résumé/日本.pdf', NOW));
  assert.equal(signer.verify(unicode.session, unicode.path, unicode.expires, unicode.sig, NOW), true);
});

test('tampering with path, session, expiry or signature fails', () => {
  const p = parse(signer.downloadUrl(SESSION, 'out/chart.png', NOW));
  assert.equal(signer.verify(p.session, 'out/other.png', p.expires, p.sig, NOW), false);
  assert.equal(signer.verify(p.session, 'out/chart.pn', p.expires, p.sig, NOW), false);
  assert.equal(signer.verify('sess_0123456789ac', p.path, p.expires, p.sig, NOW), false);
  assert.equal(signer.verify(p.session, p.path, String(Number(p.expires) + 1), p.sig, NOW), false);
  assert.equal(signer.verify(p.session, p.path, `${p.expires}0`, p.sig, NOW), false);
  const flipped = `${p.sig?.startsWith('A') ? 'B' : 'A'}${p.sig?.slice(1)}`;
  assert.equal(signer.verify(p.session, p.path, p.expires, flipped, NOW), false);
  const other = new UrlSigner({ key: randomBytes(32), publicUrl: 'https://sg.example.com', ttlSeconds: 600 });
  assert.equal(other.verify(p.session, p.path, p.expires, p.sig, NOW), false);
});

test('expired URLs fail', () => {
  const p = parse(signer.downloadUrl(SESSION, 'a.txt', NOW));
  assert.equal(signer.verify(p.session, p.path, p.expires, p.sig, NOW + 600_000), false);
  assert.equal(signer.verify(p.session, p.path, p.expires, p.sig, NOW + 10 * 86_400_000), false);
});

test('malformed input is rejected without throwing', () => {
  const p = parse(signer.downloadUrl(SESSION, 'a.txt', NOW));
  const bad: Array<[string, string, string | undefined, string | undefined]> = [
    [p.session, p.path, undefined, p.sig],
    [p.session, p.path, p.expires, undefined],
    [p.session, p.path, '', ''],
    [p.session, p.path, '-1', p.sig],
    [p.session, p.path, '1e12', p.sig],
    [p.session, p.path, ' 1700000600', p.sig],
    [p.session, p.path, p.expires, `${p.sig}=`],
    [p.session, p.path, p.expires, 'x'.repeat(100_000)],
    [p.session, '../a.txt', p.expires, p.sig],
    [p.session, '/a.txt', p.expires, p.sig],
    [p.session, '', p.expires, p.sig],
    ['', p.path, p.expires, p.sig],
    [p.session, 'a\u0000.txt', p.expires, p.sig],
  ];
  for (const args of bad) assert.equal(signer.verify(...args, NOW), false, JSON.stringify(args).slice(0, 120));
  // @ts-expect-error: a route may hand over whatever a query parser produced
  assert.equal(signer.verify(p.session, p.path, [p.expires], p.sig, NOW), false);
});

test('refuses to sign a path no client could use', () => {
  assert.throws(() => signer.downloadUrl(SESSION, '../etc/passwd', NOW), code('invalid_path'));
  assert.throws(() => signer.downloadUrl(SESSION, '.sandgate-tmp-1', NOW), code('invalid_path'));
});

test('grants: signed for one purpose and subject, until they expire; no download signature stands for one', () => {
  const signer = new UrlSigner({ key: randomBytes(32), publicUrl: 'https://sg.example', ttlSeconds: 600 });
  const now = 1_700_000_000_000;
  const { expires, sig } = signer.signGrant('terminal', 'sess_0123456789ab', 60, now);
  assert.equal(Number(expires), now / 1000 + 60);
  assert.equal(signer.verifyGrant('terminal', 'sess_0123456789ab', expires, sig, now), true);
  assert.equal(signer.verifyGrant('terminal', 'sess_0123456789ac', expires, sig, now), false, 'another subject');
  assert.equal(signer.verifyGrant('preview', 'sess_0123456789ab', expires, sig, now), false, 'another purpose');
  assert.equal(signer.verifyGrant('terminal', 'sess_0123456789ab', String(Number(expires) + 1), sig, now), false);
  assert.equal(signer.verifyGrant('terminal', 'sess_0123456789ab', expires, sig, now + 60_000), false, 'expired');
  assert.equal(signer.verifyGrant('terminal', 'sess_0123456789ab', expires, undefined, now), false);
  const download = new URL(signer.downloadUrl('sess_0123456789ab', 'x', now));
  const [e, s] = [download.searchParams.get('expires')!, download.searchParams.get('sig')!];
  assert.equal(signer.verifyGrant('terminal', 'sess_0123456789ab', e, s, now), false);
  assert.equal(signer.verify('sess_0123456789ab', '', expires, sig, now), false, 'a grant downloads nothing');
});
