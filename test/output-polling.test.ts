import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';

test('a polling client follows a run by byte offsets: every byte once, in order, cut on character boundaries', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const code = [
    'import sys, time',
    'for i in range(20):',
    '    print(f"line {i} é€😀", flush=True)',
    '    print(f"warn {i}", file=sys.stderr, flush=True)',
    '    time.sleep(0.05)',
  ].join('\n');
  const run = await s.api('POST', '/v1/executions', { language: 'python', code });
  assert.equal(run.status, 202);
  let stdout = '';
  let stderr = '';
  let at = { out: 0, err: 0 };
  let polls = 0;
  for (;;) {
    const r = await s.api(
      'GET',
      `/v1/executions/${run.body.id}/output?stdout_offset=${at.out}&stderr_offset=${at.err}&max_bytes=7`,
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(Buffer.byteLength(r.body.stdout) <= 7 && Buffer.byteLength(r.body.stderr) <= 7);
    assert.equal(r.body.stdout_offset, at.out + Buffer.byteLength(r.body.stdout));
    stdout += r.body.stdout;
    stderr += r.body.stderr;
    polls++;
    const moved = r.body.stdout_offset !== at.out || r.body.stderr_offset !== at.err;
    at = { out: r.body.stdout_offset, err: r.body.stderr_offset };
    if (r.body.ended && !moved) break;
  }
  const expected = Array.from({ length: 20 }, (_, i) => `line ${i} é€😀\n`).join('');
  assert.equal(stdout, expected, 'the whole output, each byte once, no character split');
  assert.equal(stderr, Array.from({ length: 20 }, (_, i) => `warn ${i}\n`).join(''));
  assert.ok(polls > 20, `${polls} polls: each answer carried at most 7 bytes of each stream`);

  // Offsets that this endpoint never gave are refused.
  const inside = Buffer.byteLength('line 0 é') - 1; // the second byte of é
  for (const q of [`stdout_offset=${inside}`, `stderr_offset=${Buffer.byteLength(stderr) + 1}`]) {
    const r = await s.api('GET', `/v1/executions/${run.body.id}/output?${q}`);
    assert.equal(r.status, 416, q);
    assert.equal(r.body.code, 'range_not_satisfiable');
  }
  assert.equal(
    (await s.api('GET', `/v1/executions/${run.body.id}/output?stdout_offset=-1`)).body.code,
    'validation_failed',
  );
});
