import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fieldMatcher, labelMatcher, POD_FIELDS } from './selectors.ts';
import { ApiError } from './status.ts';

const labels = { app: 'sandgate', 'org.sandgate.kind': 'execution', tier: 'a' };

test('label selectors: equality, inequality, sets and existence', () => {
  assert.equal(labelMatcher('app=sandgate')(labels), true);
  assert.equal(labelMatcher('app==sandgate,tier=b')(labels), false);
  assert.equal(labelMatcher('tier!=b')(labels), true);
  assert.equal(labelMatcher('missing!=b')(labels), true, '!= matches objects without the key');
  assert.equal(labelMatcher('org.sandgate.kind in (execution, pool)')(labels), true);
  assert.equal(labelMatcher('tier notin (a,b)')(labels), false);
  assert.equal(labelMatcher('app,!missing')(labels), true);
  assert.equal(labelMatcher('!app')(labels), false);
  assert.equal(labelMatcher('')(labels), true);
  assert.equal(labelMatcher('app=sandgate')(undefined), false);
});

test('label selectors: a malformed selector is a 400 BadRequest', () => {
  for (const bad of ['a=b c', 'a in x', 'bad key=1', 'a=(b']) {
    assert.throws(
      () => labelMatcher(bad),
      (e: unknown) => e instanceof ApiError && e.code === 400 && /unable to parse requirement/.test(e.message),
      bad,
    );
  }
});

test('field selectors: supported fields only', () => {
  const pod = { metadata: { name: 'p', namespace: 'ns' }, status: { phase: 'Running' } };
  assert.equal(fieldMatcher('status.phase=Running,metadata.name=p', POD_FIELDS)(pod), true);
  assert.equal(fieldMatcher('status.phase!=Running', POD_FIELDS)(pod), false);
  assert.equal(fieldMatcher('spec.nodeName=', POD_FIELDS)(pod), true, 'an absent field is the empty string');
  assert.throws(() => fieldMatcher('metadata.labels=x', POD_FIELDS), /field label not supported: metadata.labels/);
});
