import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isQuantity, parseQuantity } from './quantity.ts';

test('quantities: binary and decimal suffixes, millicores, exponents', () => {
  assert.equal(parseQuantity('64Mi'), 64 * 1024 * 1024);
  assert.equal(parseQuantity('1Gi'), 2 ** 30);
  assert.equal(parseQuantity('1G'), 1e9);
  assert.equal(parseQuantity('500m'), 0.5);
  assert.equal(parseQuantity('1.5'), 1.5);
  assert.equal(parseQuantity('2e3'), 2000);
  assert.equal(parseQuantity(3), 3);
});

test('quantities: what the API server refuses is NaN', () => {
  for (const bad of ['abc', '10MB', '1 Gi', ' 1', 'Mi', '1mi', '']) assert.ok(Number.isNaN(parseQuantity(bad)), bad);
  assert.equal(isQuantity('1x'), false);
  assert.equal(isQuantity('250Mi'), true);
});
