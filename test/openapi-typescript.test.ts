import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import openapiTS, { astToString } from 'openapi-typescript';
import { tsImport } from 'tsx/esm/api';
import { startStack } from './harness.ts';

// A client as its users make one with the most common generator besides hey-api: openapi-typescript's types (its
// defaults, as `npx openapi-typescript openapi/openapi.json -o schema.d.ts` makes them) and openapi-fetch.
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SPEC = new URL('../openapi/openapi.json', import.meta.url);

// Bodies leave out what the server defaults (mode, grace_ms, ttl_seconds); query parameters with defaults too.
const USAGE = `
import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

export async function workflow(baseUrl: string) {
  const api = createClient<paths>({ baseUrl });
  const session = await api.POST('/v1/sessions', { body: {} });
  const id = session.data!.id;
  const upload = await api.POST('/v1/sessions/{id}/files', {
    params: { path: { id } },
    body: { path: 'in/name.txt', content_base64: btoa('openapi-fetch') },
  });
  const run = await api.POST('/v1/executions', {
    params: { query: { wait: 60 } },
    body: { session_id: id, language: 'python', code: "print('hello', open('in/name.txt').read())" },
  });
  const read = await api.GET('/v1/executions/{id}', { params: { path: { id: run.data!.id } } });
  const stdout: string | undefined = read.data?.result?.stdout;
  const bad = await api.POST('/v1/executions', { body: { language: 'cobol', code: 'DISPLAY 1' } });
  const code: string | undefined = bad.error?.code;
  return { session: session.data, upload: upload.data, run: run.response.status, stdout, bad: bad.response, code };
}

// Compiled, not run: these need a running service.
export const compiledOnly = (api: ReturnType<typeof createClient<paths>>) => [
  api.POST('/v1/sessions/{id}/services/{name}/stop', { params: { path: { id: 's', name: 'web' } }, body: {} }),
  api.POST('/v1/sessions/{id}/services/{name}/preview', { params: { path: { id: 's', name: 'web' } }, body: {} }),
  api.GET('/v1/sessions'),
  api.GET('/v1/executions/{id}/output', { params: { path: { id: 'exec_1' } } }),
];
`;

// Each line ends with the error the compiler must report there. (A misspelt property name is no error: openapi-fetch's
// generic parameters escape TypeScript's excess-property check. A wrong value, type or missing field is one.)
const WRONG = `
import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

const api = createClient<paths>({ baseUrl: 'http://127.0.0.1:8080' });
await api.POST('/v1/executions', { body: { language: 'python', code: '1', mode: 'debug' } }); // TS2322
await api.POST('/v1/executions', { body: { language: 'python', code: 1 } }); // TS2322
await api.POST('/v1/sessions/{id}/files', { params: { path: { id: 's' } }, body: { path: 'a.txt' } }); // TS2322
await api.GET('/v1/executions/{id}', { params: { path: {} } }); // TS2741
await api.GET('/v1/executions', { params: { query: { limit: 'all' } } }); // TS2322
(await api.GET('/v1/sessions/{id}', { params: { path: { id: 's' } } })).data?.ttl_seconds.trim(); // TS2339
`;

/** The compiler's errors in each file, as `line: TSnnnn`. */
function typeErrors(files: string[]): Map<string, string[]> {
  // As a web app compiles it: the target's default library (with the DOM's fetch) and no @types/node.
  const program = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
    skipLibCheck: true,
  });
  const found = new Map(files.map((f) => [f, [] as string[]]));
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const where = d.file ? `${d.file.getLineAndCharacterOfPosition(d.start!).line + 1}` : '-';
    const text = `${where}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    // An error elsewhere (the generated schema, a library) counts against the first file.
    const own = found.get(d.file?.fileName ?? '');
    if (own) own.push(text);
    else found.get(files[0]!)!.push(`${d.file?.fileName ?? '(no file)'} ${text}`);
  }
  return found;
}

test('openapi-typescript + openapi-fetch: bodies without defaulted fields compile, wrong ones do not, calls work', async (t) => {
  // Inside the repository, so that the usage files resolve openapi-fetch as an installed package (.cache is ignored).
  await mkdir(join(ROOT, '.cache'), { recursive: true });
  const dir = await mkdtemp(join(ROOT, '.cache', 'openapi-typescript-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'schema.d.ts'), astToString(await openapiTS(SPEC)));
  const [usage, wrong] = [join(dir, 'usage.ts'), join(dir, 'wrong.ts')];
  await writeFile(usage, USAGE);
  await writeFile(wrong, WRONG);

  await t.test('type-check: the usage compiles; every wrong line is an error, and only those', () => {
    const errors = typeErrors([usage, wrong]);
    assert.deepEqual(errors.get(usage), []);
    const expected = WRONG.split('\n').flatMap((line, i) => {
      const code = / \/\/ (TS\d+)$/.exec(line)?.[1];
      return code ? [`${i + 1}: ${code}`] : [];
    });
    assert.equal(expected.length, 6);
    assert.deepEqual(
      errors.get(wrong)!.map((e) => e.split(' ').slice(0, 2).join(' ')),
      expected,
      errors.get(wrong)!.join('\n'),
    );
  });

  await t.test('the same calls against a live gateway and worker', async (live) => {
    const s = await startStack();
    live.after(() => s.close());
    // The usage is TypeScript: load it as its users would run it, through tsx (the test itself runs compiled).
    const { workflow } = (await tsImport(pathToFileURL(usage).href, import.meta.url)) as {
      workflow: (baseUrl: string) => Promise<Record<string, any>>;
    };
    const out = await workflow(s.url);
    assert.match(out.session.id, /^sess_/);
    assert.equal(out.upload.files[0].path, 'in/name.txt');
    assert.equal(out.run, 200, '?wait= answers with the ended run');
    assert.equal(out.stdout, 'hello openapi-fetch\n');
    assert.equal(out.bad.status, 400);
    assert.equal(out.bad.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.equal(out.code, 'unsupported_language');
  });
});
