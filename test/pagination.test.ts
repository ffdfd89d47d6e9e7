import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

/** Every item of a list endpoint, page by page; asserts each page's shape on the way. */
async function pages(
  api: (path: string) => Promise<{ status: number; body: any }>,
  path: string,
  field: string,
  limit: number,
) {
  const seen: any[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const r = await api(`${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(r.body[field].length <= limit);
    assert.ok('next_cursor' in r.body);
    sizes.push(r.body[field].length);
    seen.push(...r.body[field]);
    cursor = r.body.next_cursor;
  } while (cursor !== null);
  return { seen, sizes };
}

test('sessions and executions are listed a page at a time, newest first, with a cursor', async (t) => {
  const keyA = 'a'.repeat(32);
  const keyB = 'b'.repeat(32);
  const s = await startStack({
    worker: noopBackend,
    apiKey: keyA,
    env: { SANDGATE_API_KEYS: `${keyA}:tenantA,${keyB}:tenantB`, SANDGATE_MAX_SESSIONS: '100' },
  });
  t.after(() => s.close());
  const get = (path: string, key = keyA) => s.api('GET', path, undefined, { authorization: `Bearer ${key}` });

  const created: string[] = [];
  for (let i = 0; i < 23; i++) created.push((await s.api('POST', '/v1/sessions', {})).body.id);
  const { seen, sizes } = await pages(get, '/v1/sessions', 'sessions', 5);
  assert.deepEqual(sizes, [5, 5, 5, 5, 3]);
  assert.deepEqual(
    seen.map((x) => x.id),
    [...created].reverse(),
    'each session once, newest first',
  );
  assert.equal((await get('/v1/sessions')).body.sessions.length, 23, 'default limit 50');
  assert.equal((await get('/v1/sessions')).body.next_cursor, null);

  const session = created[0]!;
  const runs: string[] = [];
  for (let i = 0; i < 12; i++) {
    const r = await s.api('POST', '/v1/executions?wait=30', {
      language: 'python',
      code: `print(${i})`,
      session_id: i % 2 ? session : undefined,
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    runs.push(r.body.id);
  }
  const all = await pages(get, '/v1/executions', 'executions', 5);
  assert.deepEqual(
    all.seen.map((x) => x.id),
    [...runs].reverse(),
  );
  const inSession = await pages(get, `/v1/executions?session_id=${session}&state=completed`, 'executions', 4);
  assert.deepEqual(
    inSession.seen.map((x) => x.id),
    runs.filter((_, i) => i % 2).reverse(),
  );
  const none = await get('/v1/executions?state=failed');
  assert.deepEqual(none.body, { executions: [], next_cursor: null });

  // A cursor is read back only by the list that gave it.
  const first = await get('/v1/sessions?limit=2');
  const cursor = first.body.next_cursor as string;
  for (const [what, path, key] of [
    ['garbage', '/v1/sessions?cursor=not-a-cursor', keyA],
    ['tampered', `/v1/sessions?cursor=${encodeURIComponent(`x${cursor}`)}`, keyA],
    ['another list', `/v1/executions?cursor=${encodeURIComponent(cursor)}`, keyA],
    [
      'another filter',
      `/v1/executions?state=completed&cursor=${encodeURIComponent((await get('/v1/executions?limit=1')).body.next_cursor)}`,
      keyA,
    ],
    ['another tenant', `/v1/sessions?cursor=${encodeURIComponent(cursor)}`, keyB],
  ] as const) {
    const r = await get(path, key);
    assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.code, 'invalid_cursor', what);
  }
  for (const bad of ['0', '201', 'x']) {
    const r = await get(`/v1/sessions?limit=${bad}`);
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'validation_failed');
  }
  assert.deepEqual((await get('/v1/sessions', keyB)).body, { sessions: [], next_cursor: null });

  // Deleting what a cursor points at does not break the walk.
  const page1 = await get('/v1/sessions?limit=3');
  await s.api('DELETE', `/v1/sessions/${page1.body.sessions[2].id}`);
  const page2 = await get(`/v1/sessions?limit=3&cursor=${encodeURIComponent(page1.body.next_cursor)}`);
  assert.deepEqual(
    page2.body.sessions.map((x: any) => x.id),
    [...created].reverse().slice(3, 6),
  );
});

test("a session's files are listed a page at a time in walk order; a cursor serves only its own session", async (t) => {
  const s = await startStack({ worker: noopBackend });
  t.after(() => s.close());
  const get = (path: string) => s.api('GET', path);
  const [session, other] = [
    (await s.api('POST', '/v1/sessions', {})).body.id,
    (await s.api('POST', '/v1/sessions', {})).body.id,
  ];
  // `a/…` sorts before `a-c` segment by segment, though not as plain strings: a page boundary inside `a/` must not
  // lose `a-c`.
  const paths = [
    'a-c',
    'z.txt',
    'b/deep/er/x.csv',
    ...Array.from({ length: 20 }, (_, i) => `a/f${String(i).padStart(2, '0')}`),
  ];
  for (const path of paths) {
    const r = await s.api('POST', `/v1/sessions/${session}/files`, {
      path,
      content_base64: Buffer.from(path).toString('base64'),
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  const { seen, sizes } = await pages(get, `/v1/sessions/${session}/files`, 'files', 7);
  assert.deepEqual(sizes, [7, 7, 7, 2]);
  const listed = seen.map((f) => f.path);
  assert.deepEqual(listed, [
    ...Array.from({ length: 20 }, (_, i) => `a/f${String(i).padStart(2, '0')}`),
    'a-c',
    'b/deep/er/x.csv',
    'z.txt',
  ]);
  const whole = await get(`/v1/sessions/${session}/files`);
  assert.deepEqual(
    whole.body.files.map((f: any) => f.path),
    listed,
    'default limit 1000: one page',
  );
  assert.equal(whole.body.next_cursor, null);
  assert.equal(whole.body.truncated, false);

  const cursor = (await get(`/v1/sessions/${session}/files?limit=2`)).body.next_cursor as string;
  for (const path of [
    `/v1/sessions/${other}/files?cursor=${encodeURIComponent(cursor)}`,
    `/v1/sessions/${session}/files?cursor=x`,
    `/v1/sessions?cursor=${encodeURIComponent(cursor)}`,
  ]) {
    const r = await get(path);
    assert.equal(r.status, 400, path);
    assert.equal(r.body.code, 'invalid_cursor', path);
  }
  for (const bad of ['0', '1001'])
    assert.equal((await get(`/v1/sessions/${session}/files?limit=${bad}`)).body.code, 'validation_failed');
});
