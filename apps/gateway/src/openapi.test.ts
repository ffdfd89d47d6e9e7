import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
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
    openapi: string; paths: Record<string, Record<string, unknown>>; components: { schemas: Record<string, unknown> };
  };
  assert.equal(doc.openapi, '3.1.0');
  const ops = Object.entries(doc.paths).flatMap(([p, m]) => Object.keys(m).map((verb) => `${verb.toUpperCase()} ${p}`));
  for (const op of [
    'POST /v1/sessions', 'GET /v1/sessions', 'GET /v1/sessions/{id}', 'DELETE /v1/sessions/{id}',
    'POST /v1/sessions/{id}/files', 'PUT /v1/sessions/{id}/files/{*}', 'GET /v1/sessions/{id}/files',
    'DELETE /v1/sessions/{id}/files/{*}', 'GET /files/{session}/{*}', 'POST /v1/executions', 'GET /v1/executions',
    'GET /v1/executions/{id}', 'POST /v1/executions/{id}/cancel', 'GET /v1/executions/{id}/events', 'GET /v1/runtimes',
  ]) assert.ok(ops.includes(op), `${op} missing from ${ops.join(', ')}`);
  for (const name of ['Execution', 'ExecutionResult', 'Artifact', 'Session', 'Problem', 'CreateExecution']) {
    assert.ok(doc.components.schemas[name], `component ${name}`);
  }
});
