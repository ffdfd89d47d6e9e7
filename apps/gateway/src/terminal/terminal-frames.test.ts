import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FRAME, FrameReader, MAX_FRAME, frame, resizeFrame } from './terminal-frames.ts';

test('frames come out whole whatever the chunks they arrive in', () => {
  const bytes = Buffer.concat([
    frame(FRAME.data, Buffer.from('hello')),
    resizeFrame(120, 40),
    frame(FRAME.exit, Buffer.from('{"code":3}')),
  ]);
  const reader = new FrameReader();
  const got: { type: number; payload: Buffer }[] = [];
  for (let i = 0; i < bytes.length; i += 3) got.push(...reader.push(bytes.subarray(i, i + 3)));
  assert.deepEqual(
    got.map((f) => f.type),
    [FRAME.data, FRAME.resize, FRAME.exit],
  );
  assert.equal(got[0]!.payload.toString(), 'hello');
  assert.deepEqual([got[1]!.payload.readUInt16BE(0), got[1]!.payload.readUInt16BE(2)], [120, 40]);
  assert.equal(got[2]!.payload.toString(), '{"code":3}');
});

test('a frame larger than the limit is refused before it is buffered', () => {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(MAX_FRAME + 1, 1);
  assert.throws(() => [...new FrameReader().push(head)], /frame of 65537 bytes/);
});
