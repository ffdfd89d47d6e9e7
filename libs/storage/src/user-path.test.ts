import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isSandgateError } from '@sandgate/contracts';
import { normalizeUserPath, splitPath } from './user-path.ts';

function rejects(p: string, detail: RegExp): void {
  assert.throws(
    () => normalizeUserPath(p),
    (e: unknown) => {
      assert.ok(isSandgateError(e), `expected a SandgateError for ${JSON.stringify(p)}`);
      assert.equal(e.code, 'invalid_path');
      assert.match(e.message, detail);
      return true;
    },
    `should reject ${JSON.stringify(p)}`,
  );
}

test('accepts ordinary relative paths unchanged', () => {
  for (const p of [
    'a.csv',
    'out/chart.png',
    'a/b/c/d.txt',
    'résumé.pdf',
    '日本.txt',
    '.hidden',
    'a..b',
    '...',
    'x/.sandgat',
    'sandgate/.x',
    'a b/c d.txt',
    'a'.repeat(255),
    Array(32).fill('d').join('/'),
  ]) {
    assert.equal(normalizeUserPath(p), p);
  }
});

test('rejects traversal with ".." and "."', () => {
  for (const p of ['..', '../x', 'a/../b', 'a/..', '.', './a', 'a/./b', 'a/.']) rejects(p, /"\." and "\.\."/);
});

test('rejects absolute paths', () => {
  for (const p of ['/etc/passwd', '/', '//x']) rejects(p, /relative/);
});

test('rejects backslashes, NUL and control characters', () => {
  rejects('a\\b', /backslash/);
  rejects('..\\..\\windows', /backslash/);
  for (const p of ['a\u0000b', 'a\nb', 'a\rb', 'tab\there', 'del\u007f', 'c1\u0085', 'x/\u001b[31m'])
    rejects(p, /control/);
  rejects('a\uD800b', /surrogate/);
});

test('rejects empty paths and empty segments', () => {
  rejects('', /empty/);
  for (const p of ['a//b', 'a/', 'a/b/']) rejects(p, /empty segment/);
  // @ts-expect-error: untyped callers (JSON bodies) may send anything
  rejects(undefined, /empty/);
});

test('rejects names reserved by sandgate in any segment', () => {
  for (const p of ['.sandgate', '.sandgate-x', '.sandgate-tmp-abc', 'a/.sandgate-x/b', 'a/.sandgatefoo'])
    rejects(p, /reserved/);
});

test('rejects over-long segments, too many segments and over-long paths', () => {
  rejects('a'.repeat(256), /255 bytes/);
  rejects('é'.repeat(128), /255 bytes/); // 256 bytes in UTF-8, 128 characters
  rejects(Array(33).fill('d').join('/'), /32 segments/);
  rejects(Array(5).fill('a'.repeat(250)).join('/'), /1024 bytes/);
  rejects('x'.repeat(1_000_000), /1024 bytes/);
});

test('splitPath separates parents from the leaf', () => {
  assert.deepEqual(splitPath('a/b/c.txt'), { parents: ['a', 'b'], leaf: 'c.txt' });
  assert.deepEqual(splitPath('c.txt'), { parents: [], leaf: 'c.txt' });
});
