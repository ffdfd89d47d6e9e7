import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { mcpClient } from './mcp-client.ts';

const KEY_A = 'scripts-key-a-0123456789abcdef';
const KEY_B = 'scripts-key-b-0123456789abcdef';

test('saved scripts: saved once per content, listed, run by name with arguments, tenant-scoped', async (t) => {
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY_A}:acme,${KEY_B}:other`, SANDGATE_MAX_SCRIPTS: '5' } });
  t.after(() => s.close());
  const as = (key: string) => (method: string, path: string, body?: unknown) =>
    s.api(method, path, body, { authorization: `Bearer ${key}` });
  const a = as(KEY_A);
  const b = as(KEY_B);
  const greet =
    '#!/usr/bin/env python3\n# Greets whoever is named\n# on the command line.\nimport sys\nprint("hello", *sys.argv[1:])';

  await t.test('save, deduplicate by content, refuse a taken name, get, list, delete', async () => {
    const saved = await a('POST', '/v1/scripts', { name: 'greet', language: 'python', code: greet });
    assert.equal(saved.status, 201, JSON.stringify(saved.body));
    assert.equal(saved.body.description, 'Greets whoever is named on the command line.');
    assert.match(saved.body.sha256, /^[0-9a-f]{64}$/);
    assert.equal(saved.body.size_bytes, Buffer.byteLength(greet));
    const again = await a('POST', '/v1/scripts', { name: 'greet-copy', language: 'python', code: greet });
    assert.equal(again.status, 200, 'the same content is kept once');
    assert.equal(again.body.name, 'greet');
    const taken = await a('POST', '/v1/scripts', { name: 'greet', language: 'python', code: 'print(2)' });
    assert.equal(taken.status, 409);
    assert.equal(taken.body.code, 'script_exists');
    assert.equal((await a('GET', '/v1/scripts/greet')).body.code, greet);
    const temp = await a('POST', '/v1/scripts', {
      name: 'temp',
      language: 'bash',
      code: 'echo temp',
      description: 'mine',
    });
    assert.equal(temp.body.description, 'mine');
    assert.deepEqual(
      (await a('GET', '/v1/scripts')).body.scripts.map((x: any) => x.name),
      ['greet', 'temp'],
    );
    assert.equal((await a('DELETE', '/v1/scripts/temp')).status, 204);
    assert.equal((await a('DELETE', '/v1/scripts/temp')).body.code, 'script_not_found');
    assert.equal((await a('GET', '/v1/scripts/temp')).status, 404);
  });

  await t.test('run by name with arguments, in every language', async () => {
    const scripts = [
      ['argv-js', 'javascript', '// Echoes its arguments.\nconsole.log(JSON.stringify(process.argv.slice(2)))'],
      [
        'argv-ts',
        'typescript',
        '// Echoes its arguments.\nconst args: string[] = process.argv.slice(2);\nconsole.log(JSON.stringify(args))',
      ],
      ['argv-sh', 'bash', '# Echoes its arguments.\nprintf "%s|" "$@"; echo'],
    ] as const;
    for (const [name, language, code] of scripts) {
      assert.equal((await a('POST', '/v1/scripts', { name, language, code })).status, 201, name);
    }
    const args = ['a', 'b c', '$HOME; rm -rf /'];
    const run = async (script: string) => (await a('POST', '/v1/executions?wait=60', { script, args })).body.result;
    assert.equal((await run('greet')).stdout, 'hello a b c $HOME; rm -rf /\n');
    assert.equal((await run('argv-js')).stdout, `${JSON.stringify(args)}\n`);
    assert.equal((await run('argv-ts')).stdout, `${JSON.stringify(args)}\n`);
    assert.equal((await run('argv-sh')).stdout, 'a|b c|$HOME; rm -rf /|\n');
    const session = (await a('POST', '/v1/sessions', { mode: 'process' })).body.id;
    const inSession = await a('POST', '/v1/executions?wait=60', {
      script: 'greet',
      args: ['session'],
      session_id: session,
    });
    assert.equal(inSession.body.result.stdout, 'hello session\n', 'through the session sandbox too');
  });

  await t.test('a run that completed can be saved by its execution id; a failed one cannot', async () => {
    const unkept = await a('POST', '/v1/executions?wait=60', { language: 'python', code: 'print(41)' });
    const notKept = await a('POST', '/v1/scripts', { name: 'unkept', execution_id: unkept.body.id });
    assert.equal(notKept.status, 400, 'code is kept only when the run asked for it');
    assert.match(notKept.body.detail, /keep_code/);
    const ok = await a('POST', '/v1/executions?wait=60', {
      language: 'python',
      code: '# Prints the answer.\nprint(42)',
      keep_code: true,
    });
    assert.equal(ok.body.state, 'completed');
    const saved = await a('POST', '/v1/scripts', { name: 'answer', execution_id: ok.body.id });
    assert.equal(saved.status, 201, JSON.stringify(saved.body));
    assert.equal(saved.body.code, '# Prints the answer.\nprint(42)');
    assert.equal(saved.body.description, 'Prints the answer.');
    const failed = await a('POST', '/v1/executions?wait=60', {
      language: 'python',
      code: 'raise SystemExit(3)',
      keep_code: true,
    });
    const refused = await a('POST', '/v1/scripts', { name: 'broken', execution_id: failed.body.id });
    assert.equal(refused.status, 400);
    assert.match(refused.body.detail, /only a run that completed/);
    assert.equal((await b('POST', '/v1/scripts', { name: 'stolen', execution_id: ok.body.id })).status, 404);
  });

  await t.test("tenants never see each other's scripts; bad requests say what is wrong", async () => {
    assert.deepEqual((await b('GET', '/v1/scripts')).body.scripts, []);
    assert.equal((await b('GET', '/v1/scripts/greet')).status, 404);
    const other = await b('POST', '/v1/executions?wait=60', { script: 'greet' });
    assert.equal(other.status, 404);
    assert.equal(other.body.code, 'script_not_found');
    const both = await a('POST', '/v1/executions', { script: 'greet', language: 'python', code: 'print(1)' });
    assert.equal(both.body.code, 'validation_failed');
    assert.equal((await a('POST', '/v1/executions', { language: 'python' })).body.code, 'validation_failed');
    assert.equal((await a('POST', '/v1/scripts', { name: 'Bad Name', language: 'python', code: '1' })).status, 400);
  });

  await t.test(
    "MCP lists the tenant's scripts as resources and reads their code (the official SDK client)",
    async () => {
      const { client } = await mcpClient(s, { apiKey: KEY_A });
      t.after(() => client.close());
      const { resources } = await client.listResources();
      const greetRes = resources.find((r) => r.name === 'greet');
      assert.equal(greetRes?.uri, 'sandgate://scripts/greet');
      assert.equal(greetRes?.mimeType, 'text/x-python');
      assert.match(greetRes?.description ?? '', /Greets whoever is named/);
      const read = await client.readResource({ uri: 'sandgate://scripts/greet' });
      assert.equal((read.contents[0] as { text: string }).text, greet);
      await assert.rejects(client.readResource({ uri: 'sandgate://scripts/nope' }), /no resource/);
      const { client: other } = await mcpClient(s, { apiKey: KEY_B });
      t.after(() => other.close());
      assert.deepEqual((await other.listResources()).resources, [], 'another tenant lists none');
      await assert.rejects(other.readResource({ uri: 'sandgate://scripts/greet' }), /no resource/);
    },
  );

  await t.test('at most SANDGATE_MAX_SCRIPTS per tenant', async () => {
    // greet, argv-js, argv-ts, argv-sh and answer: the tenant is at its maximum of 5.
    assert.equal((await a('GET', '/v1/scripts')).body.scripts.length, 5);
    const over = await a('POST', '/v1/scripts', { name: 'one-more', language: 'bash', code: 'echo more' });
    assert.equal(over.status, 429);
    assert.equal(over.body.code, 'quota_exceeded');
    assert.equal(over.headers.get('retry-after'), '60', 'every 429 says when to retry');
  });
});
