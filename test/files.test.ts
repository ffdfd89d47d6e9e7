import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { Readable } from 'node:stream';
import { startStack } from './harness.ts';

/** A request sent with the path exactly as given: fetch would resolve '%2e%2e' and '..' before sending. */
const raw = (url: string, method: string, path: string, body?: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const u = new URL(url);
    const req = request(
      { host: u.hostname, port: u.port, method, path, headers: { 'content-type': 'application/octet-stream' } },
      (res) => {
        let text = '';
        res
          .setEncoding('utf8')
          .on('data', (c: string) => {
            text += c;
          })
          .on('end', () => resolve({ status: res.statusCode!, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });

test('files: upload, list, download with Range/ETag, delete, and every limit', async (t) => {
  const s = await startStack({ worker: false, env: { SANDGATE_MAX_UPLOAD_BYTES: '1MB' } });
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const base = `${s.url}/v1/sessions/${session}/files`;
  const put = (path: string, body: BodyInit, query = '') =>
    fetch(`${base}/${path}${query}`, {
      method: 'PUT',
      body,
      headers: { 'content-type': 'application/octet-stream' },
      duplex: 'half',
    } as RequestInit);

  await t.test('raw PUT, JSON base64 and multipart uploads land where asked', async () => {
    const r1 = await put('data/a.txt', 'hello world');
    assert.equal(r1.status, 201);
    const f1 = ((await r1.json()) as any).files[0];
    assert.equal(f1.path, 'data/a.txt');
    assert.equal(f1.size_bytes, 11);
    assert.equal(f1.mime_type, 'text/plain');
    const r2 = await s.api('POST', `/v1/sessions/${session}/files`, {
      path: 'b.json',
      content_base64: Buffer.from('{"x":1}').toString('base64'),
    });
    assert.equal(r2.status, 201);
    assert.equal(r2.body.files[0].mime_type, 'application/json');
    const form = new FormData();
    form.append('path', 'nested/dir/c.csv');
    form.append('file', new Blob(['a,b\n1,2\n']), 'ignored-name.csv');
    const r3 = await fetch(base, { method: 'POST', body: form });
    assert.equal(r3.status, 201);
    assert.equal(((await r3.json()) as any).files[0].path, 'nested/dir/c.csv');
    const list = await s.api('GET', `/v1/sessions/${session}/files`);
    assert.deepEqual(
      list.body.files.map((f: any) => f.path),
      ['b.json', 'data/a.txt', 'nested/dir/c.csv'],
    );
  });

  await t.test('file_exists without overwrite; overwrite=true replaces', async () => {
    const again = await put('data/a.txt', 'other');
    assert.equal(again.status, 409);
    assert.equal(((await again.json()) as any).code, 'file_exists');
    const dl = await fetch(`${s.url}/files/${session}/data/a.txt`);
    assert.equal(await dl.text(), 'hello world', 'the old content is intact');
    assert.equal((await put('data/a.txt', 'replaced', '?overwrite=true')).status, 201);
    assert.equal(await (await fetch(`${s.url}/files/${session}/data/a.txt`)).text(), 'replaced');
    const form = new FormData();
    form.append('file', new Blob(['x']), 'b.json');
    const mp = await fetch(base, { method: 'POST', body: form });
    assert.equal(mp.status, 409);
  });

  await t.test('downloads: headers, Range, ETag, signed URLs', async () => {
    await put('range.bin', '0123456789');
    const url = `${s.url}/files/${session}/range.bin`;
    const full = await fetch(url);
    assert.equal(full.headers.get('content-length'), '10');
    assert.equal(full.headers.get('accept-ranges'), 'bytes');
    assert.match(full.headers.get('content-disposition') ?? '', /^attachment; filename="?range\.bin"?$/);
    assert.equal(full.headers.get('x-content-type-options'), 'nosniff');
    const etag = full.headers.get('etag')!;
    assert.ok(etag);
    await full.arrayBuffer();
    const part = await fetch(url, { headers: { range: 'bytes=2-5' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), 'bytes 2-5/10');
    assert.equal(await part.text(), '2345');
    const suffix = await fetch(url, { headers: { range: 'bytes=-3' } });
    assert.equal(await suffix.text(), '789');
    const bad = await fetch(url, { headers: { range: 'bytes=50-60' } });
    assert.equal(bad.status, 416);
    assert.equal(bad.headers.get('content-range'), 'bytes */10');
    await bad.arrayBuffer();
    const cached = await fetch(url, { headers: { 'if-none-match': etag } });
    assert.equal(cached.status, 304);
    const signed = (await s.api('GET', `/v1/sessions/${session}/files`)).body.files.find(
      (f: any) => f.path === 'range.bin',
    ).download_url as string;
    assert.match(signed, /\?expires=\d+&sig=/);
    assert.equal(await (await fetch(signed)).text(), '0123456789');
    const tampered = signed.replace('range.bin', 'data/a.txt');
    assert.equal((await fetch(tampered)).status, 401);
  });

  await t.test('path traversal in every form is refused', async () => {
    const forms = [
      '..%2F..%2Fetc%2Fpasswd',
      '%2e%2e/%2e%2e/etc/passwd',
      '../../etc/passwd',
      'a/%2e%2e/%2e%2e/x',
      'a/../../x',
      '%2Fetc%2Fpasswd',
      '/etc/passwd',
      'a%5C..%5Cb',
      'a%00b',
      '.sandgate-tmp-x',
      'a//b',
      './a',
      '%2e',
      '..%5c..%5cetc%5cpasswd',
    ];
    for (const p of forms) {
      const r = await raw(s.url, 'PUT', `/v1/sessions/${session}/files/${p}`, 'x');
      assert.equal(r.status, 400, `PUT ${p} → ${r.status} ${r.text}`);
      assert.equal(JSON.parse(r.text).code, 'invalid_path', p);
      const d = await raw(s.url, 'GET', `/files/${session}/${p}`);
      assert.equal(d.status, 400, `GET ${p} → ${d.status}`);
      assert.doesNotMatch(d.text, /root:x:0:0/);
    }
    for (const p of ['../x', '/etc/passwd', 'a\\b', 'a\u0000b', 'a/./b']) {
      const r = await s.api('POST', `/v1/sessions/${session}/files`, { path: p, content_base64: 'eA==' });
      assert.equal(r.status, 400, JSON.stringify(p));
      assert.equal(r.body.code, 'invalid_path', JSON.stringify(p));
    }
    const mp = new FormData();
    mp.append('file', new Blob(['x']), '../../escape.txt');
    const r = await fetch(base, { method: 'POST', body: mp });
    // A multipart filename is a name, not a path: its directories are dropped, as browsers do.
    assert.equal(r.status, 201);
    assert.equal(((await r.json()) as any).files[0].path, 'escape.txt');
  });

  await t.test('uploads over the limit are refused while streaming, leaving nothing behind', async () => {
    let produced = 0;
    const body = Readable.toWeb(
      Readable.from(
        (function* () {
          for (; produced < 30 << 20; produced += 1 << 16) yield Buffer.alloc(1 << 16, 0x61);
        })(),
      ),
    ) as ReadableStream;
    const refused = await put('big.bin', body).catch((e: Error) => e);
    // Either the 413 arrives, or the server closes the socket on a client still sending: both before the 30 MiB.
    if (!(refused instanceof Error)) {
      assert.equal(refused.status, 413);
      assert.equal(((await refused.json()) as any).code, 'payload_too_large');
    }
    assert.ok(produced < 20 << 20, `the server stopped the upload early (${produced} bytes produced)`);
    const declared = await fetch(`${base}/big2.bin`, { method: 'PUT', body: 'x'.repeat(2 << 20) });
    assert.equal(declared.status, 413, 'a Content-Length over the limit is refused up front');
    const form = new FormData();
    form.append('file', new Blob([Buffer.alloc(3 << 20, 0x62)]), 'big3.bin');
    const mp = await fetch(base, { method: 'POST', body: form });
    assert.equal(mp.status, 413);
    assert.equal(((await mp.json()) as any).code, 'payload_too_large');
    const listed = (await s.api('GET', `/v1/sessions/${session}/files`)).body.files.map((f: any) => f.path);
    assert.ok(!listed.some((p: string) => p.startsWith('big')), `no partial file: ${listed}`);
  });

  await t.test('delete a file, then it is gone', async () => {
    assert.equal((await fetch(`${base}/b.json`, { method: 'DELETE' })).status, 204);
    const gone = await fetch(`${s.url}/files/${session}/b.json`);
    assert.equal(gone.status, 404);
    assert.equal(((await gone.json()) as any).code, 'file_not_found');
    assert.equal((await fetch(`${base}/b.json`, { method: 'DELETE' })).status, 404);
  });
});

test('uploads: what generated clients and curl users send is honoured or refused, never silently misread', async (t) => {
  const s = await startStack({ worker: false });
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const base = `${s.url}/v1/sessions/${session}/files`;
  const listed = async () =>
    (await s.api('GET', `/v1/sessions/${session}/files`)).body.files.map((f: any) => f.path).sort();

  await t.test('?overwrite=true replaces a file on a JSON upload, as the document says', async () => {
    const body = (text: string) => ({ path: 'j.txt', content_base64: Buffer.from(text).toString('base64') });
    assert.equal((await s.api('POST', `/v1/sessions/${session}/files`, body('one'))).status, 201);
    assert.equal((await s.api('POST', `/v1/sessions/${session}/files`, body('two'))).status, 409);
    const replaced = await s.api('POST', `/v1/sessions/${session}/files?overwrite=true`, body('three'));
    assert.equal(replaced.status, 201, JSON.stringify(replaced.body));
    assert.equal(await (await fetch(`${s.url}/files/${session}/j.txt`)).text(), 'three');
  });

  await t.test(
    'a multipart field after the file part is refused (curl -F file=@x -F path=…), and nothing is saved',
    async () => {
      const form = new FormData();
      form.append('file', new Blob(['a,b\n']), 'late.csv');
      form.append('path', 'sub/late.csv');
      const r = await fetch(base, { method: 'POST', body: form });
      assert.equal(r.status, 400);
      const problem = (await r.json()) as { code: string; detail: string };
      assert.equal(problem.code, 'validation_failed');
      assert.match(problem.detail, /"path".*before the file/);
      assert.ok(!(await listed()).some((p: string) => p.includes('late')), 'neither late.csv nor sub/late.csv');
    },
  );

  await t.test('an unexpanded URI template ({*}, {path}) is no file name', async () => {
    for (const literal of ['%7B*%7D', '%7Bpath%7D', 'dir/%7Bpath%7D']) {
      const r = await fetch(`${base}/${literal}`, { method: 'PUT', body: 'x' });
      assert.equal(r.status, 400, literal);
      const problem = (await r.json()) as { code: string; detail: string };
      assert.equal(problem.code, 'invalid_path');
      assert.match(problem.detail, /template/);
    }
    assert.ok(!(await listed()).some((p: string) => p.includes('{')), 'no file named {*} or {path}');
  });
});
