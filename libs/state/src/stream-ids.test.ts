import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compareStreamIds, isStreamId } from './stream-ids.ts';

test('stream ids order by time, then sequence, as numbers', () => {
  const sorted = [
    '0-0',
    '0-1',
    '0-10',
    '9-0',
    '10-0',
    '1795322361343-0',
    '1795322361343-2',
    '1795322361343-11',
    '18446744073709551615-0',
  ];
  for (let i = 0; i < sorted.length; i++) {
    for (let j = 0; j < sorted.length; j++) {
      assert.equal(compareStreamIds(sorted[i]!, sorted[j]!), Math.sign(i - j), `${sorted[i]} vs ${sorted[j]}`);
    }
  }
});

test('a Last-Event-ID with leading zeros is the id it names', () => {
  assert.ok(isStreamId('0001795322361343-007'));
  assert.equal(compareStreamIds('0001795322361343-007', '1795322361343-7'), 0);
  assert.equal(compareStreamIds('000-0', '0-0'), 0);
  assert.equal(compareStreamIds('09-0', '10-0'), -1);
  assert.equal(compareStreamIds('1795322361343-8', '0001795322361343-07'), 1);
});
