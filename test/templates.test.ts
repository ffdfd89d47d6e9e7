import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { startStack, TEST_BACKEND, until, type Stack } from './harness.ts';
import { readSse } from './sse-client.ts';
import { mcpClient, toolsOf } from './mcp-client.ts';

const KEY_A = 'a'.repeat(32);
const KEY_B = 'b'.repeat(32);
const OPERATOR = 'operator-key-templates-0123456789';

// A package the runtime image lacks, from PyPI (which this machine reaches), pinned so that the test knows its version.
const PACKAGE = 'tabulate';
const VERSION = '0.9.0';

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
type Api = (method: string, path: string, body?: unknown) => ReturnType<Stack['api']>;
const as =
  (s: Stack, key: string): Api =>
  (method, path, body) =>
    s.api(method, path, body, bearer(key));

/** Follows a template's build log to its `result` event; answers the log's text and the result. */
async function followBuild(s: Stack, name: string): Promise<{ log: string; result: { state: string } }> {
  const { status, events } = await readSse(`${s.url}/v1/templates/${name}/build/events`, { headers: bearer(OPERATOR) });
  assert.equal(status, 200, `build events of ${name}`);
  const result = events.find((e) => e.event === 'result');
  assert.ok(result, `the stream of ${name} ends with its result: ${JSON.stringify(events.slice(-3))}`);
  const log = events
    .filter((e) => e.event === 'log')
    .map((e) => (JSON.parse(e.data) as { text: string }).text)
    .join('');
  return { log, result: JSON.parse(result.data) as { state: string } };
}

/** Removes what a stack's template builds left on the engine (its images carry the stack's deployment label). */
async function removeTemplateImages(s: Stack): Promise<void> {
  const docker = new Dockerode();
  const label = [`org.sandgate.deployment=${s.config.redisPrefix}`];
  // Sandboxes the stack's worker left behind (none, normally) hold their image.
  for (const c of await docker.listContainers({ all: true, filters: { label } })) {
    await docker.getContainer(c.Id).remove({ force: true });
  }
  for (const img of await docker.listImages({ filters: { label } }))
    await docker.getImage(img.Id).remove({ force: true });
  assert.deepEqual(await docker.listImages({ filters: { label } }), [], 'the test leaves no template image behind');
}

test(
  'templates on Docker: declared and built through the API, run by sessions and one-shots, limited per tenant',
  { skip: TEST_BACKEND !== 'docker' && 'Docker builds template images; Kubernetes names them (kubernetes test)' },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'sandgate-templates-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'templates.yaml');
    // A template of the file: no package index needed, its files, env and setup command only.
    await writeFile(
      file,
      [
        'templates:',
        '  - name: greet',
        '    description: files, env and a setup command',
        '    env: { GREETING: hello-from-greet }',
        '    files:',
        '      - path: /opt/greet/words.txt',
        '        content: "words of the template\\n"',
        '    setup: echo "set up by greet" > /opt/greet/setup.txt',
        '',
      ].join('\n'),
    );
    const s = await startStack({
      env: {
        SANDGATE_API_KEYS: `${KEY_A}:tenantA,${KEY_B}:tenantB`,
        SANDGATE_OPERATOR_KEYS: OPERATOR,
        SANDGATE_TEMPLATES: file,
        SANDGATE_TENANT_TEMPLATES: JSON.stringify({ tenantB: ['greet'] }),
        // Builds trust what this host trusts (on a network whose proxy inspects TLS, its CA is in there).
        SANDGATE_TEMPLATE_CA_FILE: process.env.SSL_CERT_FILE ?? '/etc/ssl/certs/ca-certificates.crt',
      },
    });
    t.after(async () => {
      await s.close();
      await removeTemplateImages(s);
    });
    const a = as(s, KEY_A);
    const b = as(s, KEY_B);
    const op = as(s, OPERATOR);

    await t.test(
      'a template of SANDGATE_TEMPLATES is built at start, its files, env and setup in its sandboxes',
      async () => {
        const { result } = await followBuild(s, 'greet');
        assert.equal(result.state, 'ready');
        const got = await op('GET', '/v1/templates/greet');
        assert.equal(got.status, 200);
        assert.equal(got.body.state, 'ready');
        assert.equal(got.body.source, 'file');
        assert.match(got.body.image, new RegExp(`^sandgate-template/${s.config.redisPrefix}:[0-9a-f]{24}$`));
        const run = await b('POST', '/v1/executions?wait=60', {
          language: 'bash',
          template: 'greet',
          code: 'cat /opt/greet/words.txt /opt/greet/setup.txt; echo "$GREETING"; id -u',
        });
        assert.equal(run.status, 200, JSON.stringify(run.body));
        assert.equal(run.body.state, 'completed', JSON.stringify(run.body));
        assert.equal(run.body.result.stdout, 'words of the template\nset up by greet\nhello-from-greet\n1000\n');
        // The file's templates are the file's: the API neither replaces nor deletes them.
        const replace = await op('POST', '/v1/templates', { name: 'greet', env: { GREETING: 'other' } });
        assert.equal(replace.status, 409);
        assert.equal(replace.body.code, 'template_from_file');
        assert.equal((await op('DELETE', '/v1/templates/greet')).body.code, 'template_from_file');
      },
    );

    const recipe = { name: 'tables', description: `${PACKAGE} from PyPI`, python_packages: [`${PACKAGE}==${VERSION}`] };

    await t.test('only an operator key makes templates', async () => {
      const r = await a('POST', '/v1/templates', recipe);
      assert.equal(r.status, 403);
      assert.equal(r.body.code, 'forbidden');
      const bad = await op('POST', '/v1/templates', { name: 'Bad Name', python_packages: ['x; rm -rf /'] });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'validation_failed');
      const escape = await op('POST', '/v1/templates', {
        name: 'escape',
        files: [{ path: '/etc/../mnt/x', content: '' }],
      });
      assert.equal(escape.status, 400);
      assert.equal(escape.body.code, 'validation_failed');
    });

    let image = '';
    await t.test('POST /v1/templates builds it (202), its log streamed as SSE until its result', async () => {
      const made = await op('POST', '/v1/templates', recipe);
      assert.equal(made.status, 202, JSON.stringify(made.body));
      assert.equal(made.body.state, 'building');
      assert.equal(made.headers.get('location'), `${s.url}/v1/templates/tables`);
      assert.equal(made.body.links.build_events, `${s.url}/v1/templates/tables/build/events`);
      // Not ready yet: a session of it is refused, and says why.
      const early = await a('POST', '/v1/sessions', { template: 'tables' });
      if (early.status !== 201) assert.equal(early.body.code, 'template_not_ready');
      else await a('DELETE', `/v1/sessions/${early.body.id}`);
      const { log, result } = await followBuild(s, 'tables');
      assert.equal(result.state, 'ready', log);
      // Its pip step, as the engine ran it (or found it in its build cache).
      assert.match(log, new RegExp(`Step \\d+/\\d+ : RUN .*'${PACKAGE}==${VERSION}'`));
      const got = await op('GET', '/v1/templates/tables');
      assert.equal(got.body.state, 'ready');
      assert.deepEqual(got.body.python_packages, [`${PACKAGE}==${VERSION}`]);
      assert.match(got.body.recipe_sha256, /^[0-9a-f]{64}$/);
      image = got.body.image as string;
      const inspected = await new Dockerode().getImage(image).inspect();
      assert.equal(inspected.Config.Labels?.['org.sandgate.template.hash'], got.body.recipe_sha256);
    });

    let session = { body: { id: '' } } as Awaited<ReturnType<Api>>;
    const code = `import ${PACKAGE}; print(${PACKAGE}.__version__)`;
    await t.test('a run on the template imports the package; a run on the runtime image cannot', async () => {
      session = await a('POST', '/v1/sessions', { template: 'tables' });
      assert.equal(session.status, 201, JSON.stringify(session.body));
      assert.equal(session.body.template, 'tables');
      const onIt = await a('POST', '/v1/executions?wait=60', { language: 'python', code, session_id: session.body.id });
      assert.equal(onIt.body.state, 'completed', JSON.stringify(onIt.body));
      assert.equal(onIt.body.result.stdout, `${VERSION}\n`);
      const oneShot = await a('POST', '/v1/executions?wait=60', { language: 'python', code, template: 'tables' });
      assert.equal(oneShot.body.state, 'completed', JSON.stringify(oneShot.body));
      assert.equal(oneShot.body.result.stdout, `${VERSION}\n`);
      const plain = await a('POST', '/v1/executions?wait=60', { language: 'python', code });
      assert.equal(plain.body.state, 'failed', JSON.stringify(plain.body));
      assert.match(plain.body.result.stderr, new RegExp(`No module named '${PACKAGE}'`));
      const plainSession = await a('POST', '/v1/sessions', {});
      assert.equal(plainSession.body.template, null);
      const inPlain = await a('POST', '/v1/executions?wait=60', {
        language: 'python',
        code,
        session_id: plainSession.body.id,
      });
      assert.equal(inPlain.body.state, 'failed');
      // A session's runs use its template; a run cannot name another one.
      const other = await a('POST', '/v1/executions', {
        language: 'python',
        code,
        session_id: plainSession.body.id,
        template: 'tables',
      });
      assert.equal(other.status, 400);
      assert.equal(other.body.code, 'validation_failed');
      await a('DELETE', `/v1/sessions/${plainSession.body.id}`);
    });

    await t.test('a template in use by a live session is not deleted from under it', async () => {
      const del = await op('DELETE', '/v1/templates/tables');
      assert.equal(del.status, 409);
      assert.equal(del.body.code, 'template_in_use');
      assert.match(del.body.detail, new RegExp(session.body.id));
      const again = await a('POST', '/v1/executions?wait=60', {
        language: 'python',
        code,
        session_id: session.body.id,
      });
      assert.equal(again.body.result.stdout, `${VERSION}\n`);
      assert.equal((await a('DELETE', `/v1/sessions/${session.body.id}`)).status, 204);
    });

    await t.test('the same recipe is not built again: cached by its hash', async () => {
      const twin = await op('POST', '/v1/templates', { ...recipe, name: 'tables-twin' });
      assert.equal(twin.status, 200, JSON.stringify(twin.body));
      assert.equal(twin.body.state, 'ready');
      assert.equal(twin.body.image, image);
      const same = await op('POST', '/v1/templates', recipe);
      assert.equal(same.status, 200);
      assert.equal(same.body.image, image);
      assert.equal((await op('DELETE', '/v1/templates/tables-twin')).status, 204);
    });

    await t.test('tenants limited to a list of templates, and unknown names', async () => {
      const listB = await b('GET', '/v1/templates');
      assert.deepEqual(
        listB.body.templates.map((x: { name: string }) => x.name),
        ['greet'],
      );
      const listOp = await op('GET', '/v1/templates');
      assert.deepEqual(listOp.body.templates.map((x: { name: string }) => x.name).sort(), ['greet', 'tables']);
      const session = await b('POST', '/v1/sessions', { template: 'tables' });
      assert.equal(session.status, 403);
      assert.equal(session.body.code, 'template_not_allowed');
      const run = await b('POST', '/v1/executions', { language: 'python', code: 'print(1)', template: 'tables' });
      assert.equal(run.status, 403);
      assert.equal(run.body.code, 'template_not_allowed');
      // A tenant is not told of templates it may not use.
      assert.equal((await b('GET', '/v1/templates/tables')).body.code, 'template_not_found');
      for (const r of [
        await a('POST', '/v1/sessions', { template: 'nope' }),
        await a('POST', '/v1/executions', { language: 'python', code: 'print(1)', template: 'nope' }),
        await a('GET', '/v1/templates/nope'),
        await op('DELETE', '/v1/templates/nope'),
      ]) {
        assert.equal(r.status, 404, JSON.stringify(r.body));
        assert.equal(r.body.code, 'template_not_found');
      }
    });

    await t.test('over MCP: list_templates, and create_session makes a session of one', async () => {
      const { client } = await mcpClient(s, { apiKey: KEY_B });
      t.after(() => client.close());
      const { ok, fail } = toolsOf(client);
      const listed = await ok('list_templates', {});
      assert.deepEqual(
        listed.templates.map((x: { name: string; state: string }) => [x.name, x.state]),
        [['greet', 'ready']],
      );
      assert.equal((await fail('create_session', { template: 'tables' })).error, 'template_not_allowed');
      assert.equal((await fail('create_session', { template: 'nope' })).error, 'template_not_found');
      const made = await ok('create_session', { template: 'greet' });
      assert.equal(made.template, 'greet');
      const run = await ok('run_code', { session_id: made.session_id, language: 'bash', code: 'echo "$GREETING"' });
      assert.equal(run.stdout, 'hello-from-greet\n');
      await ok('close_session', { session_id: made.session_id });
    });

    await t.test('a recipe that fails answers with its build log and template_build_failed', async () => {
      const marker = 'the-setup-of-broken-fails';
      const r = await op('POST', '/v1/templates?wait=300', { name: 'broken', setup: `echo ${marker}; exit 3` });
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.equal(r.body.code, 'template_build_failed');
      assert.match(r.body.log, new RegExp(marker));
      const got = await op('GET', '/v1/templates/broken');
      assert.equal(got.body.state, 'failed');
      assert.match(got.body.build.log_tail, new RegExp(marker));
      const session = await a('POST', '/v1/sessions', { template: 'broken' });
      assert.equal(session.status, 409);
      assert.equal(session.body.code, 'template_not_ready');
      assert.equal((await op('DELETE', '/v1/templates/broken')).status, 204);
    });

    await t.test('deleted: gone from the API, no session can be made of it', async () => {
      assert.equal((await op('DELETE', '/v1/templates/tables')).status, 204);
      assert.equal((await op('GET', '/v1/templates/tables')).body.code, 'template_not_found');
      const s2 = await a('POST', '/v1/sessions', { template: 'tables' });
      assert.equal(s2.body.code, 'template_not_found');
    });
  },
);

test(
  "a template's warm pool serves its one-shots, its hits and misses in /metrics and the operator's stats",
  { skip: TEST_BACKEND !== 'docker' && 'Docker builds template images; Kubernetes names them (kubernetes test)' },
  async (t) => {
    const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY_A}:tenantA`, SANDGATE_OPERATOR_KEYS: OPERATOR } });
    t.after(async () => {
      await s.close();
      await removeTemplateImages(s);
    });
    const a = as(s, KEY_A);
    const op = as(s, OPERATOR);
    const made = await op('POST', '/v1/templates?wait=300', {
      name: 'pooled',
      files: [{ path: '/opt/pooled.txt', content: 'from the pool\n' }],
      pool_size: 1,
    });
    assert.equal(made.status, 200, JSON.stringify(made.body));
    assert.equal(made.body.pool_size, 1);

    const pools = async () => (await op('GET', '/v1/system/stats')).body.pool.templates;
    await until('the template pool to hold its warm sandbox', async () =>
      (await pools()).pooled?.ready === 1 ? true : null,
    );
    const run = await a('POST', '/v1/executions?wait=60', {
      language: 'bash',
      template: 'pooled',
      code: 'cat /opt/pooled.txt',
    });
    assert.equal(run.body.state, 'completed', JSON.stringify(run.body));
    assert.equal(run.body.result.stdout, 'from the pool\n');
    const figures = await until('the hit to be counted', async () => {
      const p = (await pools()).pooled;
      return p?.hits >= 1 ? p : null;
    });
    assert.equal(figures.misses, 0, 'the run was served by the pool');
    const stats = (await op('GET', '/v1/system/stats')).body;
    assert.ok(stats.pool.hits >= figures.hits, "the deployment's pool figures count the template's too");

    const metrics = await (await fetch(`${s.url}/metrics`, { headers: bearer(OPERATOR) })).text();
    assert.match(metrics, /^sandgate_pool_events_total\{[^}]*event="hit"[^}]*template="pooled"[^}]*\} [1-9]/m);
    assert.match(metrics, /^sandgate_template_pool_ready\{template="pooled"\} \d+$/m);
    assert.equal((await op('DELETE', '/v1/templates/pooled')).status, 204);
  },
);
