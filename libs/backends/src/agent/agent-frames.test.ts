import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeMessage, FrameDecoder, INTERRUPT, parseFrame, type AgentFrame } from './agent-frames.ts';

test('frames are parsed with every field checked', () => {
  assert.deepEqual(parseFrame('{"t":"ready"}'), { t: 'ready' });
  assert.deepEqual(parseFrame('{"t":"started","id":"exec_1"}'), { t: 'started', id: 'exec_1' });
  assert.deepEqual(parseFrame('{"t":"out","d":"a\\u00ff"}'), { t: 'out', d: 'a\u00ff' });
  assert.deepEqual(parseFrame('{"code":0,"restarted":true,"value":"42","t":"exit","id":"e","oom":false}'), {
    t: 'exit',
    id: 'e',
    code: 0,
    value: '42',
    restarted: true,
  });
  assert.deepEqual(parseFrame('{"t":"exit","code":-1,"id":null,"oom":true}'), {
    t: 'exit',
    id: null,
    code: -1,
    oom: true,
  });
  for (const bad of [
    '',
    'print',
    '[]',
    'null',
    '{"t":"out"}',
    '{"t":"out","d":1}',
    '{"t":"exit","code":1.5}',
    '{"t":"exit"}',
    '{"t":"other"}',
  ]) {
    assert.equal(parseFrame(bad), undefined, bad);
  }
});

test('the decoder reassembles lines across chunks and skips what is not a frame', () => {
  const frames: AgentFrame[] = [];
  const decoder = new FrameDecoder((f) => frames.push(f));
  const stream = Buffer.from(
    '{"t":"ready"}\nnoise\n{"t":"out","d":"hel' + 'lo"}\n{"t":"exit","code":3,"id":"x"}\n{"t":"out","d":"partial',
  );
  for (let i = 0; i < stream.length; i += 5) decoder.push(stream.subarray(i, i + 5));
  assert.deepEqual(frames, [{ t: 'ready' }, { t: 'out', d: 'hello' }, { t: 'exit', id: 'x', code: 3 }]);
});

test('an overlong line is dropped whole, and the next line still parses', () => {
  const frames: AgentFrame[] = [];
  const decoder = new FrameDecoder((f) => frames.push(f), 64);
  decoder.push(Buffer.from(`{"t":"out","d":"${'x'.repeat(40)}`));
  decoder.push(Buffer.from(`${'y'.repeat(40)}"}\n{"t":"ready"}\n`));
  decoder.push(Buffer.from(`{"t":"out","d":"${'z'.repeat(100)}"}\n{"t":"out","d":"ok"}\n`));
  assert.deepEqual(frames, [{ t: 'ready' }, { t: 'out', d: 'ok' }]);
});

test('messages are one line each, whatever the code contains', () => {
  const line = encodeMessage({
    op: 'run',
    id: 'e',
    language: 'python',
    code: 'print("a\\nb")\n\u2028',
    env: { A: '1' },
    stdin: 'x\ny',
    mode: 'process',
    cap: 10,
  });
  assert.equal(line.indexOf('\n'), line.length - 1);
  assert.equal(JSON.parse(line).code, 'print("a\\nb")\n\u2028');
  assert.equal(encodeMessage(INTERRUPT), '{"op":"interrupt"}\n');
});
