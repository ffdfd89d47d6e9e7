import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as storage from '@sandgate/storage';

test('the package exports the agreed API by name', () => {
  for (const fn of [
    'normalizeUserPath',
    'openInside',
    'writeFileInside',
    'removeInside',
    'walkTree',
    'sha256Inside',
    'mimeFor',
    'contentTypeFor',
    'UrlSigner',
    'Workspaces',
  ]) {
    assert.equal(typeof (storage as Record<string, unknown>)[fn], 'function', fn);
  }
  assert.equal(storage.normalizeUserPath('a/b.csv'), 'a/b.csv');
});
