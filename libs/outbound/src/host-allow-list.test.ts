import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HostAllowList } from './host-allow-list.ts';

test('callback URLs: listed hosts, wildcards and ranges; special addresses only when listed', () => {
  const allow = new HostAllowList(
    ['hooks.example.com', '*.n8n.example', 'api.example.com:8443', '10.1.0.0/16', '::1'],
    'SANDGATE_WEBHOOK_ALLOW',
  );
  assert.equal(allow.refuseUrl('https://hooks.example.com/x'), null);
  assert.equal(allow.refuseUrl('https://a.b.n8n.example/x'), null);
  assert.equal(allow.refuseUrl('https://api.example.com:8443/x'), null);
  assert.match(allow.refuseUrl('https://api.example.com/x')!, /not in SANDGATE_WEBHOOK_ALLOW/);
  assert.match(allow.refuseUrl('https://n8n.example.evil.com/x')!, /not in/);
  assert.equal(allow.refuseUrl('http://10.1.2.3/x'), null);
  assert.equal(allow.refuseUrl('http://[::1]:9000/x'), null);
  assert.match(allow.refuseUrl('http://10.2.0.1/x')!, /10\.2\.0\.1 at port 80 is not in SANDGATE_WEBHOOK_ALLOW/);
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
  assert.equal(new HostAllowList([], 'SANDGATE_WEBHOOK_ALLOW').enabled, false);
  assert.equal(
    new HostAllowList(['*'], 'SANDGATE_WEBHOOK_ALLOW').refuseUrl('http://127.0.0.1/x')?.includes('is not in'),
    true,
    '* is names, not loopback',
  );
});

test('an address entry with a port allows that address at that port only, before and after resolution', () => {
  const allow = new HostAllowList(['127.0.0.1:8080', '[::1]:9000'], 'SANDGATE_EGRESS');
  assert.equal(allow.refuseHost('127.0.0.1', 8080), null);
  assert.match(allow.refuseHost('127.0.0.1', 8081)!, /127\.0\.0\.1 at port 8081 is not in SANDGATE_EGRESS/);
  assert.equal(allow.refuseHost('[::1]', 9000), null);
  assert.equal(allow.refuseAddress('127.0.0.1', 8080), null);
  assert.match(allow.refuseAddress('127.0.0.1', 22)!, /loopback address, not listed/);
});
