import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cachedSerializerFactory } from './serializer-cache.ts';

const shared = { Problem: { $id: 'Problem', type: 'object', properties: { code: { type: 'string' } } } };
const route = (schema: unknown, httpStatus = '200') => ({ method: 'GET', url: '/x', httpStatus, schema });

test('a schema is compiled once per shared schemas and options, and serializes as the schema says', () => {
  const schema = { type: 'object', properties: { id: { type: 'string' }, n: { type: 'integer' } } };
  const first = cachedSerializerFactory()(shared, {})(route(schema));
  // Another app (another factory) with the same shared schema objects: the same serializer, also for a copy.
  const again = cachedSerializerFactory()(shared, {})(route(structuredClone(schema), '201'));
  assert.equal(again, first);
  assert.equal(first({ id: 'a', n: 2.0, secret: 'x' }), '{"id":"a","n":2}', 'only what the schema declares');

  const other = cachedSerializerFactory()(shared, {})(route({ ...schema, required: ['id'] }));
  assert.notEqual(other, first, 'another schema is compiled');
  assert.throws(() => other({ n: 1 }), /"id" is required/);

  const otherShared = { Problem: structuredClone(shared.Problem) };
  assert.notEqual(cachedSerializerFactory()(otherShared, {})(route(schema)), first, 'other shared schema objects');
  assert.notEqual(cachedSerializerFactory()(shared, { rounding: 'ceil' })(route(schema)), first, 'other options');
});

test('a reference to a shared schema resolves against the shared schemas given', () => {
  const serialize = cachedSerializerFactory()(shared, {})(route({ $ref: 'Problem' }, '404'));
  assert.equal(serialize({ code: 'not_found', detail: 'x' }), '{"code":"not_found"}');
});
