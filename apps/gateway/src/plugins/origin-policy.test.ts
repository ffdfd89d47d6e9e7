import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allowedOrigins, originPolicy } from './origin-policy.ts';

test("with API keys only the public URL's origin (and no Origin at all) may use /mcp", () => {
  const may = originPolicy({ publicUrl: 'https://sandbox.example.com/base', open: false });
  assert.equal(may(undefined), true, 'not a browser');
  assert.equal(may('https://sandbox.example.com'), true);
  assert.equal(may('HTTPS://Sandbox.Example.com:443'), true, 'compared as serialised origins');
  for (const origin of [
    'http://sandbox.example.com',
    'https://sandbox.example.com:8443',
    'https://evil.example',
    'https://sandbox.example.com.evil.example',
    'http://localhost:8080',
    'http://127.0.0.1',
    'null',
    '',
    'not a url',
  ]) {
    assert.equal(may(origin), false, origin);
  }
});

test('in open mode loopback origins are allowed as well, on any port', () => {
  const may = originPolicy({ publicUrl: 'http://127.0.0.1:8080', open: true });
  const loopback = [
    'http://localhost:6274',
    'https://localhost',
    'http://127.0.0.1:5173',
    'http://127.1.2.3',
    'http://[::1]:3000',
  ];
  for (const origin of loopback) {
    assert.equal(may(origin), true, origin);
  }
  const others = [
    'http://localhost.evil.example',
    'http://127.0.0.1.nip.io',
    'file://localhost',
    'http://10.0.0.1',
    'null',
  ];
  for (const origin of others) {
    assert.equal(may(origin), false, origin);
  }
});

test('SANDGATE_ALLOWED_HOSTS become origins over http and https, with the port they name', () => {
  const may = originPolicy({
    publicUrl: 'https://a.example',
    open: false,
    extra: allowedOrigins(['b.example', 'c.example:8443']),
  });
  for (const origin of ['http://b.example', 'https://b.example', 'https://c.example:8443'])
    assert.equal(may(origin), true, origin);
  for (const origin of ['https://b.example:8443', 'https://c.example', 'https://d.example'])
    assert.equal(may(origin), false, origin);
});

test('operator-listed origins are allowed', () => {
  const may = originPolicy({ publicUrl: 'https://a.example', open: false, extra: ['https://dashboard.example/'] });
  assert.equal(may('https://dashboard.example'), true);
  assert.equal(may('https://other.example'), false);
});
