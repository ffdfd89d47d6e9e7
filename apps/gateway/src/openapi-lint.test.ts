import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const cli = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');

test('openapi/openapi.json passes the Redocly linter (redocly.yaml: recommended-strict, every rule an error)', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [cli, 'lint', 'openapi/openapi.json', '--format=json'],
    {
      cwd: root,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      maxBuffer: 16 << 20,
    },
  ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as {
    totals: { errors: number; warnings: number; ignored: number };
    problems: { ruleId: string; message: string }[];
  };
  const problems = report.problems.map((p) => `${p.ruleId}: ${p.message}`);
  assert.deepEqual(problems, [], 'lint problems');
  assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
});
