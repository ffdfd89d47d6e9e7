import { test } from 'node:test';
import assert from 'node:assert/strict';
import { entriesOf } from './file-events.ts';

const line = (o: unknown) => JSON.stringify(o);
const ev = (e: Record<string, unknown>) => ({
  type: 'created',
  path: 'a.txt',
  size: 1,
  mtime_ms: 1_700_000_000_000,
  ...e,
});

test("the agent's lines: well-formed events become stream entries; anything else is dropped", () => {
  const [entry] = entriesOf('sess_000000000001', line({ events: [ev({})], overflow: null }));
  assert.deepEqual(entry, {
    type: 'created',
    path: 'a.txt',
    state: '1:1700000000000',
    data: '{"path":"a.txt","size_bytes":1,"modified_at":"2023-11-14T22:13:20.000Z"}',
  });
  const deleted = entriesOf('sess_000000000001', line({ events: [ev({ type: 'deleted', size: 9 })] }));
  assert.equal(deleted[0]!.state, '', 'a deletion has no state: two of them are one');
  assert.match(deleted[0]!.data, /"size_bytes":0/);

  // The sandbox is not trusted: paths that leave the directory, odd types and numbers never reach a client.
  const bad = [
    ev({ path: '../etc/passwd' }),
    ev({ path: '/etc/passwd' }),
    ev({ path: 'a//b' }),
    ev({ path: 'a/./b' }),
    ev({ path: '' }),
    ev({ path: 'x'.repeat(5000) }),
    ev({ path: 'line\nbreak' }),
    ev({ path: 42 }),
    ev({ type: 'result' }),
    ev({ type: 'overflow' }),
    ev({ size: -1 }),
    ev({ size: 1.5 }),
    ev({ size: '1' }),
    ev({ mtime_ms: 1e300 }),
    null,
    'text',
  ];
  assert.deepEqual(entriesOf('sess_000000000001', line({ events: bad })), []);
  assert.deepEqual(entriesOf('sess_000000000001', 'not json'), []);
  assert.deepEqual(entriesOf('sess_000000000001', line({ events: 'no' })), []);

  const [overflow] = entriesOf('sess_000000000001', line({ events: [], overflow: 'x'.repeat(1000) }));
  assert.equal(overflow!.type, 'overflow');
  const data = JSON.parse(overflow!.data) as { code: string; detail: string; list_url: string };
  assert.equal(data.code, 'file_events_overflow');
  assert.equal(data.list_url, '/v1/sessions/sess_000000000001/files');
  assert.ok(data.detail.length < 400, 'the reason is cut short');
});
