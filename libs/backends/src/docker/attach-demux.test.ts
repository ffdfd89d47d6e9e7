import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AttachDemuxer } from './attach-demux.ts';

const frame = (kind: number, text: string): Buffer => {
  const payload = Buffer.from(text);
  const header = Buffer.alloc(8);
  header[0] = kind;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
};

test('stdout and stderr payloads are told apart, whatever the chunking', () => {
  const stream = Buffer.concat([
    frame(1, 'out one\n'),
    frame(2, 'err\n'),
    frame(1, ''),
    frame(1, 'out two'),
    frame(0, 'stdin echo'),
  ]);
  for (const size of [1, 3, 8, 9, stream.length]) {
    const out: string[] = [];
    const err: string[] = [];
    const demux = new AttachDemuxer(
      (b) => out.push(b.toString()),
      (b) => err.push(b.toString()),
    );
    for (let i = 0; i < stream.length; i += size) demux.push(stream.subarray(i, i + size));
    assert.equal(out.join(''), 'out one\nout two', `chunks of ${size}`);
    assert.equal(err.join(''), 'err\n');
  }
});
