import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { CreateExecutionSchema, SharePreviewSchema, StopServiceSchema } from '@sandgate/contracts';
import { openApiDocument, serialiseOpenApi } from './openapi.ts';

// Built once: both tests read the same document.
const generating = openApiDocument(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

test('the committed openapi/openapi.json is what the routes generate (run `npm run openapi` after changing them)', async () => {
  const generated = serialiseOpenApi(await generating);
  const committed = await readFile(new URL('../../../openapi/openapi.json', import.meta.url), 'utf8');
  assert.equal(committed, generated);
});

test('the document is OpenAPI 3.1 with every v1 operation and named components', async () => {
  const doc = (await generating) as {
    openapi: string;
    paths: Record<string, Record<string, unknown>>;
    components: { schemas: Record<string, unknown> };
  };
  assert.equal(doc.openapi, '3.1.0');
  const ops = Object.entries(doc.paths).flatMap(([p, m]) => Object.keys(m).map((verb) => `${verb.toUpperCase()} ${p}`));
  for (const op of [
    'POST /v1/sessions',
    'GET /v1/sessions',
    'GET /v1/sessions/{id}',
    'DELETE /v1/sessions/{id}',
    'POST /v1/sessions/{id}/files',
    'PUT /v1/sessions/{id}/files/{path}',
    'GET /v1/sessions/{id}/files',
    'DELETE /v1/sessions/{id}/files/{path}',
    'GET /files/{session}/{path}',
    'POST /v1/executions',
    'GET /v1/executions',
    'GET /v1/executions/{id}',
    'POST /v1/executions/{id}/cancel',
    'GET /v1/executions/{id}/events',
    'GET /v1/runtimes',
  ])
    assert.ok(ops.includes(op), `${op} missing from ${ops.join(', ')}`);
  for (const name of ['Execution', 'ExecutionResult', 'Artifact', 'Session', 'Problem', 'CreateExecution']) {
    assert.ok(doc.components.schemas[name], `component ${name}`);
  }
});

type Media = Record<string, { schema?: Record<string, unknown> }>;
type Operation = {
  operationId?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; description?: string }[];
  requestBody?: { content: Media };
  responses: Record<string, { content?: Media; headers?: Record<string, unknown> }>;
};
type Doc = { paths: Record<string, Record<string, Operation>>; security: unknown };
const operations = async () =>
  Object.entries(((await generating) as Doc).paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([verb, op]) => ({ key: `${verb.toUpperCase()} ${path}`, op })),
  );
const op = async (key: string) => (await operations()).find((o) => o.key === key)!.op;

test('every operation has a unique, readable operationId and a tag', async () => {
  const ops = await operations();
  const ids = ops.map(({ key, op: o }) => {
    assert.match(o.operationId ?? '', /^[a-z][A-Za-z]+$/, `${key} operationId`);
    assert.ok(o.tags?.length, `${key} has a tag`);
    return o.operationId;
  });
  assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
  for (const id of [
    'createSession',
    'uploadFile',
    'putFile',
    'runExecution',
    'streamExecutionEvents',
    'downloadFile',
  ]) {
    assert.ok(ids.includes(id), id);
  }
});

test('the Fastify wildcard is the documented parameter {path}, which may contain "/"', async () => {
  const text = serialiseOpenApi(await generating);
  assert.ok(!text.includes('{*}') && !text.includes('"name": "*"'), 'no {*} left');
  for (const key of [
    'PUT /v1/sessions/{id}/files/{path}',
    'DELETE /v1/sessions/{id}/files/{path}',
    'GET /files/{session}/{path}',
  ]) {
    const param = (await op(key)).parameters!.find((p) => p.name === 'path' && p.in === 'path');
    assert.match(param?.description ?? '', /may contain `\/`/, key);
  }
});

test('every error response is application/problem+json, nothing else', async () => {
  for (const { key, op: o } of await operations()) {
    for (const [status, r] of Object.entries(o.responses)) {
      if (Number(status) < 400) continue;
      assert.deepEqual(Object.keys(r.content ?? {}), ['application/problem+json'], `${key} ${status}`);
      assert.equal(
        r.content!['application/problem+json']!.schema!.$ref,
        '#/components/schemas/Problem',
        `${key} ${status}`,
      );
    }
  }
});

test('public operations need no key; everything else needs the bearer key', async () => {
  assert.deepEqual(((await generating) as Doc).security, [{ bearer: [] }]);
  assert.deepEqual((await op('GET /healthz')).security, []);
  assert.deepEqual((await op('GET /readyz')).security, []);
  assert.deepEqual((await op('GET /files/{session}/{path}')).security, [{ bearer: [] }, {}], 'a key or a signed URL');
  assert.equal((await op('POST /v1/executions')).security, undefined, 'the global bearer requirement applies');
});

test('bodies and responses the routes stream themselves are documented as served', async () => {
  const upload = await op('POST /v1/sessions/{id}/files');
  assert.deepEqual(Object.keys(upload.requestBody!.content).sort(), ['application/json', 'multipart/form-data']);
  assert.equal(
    upload.requestBody!.content['multipart/form-data']!.schema!.$ref,
    '#/components/schemas/MultipartUpload',
  );
  const put = await op('PUT /v1/sessions/{id}/files/{path}');
  assert.equal(put.requestBody!.content['application/octet-stream']!.schema!.format, 'binary');
  const download = await op('GET /files/{session}/{path}');
  assert.deepEqual(Object.keys(download.responses['200']!.content!), ['*/*'], "the file's own type, not octet-stream");
  assert.equal(download.responses['200']!.content!['*/*']!.schema!.format, 'binary');
  assert.ok(download.responses['206']!.headers!['content-range']);
  const events = await op('GET /v1/executions/{id}/events');
  assert.deepEqual(Object.keys(events.responses['200']!.content!), ['text/event-stream']);
  assert.equal(
    events.responses['200']!.content!['text/event-stream']!.schema!.$ref,
    '#/components/schemas/ExecutionStreamEvent',
  );
});

test('request bodies say their defaults in words (generators keep the fields optional); the server still applies them', async () => {
  const doc = (await generating) as Doc & { components: { schemas: Record<string, any> } };
  const schemas = doc.components.schemas;
  // Every schema a request body reaches, through $refs too.
  const seen = new Set<unknown>();
  const defaults: string[] = [];
  const walk = (node: unknown, at: string): void => {
    if (typeof node !== 'object' || node === null || seen.has(node)) return;
    seen.add(node);
    const { $ref } = node as { $ref?: string };
    if ($ref) return walk(schemas[$ref.split('/').pop()!], $ref);
    if ('default' in node && !at.endsWith('/properties')) defaults.push(at);
    for (const [k, v] of Object.entries(node)) walk(v, `${at}/${k}`);
  };
  for (const { key, op: o } of await operations()) walk(o.requestBody, key);
  assert.deepEqual(defaults, [], 'no `default` in what a request body reaches');
  assert.match(schemas.CreateExecution.properties.mode.description, / Default: `run`\.$/);
  assert.match(schemas.StopService.properties.grace_ms.description, / Default: `5000`\.$/);
  assert.match(schemas.SharePreview.properties.ttl_seconds.description, / Default: `3600`\.$/);
  // Query parameters keep `default` (generators leave parameters optional either way).
  const limit = (await op('GET /v1/sessions')).parameters!.find((p) => p.name === 'limit') as { schema?: unknown };
  assert.deepEqual((limit.schema as { default?: unknown }).default, 50);
  // The schemas the gateway validates with (Ajv useDefaults) keep theirs.
  assert.equal(CreateExecutionSchema.properties.mode.default, 'run');
  assert.equal(StopServiceSchema.properties.grace_ms.default, 5000);
  assert.equal(SharePreviewSchema.properties.ttl_seconds.default, 3600);
});
