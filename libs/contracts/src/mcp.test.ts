import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Type, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { MCP_TOOLS, McpToolErrorSchema, RunOutputSchema } from './mcp.ts';

test('every MCP tool has an object input schema and an output schema that also admits the error object', () => {
  assert.equal(new Set(MCP_TOOLS.map((t) => t.name)).size, MCP_TOOLS.length);
  for (const tool of MCP_TOOLS) {
    type Served = { inputSchema: Record<string, unknown>; outputSchema: Record<string, unknown> };
    const served = JSON.parse(JSON.stringify(tool)) as Served;
    assert.equal(served.inputSchema.type, 'object', tool.name);
    assert.equal(served.outputSchema.type, 'object', tool.name);
    assert.ok(!JSON.stringify(served).includes('$ref'), `${tool.name}: self-contained, no $ref`);
    const output = Type.Union((tool.outputSchema as unknown as { anyOf: TSchema[] }).anyOf);
    assert.ok(Value.Check(output, { error: 'session_busy', message: 'm' }), tool.name);
    assert.ok(!Value.Check(output, { nothing: 1 }), tool.name);
  }
});

test("the run output has the contract's fields", () => {
  const run = {
    session_id: 'sess_0123456789ab',
    run_id: 'exec_0123456789abcdef',
    state: 'completed',
    exit_code: 0,
    stdout: '',
    stderr: '',
    stdout_truncated: false,
    stderr_truncated: false,
    artifacts: [],
    duration_ms: 5,
  };
  assert.ok(Value.Check(RunOutputSchema, run));
  assert.ok(!Value.Check(RunOutputSchema, { ...run, artifacts: undefined }));
  const tooLarge = { error: 'artifact_too_large', message: 'm', size_bytes: 1, download_url: 'u' };
  assert.ok(Value.Check(McpToolErrorSchema, tooLarge));
});
