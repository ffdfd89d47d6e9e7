import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WebhookAllowList } from './allow-list.ts';

test('callback URLs: listed hosts, wildcards and ranges; special addresses only when listed', () => {
  const allow = new WebhookAllowList([
    'hooks.example.com',
    '*.n8n.example',
    'api.example.com:8443',
    '10.1.0.0/16',
    '::1',
  ]);
  assert.equal(allow.refuseUrl('https://hooks.example.com/x'), null);
  assert.equal(allow.refuseUrl('https://a.b.n8n.example/x'), null);
  assert.equal(allow.refuseUrl('https://api.example.com:8443/x'), null);
  assert.match(allow.refuseUrl('https://api.example.com/x')!, /not in SANDGATE_WEBHOOK_ALLOW/);
  assert.match(allow.refuseUrl('https://n8n.example.evil.com/x')!, /not in/);
  assert.equal(allow.refuseUrl('http://10.1.2.3/x'), null);
  assert.equal(allow.refuseUrl('http://[::1]:9000/x'), null);
  assert.match(allow.refuseUrl('http://10.2.0.1/x')!, /not allowed/);
  assert.match(allow.refuseUrl('http://u:p@hooks.example.com/x')!, /credentials/);
  assert.equal(allow.refuseAddress('93.184.215.14'), null, 'public');
  assert.equal(allow.refuseAddress('10.1.9.9'), null, 'listed range');
  for (const a of [
    '127.0.0.1',
    '10.9.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '::ffff:127.0.0.1',
    'fe80::1',
    'fd00::1',
    '0.0.0.0',
  ]) {
    assert.notEqual(allow.refuseAddress(a), null, a);
  }
  assert.equal(new WebhookAllowList([]).enabled, false);
  assert.equal(
    new WebhookAllowList(['*']).refuseUrl('http://127.0.0.1/x')?.includes('not allowed'),
    true,
    '* is names, not loopback',
  );
});
