import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startStack } from './harness.ts';

/** The shell block of the README's curl walk-through, exactly as a reader copies it. */
async function walkThrough(): Promise<string> {
  const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Walk-through with curl'));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  assert.ok(block, 'the walk-through has a sh block');
  return block[1]!;
}

test('README: the curl walk-through runs as written (bash, curl, jq) against a real stack', async (t) => {
  const s = await startStack();
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-readme-'));
  t.after(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });
  const script = await walkThrough();
  const { stdout } = await promisify(execFile)('bash', ['-e', '-o', 'pipefail', '-c', script], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, S: s.url },
    maxBuffer: 16 << 20,
    timeout: 300_000,
  });
  // 2. the upload; 3. the analysis and its two artifacts; 5. the traceback; 6. the live stream; 7. the notebook.
  assert.match(stdout, /"path": "marketing\.csv"/);
  const run = JSON.parse(await readFile(join(dir, 'run.json'), 'utf8'));
  assert.equal(run.result.state, 'completed', run.result.stderr);
  assert.deepEqual(run.result.artifacts.map((a: { path: string }) => a.path).sort(), ['cpa.png', 'report.pdf']);
  assert.deepEqual([...(await readFile(join(dir, 'cpa.png'))).subarray(1, 4)], [...Buffer.from('PNG')]);
  assert.equal((await readFile(join(dir, 'report.pdf'))).subarray(0, 5).toString(), '%PDF-');
  assert.match(stdout, /"state": "failed"[\s\S]*KeyError: 'revenue'/);
  assert.match(stdout, /event: stdout[\s\S]*event: result/);
  assert.match(stdout, /\{"state":"completed","stdout":"","value":"42"\}/);
  // 8. a pause keeps the variable, a resume brings it back; 9. two forks each double their own copy of it.
  assert.match(stdout, /\{"state":"paused","saved":1\}\n\{"state":"idle","restored":1\}\n.*"value":"42"/);
  const forks = [...stdout.matchAll(/\{"fork":"(sess_[0-9a-f]{12})","value":"82"\}/g)].map((m) => m[1]);
  assert.equal(new Set(forks).size, 2, stdout);
  assert.match(stdout, /"value":"82"\}\n\{"state":"completed","stdout":"","value":"41"\}/, 'the source kept its own');
});
