import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SandgateError } from '@sandgate/contracts';
import { ToolFailure, errorObject, toolError, toolResult } from './tool-result.ts';

const ctx = { sessionId: 'sess_0123456789ab', path: 'sales.csv', maxSessions: 5 };

test("sandgate errors become the contract's error objects, in its words", () => {
  const cases: [string, string][] = [
    ['file_exists', 'sales.csv already exists. Set overwrite=true to replace.'],
    ['session_busy', 'A run is already in progress for this session. Wait for it to complete.'],
    ['max_sessions', 'Maximum 5 concurrent sessions reached. Close an existing session first.'],
    ['session_not_found', 'No active session with id sess_0123456789ab'],
  ];
  for (const [code, message] of cases) {
    const e = errorObject(new SandgateError(code as never, 'internal wording'), ctx);
    assert.deepEqual(e, { error: code, message, session_id: ctx.sessionId });
  }
  assert.deepEqual(errorObject(new SandgateError('file_not_found', 'x'), { ...ctx, path: '/mnt/data/chart.png' }), {
    error: 'not_found',
    message: 'No artifact at /mnt/data/chart.png',
    session_id: ctx.sessionId,
  });
  const other = new SandgateError('invalid_path', 'path segments ".." are not allowed');
  assert.deepEqual(errorObject(other, { ...ctx, sessionId: undefined }), {
    error: 'invalid_path',
    message: 'path segments ".." are not allowed',
  });
});

test('a ToolFailure keeps its fields; anything unexpected is internal, without detail', () => {
  const body = { error: 'artifact_too_large', message: 'm', size_bytes: 3, download_url: 'u' };
  assert.deepEqual(errorObject(new ToolFailure(body), ctx), { ...body, session_id: ctx.sessionId });
  const internal = errorObject(new Error('ECONNREFUSED 10.0.0.3:6379'), ctx);
  assert.equal(internal.error, 'internal');
  assert.doesNotMatch(internal.message, /ECONNREFUSED/);
});

test('results and errors carry the object as structuredContent and as text', () => {
  const ok = toolResult({ result: { a: 1 }, images: [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }] });
  assert.deepEqual(ok, {
    content: [
      { type: 'text', text: '{"a":1}' },
      { type: 'image', data: 'AAAA', mimeType: 'image/png' },
    ],
    structuredContent: { a: 1 },
  });
  const err = toolError({ error: 'not_found', message: 'm' });
  assert.equal(err.isError, true);
  assert.deepEqual(JSON.parse((err.content[0] as { text: string }).text), err.structuredContent);
});
