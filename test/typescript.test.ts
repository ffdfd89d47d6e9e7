import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, type Stack } from './harness.ts';

/** language "typescript": types stripped by esbuild in the runtime image, an ES module run by node with source maps. */

const run = async (s: Stack, body: Record<string, unknown>) => {
  const res = await s.api('POST', '/v1/executions?wait=60', { language: 'typescript', ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.result as Record<string, any>;
};

test("typescript: types, top-level await, ES modules, stdin; errors point at the user's lines", async (t) => {
  const s = await startStack();
  t.after(() => s.close());

  await t.test('a typed ES module with top-level await, imports, stdin, env and a file it writes', async () => {
    const r = await run(s, {
      stdin: 'from stdin',
      env: { GREETING: 'hello' },
      code: [
        "import { readFileSync, writeFileSync } from 'node:fs';",
        'interface Point { x: number; y: number }',
        'const sum = (p: Point): number => p.x + p.y;',
        'const input: string = readFileSync(0, "utf8");',
        'const later = await new Promise<number>((resolve) => setTimeout(() => resolve(sum({ x: 40, y: 2 })), 10));',
        'console.log(process.env.GREETING, input, later, typeof require);',
        'writeFileSync("out.json", JSON.stringify({ later }));',
      ].join('\n'),
    });
    assert.equal(r.state, 'completed', r.stderr);
    assert.equal(r.stdout, 'hello from stdin 42 undefined\n', 'an ES module: no require');
    assert.deepEqual(
      r.artifacts.map((a: any) => a.path),
      ['out.json'],
    );
  });

  await t.test('a thrown error: the stack trace names main.ts and the line it was thrown on', async () => {
    const r = await run(s, {
      code: 'const a: number = 1;\n\nfunction fail(): never {\n  throw new Error("boom " + a);\n}\nfail();',
    });
    assert.equal(r.state, 'failed');
    assert.equal(r.exit_code, 1);
    assert.match(r.stderr, /Error: boom 1/);
    assert.match(r.stderr, /main\.ts:4:9/, r.stderr);
  });

  await t.test('a syntax error fails before anything runs, with its line and column', async () => {
    const r = await run(s, { code: 'console.log("never");\nconst x: number = ;' });
    assert.equal(r.state, 'failed');
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /main\.ts:2:18/);
  });

  await t.test("in a process session too, with the session's files", async () => {
    const session = (await s.api('POST', '/v1/sessions', { mode: 'process' })).body.id as string;
    const first = await run(s, {
      session_id: session,
      code: 'import { writeFileSync } from "node:fs";\nwriteFileSync("n.txt", String(6 * 7));',
    });
    assert.equal(first.state, 'completed', first.stderr);
    const second = await run(s, {
      session_id: session,
      code: 'import { readFileSync } from "node:fs";\nconsole.log(readFileSync("n.txt", "utf8"));',
    });
    assert.equal(second.stdout, '42\n');
  });

  await t.test('the deployment lists it', async () => {
    const runtimes = (await s.api('GET', '/v1/runtimes')).body.runtimes as { language: string; version: string }[];
    assert.match(runtimes.find((r) => r.language === 'typescript')?.version ?? '', /esbuild/);
  });
});
