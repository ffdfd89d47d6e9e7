import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { previewSignatureOk, previewToken, readPreviewToken } from './preview-links.ts';

const key = randomBytes(32);
const claim = { sessionId: 'sess_0123456789ab', executionId: 'exec_0123456789abcdef', expires: 1_800_000_000 };
const binding = { name: 'web', revocations: 0 };

test('a token is a DNS label: lower-case letters, digits and dashes, at most 63 characters', () => {
  for (const expires of [1, 1_800_000_000, 36 ** 7 - 1]) {
    for (let i = 0; i < 50; i++) {
      const token = previewToken(randomBytes(32), { ...claim, expires }, binding);
      assert.match(token, /^[0-9a-z][0-9a-z-]{0,61}[0-9a-z]$/, token);
    }
  }
});

test('a token reads back as its claim, and its signature holds for its binding only', () => {
  const token = previewToken(key, claim, binding);
  const read = readPreviewToken(token)!;
  assert.deepEqual({ ...read, signature: undefined }, { ...claim, signature: undefined });
  assert.equal(previewSignatureOk(key, read, binding), true);
  assert.equal(previewSignatureOk(key, read, { name: 'web', revocations: 1 }), false, 'revoked');
  assert.equal(previewSignatureOk(key, read, { name: 'api', revocations: 0 }), false, 'another service');
  assert.equal(previewSignatureOk(randomBytes(32), read, binding), false, 'another deployment');
  for (const changed of [
    { ...read, executionId: 'exec_0123456789abcdee' },
    { ...read, sessionId: 'sess_0123456789aa' },
    { ...read, expires: read.expires + 1 },
  ]) {
    assert.equal(previewSignatureOk(key, changed, binding), false, JSON.stringify(changed));
  }
});

test('anything else is no token', () => {
  const token = previewToken(key, claim, binding);
  for (const bad of [
    '',
    token.toUpperCase(),
    `${token}0`,
    token.replace(/-/g, '.'),
    'sess_0123456789ab.web.1800000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
  ]) {
    assert.equal(readPreviewToken(bad), undefined, bad);
  }
});
