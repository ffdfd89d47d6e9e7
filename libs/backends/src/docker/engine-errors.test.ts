import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SandgateError } from '@sandgate/contracts';
import { engineError, isNotFound } from './engine-errors.ts';

test('a missing image names the image and how to get it', () => {
  const e = engineError(
    { statusCode: 404, message: '(HTTP code 404) no such container - No such image: img:1 ' },
    'img:1',
  );
  assert.equal(e.code, 'backend_unavailable');
  assert.match(e.message, /img:1 is not on the Docker engine/);
});

test('a socket error says the engine is unreachable', () => {
  const e = engineError(Object.assign(new Error('connect ENOENT /var/run/docker.sock'), { code: 'ENOENT' }), 'img:1');
  assert.equal(e.code, 'backend_unavailable');
  assert.match(e.message, /unreachable \(ENOENT\)/);
});

test('any other engine failure is still backend_unavailable, and a SandgateError passes through', () => {
  assert.equal(engineError({ statusCode: 500, message: 'boom' }, 'i').code, 'backend_unavailable');
  const own = new SandgateError('internal', 'x');
  assert.equal(engineError(own, 'i'), own);
  assert.equal(isNotFound({ statusCode: 404 }), true);
  assert.equal(isNotFound(new Error('x')), false);
});
