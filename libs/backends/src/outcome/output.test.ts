import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { OutputCollector } from './output.ts';

function collector(maxBytes?: number): { out: OutputCollector; forwarded: string[] } {
  const forwarded: string[] = [];
  return { out: new OutputCollector((t) => forwarded.push(t), maxBytes), forwarded };
}

test('forwards text as it arrives and keeps it for the result', () => {
  const { out, forwarded } = collector();
  out.write(Buffer.from('hello '));
  out.write(Buffer.from('world\n'));
  out.end();
  assert.deepEqual(forwarded, ['hello ', 'world\n']);
  assert.equal(out.text, 'hello world\n');
  assert.equal(out.truncated, false);
  assert.equal(out.totalBytes, 12);
});

test('a multi-byte character split across chunks arrives whole', () => {
  const { out, forwarded } = collector();
  const euro = Buffer.from('€');
  out.write(euro.subarray(0, 1));
  out.write(euro.subarray(1));
  out.end();
  assert.deepEqual(forwarded, ['€']);
  assert.equal(out.text, '€');
});

test('past the cap bytes are counted and dropped, and the stream is flagged', () => {
  const { out, forwarded } = collector(10);
  out.write(Buffer.from('0123456'));
  out.write(Buffer.from('789abcdef'));
  out.write(Buffer.from('more'));
  out.end();
  assert.equal(out.text, '0123456789');
  assert.equal(forwarded.join(''), '0123456789');
  assert.equal(out.truncated, true);
  assert.equal(out.totalBytes, 20);
});

test('exactly the cap is not truncated', () => {
  const { out } = collector(4);
  out.write(Buffer.from('abcd'));
  out.end();
  assert.equal(out.text, 'abcd');
  assert.equal(out.truncated, false);
});

test('a character cut by the cap is dropped, not mangled', () => {
  const { out } = collector(4);
  out.write(Buffer.from('ab€')); // 2 + 3 bytes: the euro sign does not fit
  out.end();
  assert.equal(out.text, 'ab');
  assert.equal(out.truncated, true);
});

test('an unfinished character at the end of a stream becomes U+FFFD', () => {
  const { out } = collector();
  out.write(Buffer.from([0x61, 0xe2]));
  out.end();
  assert.equal(out.text, 'a\uFFFD');
});

test('a flood far past the cap keeps only the cap', () => {
  const { out, forwarded } = collector(1000);
  const chunk = Buffer.alloc(64 * 1024, 'y');
  for (let i = 0; i < 800; i++) out.write(chunk); // 50 MiB
  out.end();
  assert.equal(out.text.length, 1000);
  assert.equal(forwarded.length, 1);
  assert.equal(out.totalBytes, 800 * 64 * 1024);
  assert.equal(out.truncated, true);
});

test('writable() consumes a stream without pushing back', async () => {
  const { out } = collector(5);
  await pipeline(Readable.from([Buffer.from('abc'), Buffer.from('defgh')]), out.writable());
  out.end();
  assert.equal(out.text, 'abcde');
  assert.equal(out.truncated, true);
});
