import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startStack } from '../harness.ts';

const run = promisify(execFile);
const BIN = join(import.meta.dirname, '../../node_modules/.bin');
const KEY = 'f'.repeat(32);

interface NewmanRun {
  run: {
    executions: { item: { name: string }; request: { method: string; url: unknown }; response?: { code: number } }[];
  };
}

// The Postman collection, made once for the file (Portman takes ~6 s of CPU); each run sets its `baseUrl` variable.
const collectionDir = await mkdtemp(join(tmpdir(), 'sandgate-fuzz-collection-'));
const collection = join(collectionDir, 'collection.json');
after(() => rm(collectionDir, { recursive: true, force: true }));
before(async () => {
  await run(
    join(BIN, 'portman'),
    [
      '-l',
      join(import.meta.dirname, '../../openapi/openapi.json'),
      '-b',
      'http://127.0.0.1:1',
      '-c',
      join(import.meta.dirname, 'portman-config.json'),
      '-o',
      collection,
      '--syncPostman',
      'false',
    ],
    { timeout: 120_000 },
  );
});

/**
 * Portman turns openapi/openapi.json into a Postman collection: every operation with the document's examples, plus
 * fuzz variations (required fields removed, numbers past their minimum and maximum, strings past their lengths); newman
 * sends it to a real stack. The oracle is the stack's own check of its traffic against the document (harness.ts): a
 * response the document does not declare, or a request it forbids that was accepted, fails the test; so does any 5xx.
 */
async function fuzz(t: TestContext, baseUrl: string, token: string): Promise<Map<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-fuzz-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const report = join(dir, 'run.json');
  // newman exits non-zero when a generated contract assertion fails; the oracle here is the stack's spec check.
  await run(
    join(BIN, 'newman'),
    [
      'run',
      collection,
      '--env-var',
      `baseUrl=${baseUrl}`,
      '--env-var',
      `bearerToken=${token}`,
      '--reporters',
      'json',
      '--reporter-json-export',
      report,
      '--timeout-request',
      '60000',
    ],
    { timeout: 300_000 },
  ).catch(() => {});
  const {
    run: { executions },
  } = JSON.parse(await readFile(report, 'utf8')) as NewmanRun;
  const codes = new Map<string, number>();
  for (const e of executions) {
    const code = String(e.response?.code ?? 'no answer');
    codes.set(code, (codes.get(code) ?? 0) + 1);
  }
  // Every request went to this stack: the collection's baseUrl is the one this run set.
  const origins = new Set(
    executions.map(({ request: { url } }) => {
      const { host = [], port } = url as { host?: string[]; port?: string };
      return `${host.join('.')}:${port}`;
    }),
  );
  assert.deepEqual([...origins], [new URL(baseUrl).host]);
  const bad = executions
    .filter((e) => !e.response || e.response.code >= 500)
    .map((e) => `${e.item.name}: ${e.response?.code}`);
  assert.deepEqual(bad, [], 'no request goes unanswered or gets a 5xx');
  t.diagnostic(`${executions.length} requests; status codes ${JSON.stringify(Object.fromEntries(codes))}`);
  return codes;
}

test('fuzzing every operation of the OpenAPI document in open mode: no 5xx, every exchange as documented', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const codes = await fuzz(t, s.url, '');
  assert.ok((codes.get('400') ?? 0) >= 20, 'the fuzz variations reach validation');
  assert.ok((codes.get('201') ?? 0) >= 1 && (codes.get('200') ?? 0) >= 5, 'the valid requests succeed');
});

test('fuzzing with API keys on, with the right key and with none: no 5xx, every exchange as documented', async (t) => {
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY}:fuzzer` } });
  t.after(() => s.close());
  const keyed = await fuzz(t, s.url, KEY);
  assert.ok((keyed.get('400') ?? 0) >= 20 && (keyed.get('201') ?? 0) >= 1);
  const anonymous = await fuzz(t, s.url, '');
  assert.ok((anonymous.get('401') ?? 0) >= 20, 'without a key every protected operation is refused');
});
