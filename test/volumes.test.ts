import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, TEST_BACKEND } from './harness.ts';
import { noopBackend } from './noop-backend.ts';
import { mcpClient, toolsOf } from './mcp-client.ts';
import { Sandgate, SandgateApiError } from '@sandgate/client';

const KEY_A = 'a'.repeat(32);
const KEY_B = 'b'.repeat(32);
const MiB = 1024 * 1024;
const KEYS = `${KEY_A}:tenantA,${KEY_B}:tenantB`;
const RAW = { 'content-type': 'application/octet-stream' };

type Api = (
  method: string,
  path: string,
  body?: unknown,
  headers?: Record<string, string>,
) => ReturnType<Awaited<ReturnType<typeof startStack>>['api']>;
const as =
  (s: Awaited<ReturnType<typeof startStack>>, key: string): Api =>
  (method, path, body, headers = {}) =>
    s.api(method, path, body, { authorization: `Bearer ${key}`, ...headers });

test('volumes: made, listed, limited, and never seen by another tenant', async (t) => {
  const s = await startStack({
    worker: noopBackend,
    env: {
      SANDGATE_API_KEYS: KEYS,
      SANDGATE_MAX_VOLUMES: '3',
      SANDGATE_MAX_VOLUME_BYTES: '64MiB',
      SANDGATE_TENANT_LIMITS: JSON.stringify({ tenantA: { storage_bytes: 100 * MiB } }),
    },
  });
  t.after(() => s.close());
  const a = as(s, KEY_A);
  const b = as(s, KEY_B);

  const made = await a('POST', '/v1/volumes', { name: 'datasets', size_bytes: 8 * MiB });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  assert.match(made.body.id, /^vol_[0-9a-f]{12}$/);
  assert.deepEqual(
    { ...made.body, id: undefined, created_at: undefined },
    { id: undefined, created_at: undefined, name: 'datasets', size_bytes: 8 * MiB, used_bytes: 0, mounted_by: [] },
  );
  assert.equal(made.headers.get('location'), `${s.url}/v1/volumes/datasets`);
  assert.equal((await a('GET', '/v1/volumes/datasets')).body.id, made.body.id);

  await t.test('names are checked, taken ones refused', async () => {
    const again = await a('POST', '/v1/volumes', { name: 'datasets', size_bytes: 2 * MiB });
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'volume_exists');
    for (const name of ['Data', '../x', '-lead', 'a/b', '', 'x'.repeat(64), 'sp ace']) {
      const r = await a('POST', '/v1/volumes', { name, size_bytes: 2 * MiB });
      assert.equal(r.status, 400, `${JSON.stringify(name)} → ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, 'validation_failed');
    }
    assert.equal((await a('GET', '/v1/volumes/nope')).body.code, 'volume_not_found');
    assert.equal((await a('GET', '/v1/volumes/..%2Fetc')).status, 400);
  });

  await t.test("sizes are bounded by the deployment's maximum and by the tenant's storage quota", async () => {
    const small = await a('POST', '/v1/volumes', { name: 'tiny', size_bytes: 1000 });
    assert.equal(small.body.code, 'validation_failed', 'at least 1 MiB');
    const big = await a('POST', '/v1/volumes', { name: 'big', size_bytes: 65 * MiB });
    assert.equal(big.status, 400);
    assert.match(big.body.detail, /maximum of 67108864/);
    // 8 MiB taken; 60 + 40 would pass the 100 MiB quota: the second is refused, and nothing of it is left.
    assert.equal((await a('POST', '/v1/volumes', { name: 'sixty', size_bytes: 60 * MiB })).status, 201);
    const over = await a('POST', '/v1/volumes', { name: 'forty', size_bytes: 40 * MiB });
    assert.equal(over.status, 413, JSON.stringify(over.body));
    assert.equal(over.body.code, 'storage_quota_exceeded');
    assert.equal((await a('GET', '/v1/volumes/forty')).status, 404);
    // A volume's size counts against uploads to sessions too, until it is deleted.
    const session = (await a('POST', '/v1/sessions', {})).body.id as string;
    const upload = await a('PUT', `/v1/sessions/${session}/files/x.bin`, 'x'.repeat(33 * MiB), RAW);
    assert.equal(upload.body.code, 'storage_quota_exceeded');
    assert.equal((await a('DELETE', '/v1/volumes/sixty')).status, 204);
    assert.equal((await a('PUT', `/v1/sessions/${session}/files/x.bin`, 'x'.repeat(33 * MiB), RAW)).status, 201);
  });

  await t.test('at most SANDGATE_MAX_VOLUMES per tenant', async () => {
    assert.equal((await a('POST', '/v1/volumes', { name: 'two', size_bytes: MiB })).status, 201);
    assert.equal((await a('POST', '/v1/volumes', { name: 'three', size_bytes: MiB })).status, 201);
    const fourth = await a('POST', '/v1/volumes', { name: 'four', size_bytes: MiB });
    assert.equal(fourth.status, 409);
    assert.equal(fourth.body.code, 'max_volumes');
    // Another tenant has its own count, and its own names.
    assert.equal((await b('POST', '/v1/volumes', { name: 'datasets', size_bytes: MiB })).status, 201);
    assert.equal((await a('DELETE', '/v1/volumes/three')).status, 204);
    assert.equal((await a('POST', '/v1/volumes', { name: 'four', size_bytes: MiB })).status, 201);
    const names = (await a('GET', '/v1/volumes')).body.volumes.map((v: { name: string }) => v.name);
    assert.deepEqual(names, ['datasets', 'four', 'two'], 'by name');
  });

  await t.test('the files API works on a volume as on a session, within its size', async () => {
    const up = await a('POST', '/v1/volumes/datasets/files', {
      path: 'csv/sales.csv',
      content_base64: Buffer.from('region,amount\nnorth,10\n').toString('base64'),
    });
    assert.equal(up.status, 201, JSON.stringify(up.body));
    const url = up.body.files[0].download_url as string;
    assert.ok(url.startsWith(`${s.url}/files/volumes/${made.body.id}/csv/sales.csv?expires=`), url);
    const form = new FormData();
    form.append('path', 'notes/readme.txt');
    form.append('file', new Blob(['hello volume']), 'ignored.txt');
    const multipart = await fetch(`${s.url}/v1/volumes/datasets/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}` },
      body: form,
    });
    assert.equal(multipart.status, 201);
    assert.equal((await a('PUT', '/v1/volumes/datasets/files/raw.bin', 'r'.repeat(1000), RAW)).status, 201);
    const exists = await a('PUT', '/v1/volumes/datasets/files/raw.bin', 'again', RAW);
    assert.equal(exists.body.code, 'file_exists');
    const listed = (await a('GET', '/v1/volumes/datasets/files')).body;
    assert.deepEqual(
      listed.files.map((f: { path: string; size_bytes: number }) => [f.path, f.size_bytes]),
      [
        ['csv/sales.csv', 23],
        ['notes/readme.txt', 12],
        ['raw.bin', 1000],
      ],
    );
    const paged = (await a('GET', '/v1/volumes/datasets/files?limit=2')).body;
    assert.equal(paged.files.length, 2);
    const rest = (await a('GET', `/v1/volumes/datasets/files?limit=2&cursor=${paged.next_cursor}`)).body;
    assert.deepEqual(
      rest.files.map((f: { path: string }) => f.path),
      ['raw.bin'],
    );

    // Signed link: no key needed, Range and ETag as for a session's file.
    const signed = await fetch(url);
    assert.equal(await signed.text(), 'region,amount\nnorth,10\n');
    const etag = signed.headers.get('etag')!;
    assert.equal((await fetch(url, { headers: { 'if-none-match': etag } })).status, 304);
    const part = await fetch(url, { headers: { range: 'bytes=7-12' } });
    assert.equal(part.status, 206);
    assert.equal(await part.text(), 'amount');
    const tampered = url.replace('sales.csv', 'sales.csv2');
    assert.equal((await fetch(tampered)).status, 401);
    // A session's signature does not open a volume's file, nor the reverse.
    const plain = `${s.url}/files/volumes/${made.body.id}/csv/sales.csv`;
    assert.equal((await fetch(plain, { headers: { authorization: `Bearer ${KEY_A}` } })).status, 200);
    assert.equal((await fetch(plain, { headers: { authorization: `Bearer ${KEY_B}` } })).status, 404);
    assert.equal((await fetch(plain)).status, 401);

    assert.equal((await a('GET', '/v1/volumes/datasets')).body.used_bytes >= 1035, true);
    assert.equal((await a('DELETE', '/v1/volumes/datasets/files/notes')).status, 204);
    assert.equal((await a('GET', '/v1/volumes/datasets/files')).body.files.length, 2);
    assert.equal(
      (
        await fetch(plain.replace('csv/sales.csv', 'notes/readme.txt'), {
          headers: { authorization: `Bearer ${KEY_A}` },
        })
      ).status,
      404,
    );

    // A file that does not fit in what the volume has left is refused, and not kept.
    const tooBig = await a('PUT', '/v1/volumes/two/files/big.bin', 'x'.repeat(MiB + 1), RAW);
    assert.equal(tooBig.status, 413, JSON.stringify(tooBig.body));
    assert.equal(tooBig.body.code, 'volume_full');
    assert.deepEqual((await a('GET', '/v1/volumes/two/files')).body.files, []);
  });

  await t.test('the client library: createVolume, uploadToVolume, volumeFiles, volumes', async () => {
    const client = new Sandgate({ baseUrl: s.url, apiKey: KEY_B });
    const made = await client.createVolume({ name: 'from-client', size_bytes: 2 * MiB });
    assert.equal(made.name, 'from-client');
    const file = await client.uploadToVolume('from-client', 'a/b.txt', 'client bytes');
    assert.equal(file.size_bytes, 12);
    assert.deepEqual(
      (await client.volumeFiles('from-client')).map((f) => f.path),
      ['a/b.txt'],
    );
    assert.equal(await (await fetch(file.download_url)).text(), 'client bytes');
    assert.deepEqual(
      (await client.volumes()).map((v) => v.name),
      ['datasets', 'from-client'],
    );
    const taken = await client.createVolume({ name: 'from-client', size_bytes: MiB }).catch((e: unknown) => e);
    assert.ok(taken instanceof SandgateApiError && taken.code === 'volume_exists', String(taken));
    assert.equal((await b('DELETE', '/v1/volumes/from-client')).status, 204);
  });

  await t.test("another tenant neither sees, reads, writes, mounts nor deletes a tenant's volume", async () => {
    const mine = (await b('GET', '/v1/volumes')).body.volumes;
    assert.equal(mine.length, 1);
    assert.notEqual(mine[0].id, made.body.id, "B's datasets is its own");
    assert.deepEqual((await b('GET', '/v1/volumes/datasets/files')).body.files, []);
    assert.equal((await b('GET', '/v1/volumes/two')).body.code, 'volume_not_found');
    assert.equal((await b('GET', '/v1/volumes/two/files')).body.code, 'volume_not_found');
    assert.equal((await b('PUT', '/v1/volumes/two/files/x', 'x', RAW)).body.code, 'volume_not_found');
    assert.equal((await b('DELETE', '/v1/volumes/two')).body.code, 'volume_not_found');
    const mount = await b('POST', '/v1/sessions', { volumes: [{ name: 'two' }] });
    assert.equal(mount.status, 404);
    assert.equal(mount.body.code, 'volume_not_found');
    assert.equal((await b('GET', '/v1/sessions')).body.sessions.length, 0, 'no session was left behind');
  });

  await t.test('mounts are checked: under /mnt/volumes, each volume once, no nesting, at most 8', async () => {
    const bad = async (volumes: unknown, why: RegExp) => {
      const r = await a('POST', '/v1/sessions', { volumes });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.match(r.body.detail, why);
    };
    await bad([{ name: 'two', path: '/mnt/data/x' }], /pattern/);
    await bad([{ name: 'two', path: '/mnt/volumes/../data' }], /pattern/);
    await bad([{ name: 'two', path: '/mnt/volumes' }], /pattern/);
    await bad([{ name: 'two' }, { name: 'two', path: '/mnt/volumes/again' }], /mounted twice/);
    await bad(
      [
        { name: 'two', path: '/mnt/volumes/a' },
        { name: 'four', path: '/mnt/volumes/a/b' },
      ],
      /overlap/,
    );
    await bad(
      [
        { name: 'two', path: '/mnt/volumes/a' },
        { name: 'four', path: '/mnt/volumes/a' },
      ],
      /overlap/,
    );
    await bad(
      Array.from({ length: 9 }, (_, i) => ({ name: `v${i}` })),
      /must NOT have more than 8 items/,
    );
    await bad([{ name: 'two', writable: true }], /unknown property/);
    const ok = await a('POST', '/v1/sessions', {
      volumes: [
        { name: 'two', path: '/mnt/volumes/a' },
        { name: 'four', path: '/mnt/volumes/ab', read_only: true },
      ],
    });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.volumes, [
      { name: 'two', path: '/mnt/volumes/a', read_only: false },
      { name: 'four', path: '/mnt/volumes/ab', read_only: true },
    ]);
    assert.deepEqual((await a('GET', `/v1/sessions/${ok.body.id}`)).body.volumes, ok.body.volumes);
    assert.deepEqual((await a('GET', '/v1/volumes/four')).body.mounted_by, [
      { session_id: ok.body.id, path: '/mnt/volumes/ab', read_only: true },
    ]);
  });
});

test('sessions share a volume: one writer, many readers, read-only for real, deleted only when unused', async (t) => {
  const s = await startStack({ env: { SANDGATE_API_KEYS: KEYS } });
  t.after(() => s.close());
  const a = as(s, KEY_A);
  const run = async (session: string, code: string) => {
    const r = await a('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.result;
  };
  assert.equal((await a('POST', '/v1/volumes', { name: 'shared', size_bytes: 16 * MiB })).status, 201);
  await a('PUT', '/v1/volumes/shared/files/seed.txt', 'from the API\n', RAW);

  const writer = (await a('POST', '/v1/sessions', { volumes: [{ name: 'shared' }] })).body;
  assert.deepEqual(writer.volumes, [{ name: 'shared', path: '/mnt/volumes/shared', read_only: false }]);
  const reader = (
    await a('POST', '/v1/sessions', { volumes: [{ name: 'shared', path: '/mnt/volumes/in', read_only: true }] })
  ).body;
  assert.equal(reader.id !== undefined, true, JSON.stringify(reader));

  await t.test('the writer reads what the API put there and writes as the sandbox user', async () => {
    const w = await run(
      writer.id,
      [
        'import os',
        'print(open("/mnt/volumes/shared/seed.txt").read(), end="")',
        'os.makedirs("/mnt/volumes/shared/out", exist_ok=True)',
        'open("/mnt/volumes/shared/out/result.txt", "w").write("written by the writer\\n")',
        'st = os.stat("/mnt/volumes/shared/seed.txt")',
        'print(st.st_uid, os.getuid())',
      ].join('\n'),
    );
    assert.equal(w.state, 'completed', w.stderr);
    assert.equal(w.stdout, 'from the API\n1000 1000\n');
    assert.deepEqual(w.artifacts, [], "a volume's files are not the run's artifacts (those are /mnt/data's)");
  });

  await t.test('a reader sees what the writer wrote, and cannot write', async () => {
    const r = await run(
      reader.id,
      [
        'import os',
        'print(open("/mnt/volumes/in/out/result.txt").read(), end="")',
        'for attempt in (lambda: open("/mnt/volumes/in/new.txt", "w"), lambda: os.remove("/mnt/volumes/in/seed.txt"),',
        '                lambda: os.mkdir("/mnt/volumes/in/d"), lambda: os.chmod("/mnt/volumes/in/seed.txt", 0o777)):',
        '    try:',
        '        attempt()',
        '        print("WROTE")',
        '    except OSError as e:',
        '        print(e.strerror)',
      ].join('\n'),
    );
    assert.equal(r.state, 'completed', r.stderr);
    const lines = r.stdout.split('\n');
    assert.equal(lines[0], 'written by the writer');
    assert.equal(lines.filter((l: string) => l === 'WROTE').length, 0, r.stdout);
    assert.equal(lines.filter((l: string) => /Read-only file system/.test(l)).length, 4, r.stdout);
    // What the reader tried left no trace; the writer's file came back to the volume for the API too.
    const files = (await a('GET', '/v1/volumes/shared/files')).body.files.map((f: { path: string }) => f.path);
    assert.deepEqual(files, ['out/result.txt', 'seed.txt']);
    const back = (await a('GET', '/v1/volumes/shared/files')).body.files[0].download_url;
    assert.equal(await (await fetch(back)).text(), 'written by the writer\n');
  });

  await t.test("a later change of the writer's is seen by the reader's next run", async () => {
    await run(writer.id, 'open("/mnt/volumes/shared/out/result.txt", "w").write("second\\n")');
    const r = await run(reader.id, 'print(open("/mnt/volumes/in/out/result.txt").read(), end="")');
    assert.equal(r.stdout, 'second\n');
  });

  await t.test('a second writer is refused with volume_in_use; more readers are welcome', async () => {
    const second = await a('POST', '/v1/sessions', { volumes: [{ name: 'shared' }] });
    assert.equal(second.status, 409, JSON.stringify(second.body));
    assert.equal(second.body.code, 'volume_in_use');
    assert.match(second.body.detail, new RegExp(writer.id));
    const ids = (await a('GET', '/v1/sessions')).body.sessions.map((x: { id: string }) => x.id);
    assert.equal(ids.length, 2, 'the refused session was not kept');
    const another = await a('POST', '/v1/sessions', { volumes: [{ name: 'shared', read_only: true }] });
    assert.equal(another.status, 201);
    const users = (await a('GET', '/v1/volumes/shared')).body.mounted_by;
    assert.deepEqual(
      users.map((u: { session_id: string; read_only: boolean }) => [u.session_id, u.read_only]).sort(),
      [
        [writer.id, false],
        [reader.id, true],
        [another.body.id, true],
      ].sort(),
    );
    assert.equal((await a('DELETE', `/v1/sessions/${another.body.id}`)).status, 204);
  });

  await t.test('over MCP: list_volumes, and create_session mounts them under the same rules', async () => {
    const { client } = await mcpClient(s, { apiKey: KEY_A });
    t.after(() => client.close());
    const { ok, fail } = toolsOf(client);
    const listed = await ok('list_volumes', {});
    assert.deepEqual(
      listed.volumes.map((v: { name: string; mounted_by: unknown[] }) => [v.name, v.mounted_by.length]),
      [['shared', 2]],
    );
    const refused = await fail('create_session', { volumes: [{ name: 'shared' }] });
    assert.equal(refused.error, 'volume_in_use');
    assert.equal((await fail('create_session', { volumes: [{ name: 'nope' }] })).error, 'volume_not_found');
    const made = await ok('create_session', {
      volumes: [{ name: 'shared', path: '/mnt/volumes/ro', read_only: true }],
    });
    assert.deepEqual(made.volumes, [{ name: 'shared', path: '/mnt/volumes/ro', read_only: true }]);
    const read = await ok('run_python', {
      session_id: made.session_id,
      code: 'print(open("/mnt/volumes/ro/out/result.txt").read(), end="")',
    });
    assert.equal(read.stdout, 'second\n');
    await ok('close_session', { session_id: made.session_id });
  });

  await t.test('a volume in use is not deleted; once its sessions are gone it is, with its files', async () => {
    const busy = await a('DELETE', '/v1/volumes/shared');
    assert.equal(busy.status, 409);
    assert.equal(busy.body.code, 'volume_in_use');
    assert.match(busy.body.detail, new RegExp(`${writer.id}.*${reader.id}|${reader.id}.*${writer.id}`));
    assert.equal((await a('DELETE', `/v1/sessions/${writer.id}`)).status, 204);
    // The writer's claim ended with its session: another session may write now.
    const next = await a('POST', '/v1/sessions', { volumes: [{ name: 'shared' }] });
    assert.equal(next.status, 201, JSON.stringify(next.body));
    assert.equal((await a('DELETE', '/v1/volumes/shared')).body.code, 'volume_in_use');
    assert.equal((await a('DELETE', `/v1/sessions/${next.body.id}`)).status, 204);
    assert.equal((await a('DELETE', `/v1/sessions/${reader.id}`)).status, 204);
    const vol = (await a('GET', '/v1/volumes/shared')).body.id as string;
    assert.equal((await a('DELETE', '/v1/volumes/shared')).status, 204);
    assert.equal((await a('GET', '/v1/volumes/shared')).status, 404);
    const old = await fetch(`${s.url}/files/volumes/${vol}/seed.txt`, {
      headers: { authorization: `Bearer ${KEY_A}` },
    });
    assert.equal(old.status, 404);
    // Made again, the name is a new, empty volume.
    const fresh = (await a('POST', '/v1/volumes', { name: 'shared', size_bytes: MiB })).body;
    assert.notEqual(fresh.id, vol);
    assert.deepEqual((await a('GET', '/v1/volumes/shared/files')).body.files, []);
  });
});

test("a volume's size is enforced: a run that writes past it fails with disk_quota", async (t) => {
  // On Docker the volume's size is a btrfs qgroup limit (the quick start's data disk); on Kubernetes the Pod's
  // emptyDir sizeLimit, and the worker brings back no more than the size.
  const s = await startStack({ diskQuotas: TEST_BACKEND === 'docker' });
  t.after(() => s.close());
  assert.equal((await s.api('POST', '/v1/volumes', { name: 'small', size_bytes: 4 * MiB })).status, 201);
  const session = (await s.api('POST', '/v1/sessions', { volumes: [{ name: 'small' }] })).body.id as string;
  const run = async (code: string) =>
    (await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code })).body.result;
  const fits = await run('open("/mnt/volumes/small/a.bin", "wb").write(b"a" * (2 * 1024 * 1024))');
  assert.equal(fits.state, 'completed', fits.stderr);
  const over = await run(
    [
      'import time',
      'with open("/mnt/volumes/small/b.bin", "wb") as f:',
      '    for _ in range(16):',
      '        f.write(b"b" * (1024 * 1024))',
      '        f.flush()',
      '        time.sleep(0.05)',
    ].join('\n'),
  );
  assert.equal(over.state, 'failed', JSON.stringify(over));
  assert.equal(over.reason, 'disk_quota', JSON.stringify(over));
  assert.match(over.message, /volume|small/);
  if (TEST_BACKEND === 'docker') assert.match(over.stderr, /Disk quota exceeded|No space left/);
  // The volume holds no more than its size, as the API sees it.
  const used = (await s.api('GET', '/v1/volumes/small')).body.used_bytes as number;
  assert.ok(used <= 4 * MiB + 256 * 1024, `used ${used}`);
});
