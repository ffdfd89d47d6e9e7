import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentTypeFor, mimeFor } from './mime.ts';

test('mimeFor gives the bare type, from the name alone', () => {
  assert.equal(mimeFor('report.pdf'), 'application/pdf');
  assert.equal(mimeFor('out/charts/Chart.PNG'), 'image/png');
  assert.equal(mimeFor('data.csv'), 'text/csv');
  assert.equal(mimeFor('data.json'), 'application/json');
  assert.equal(mimeFor('book.xlsx'), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet');
});

test('unknown or missing extensions are application/octet-stream', () => {
  for (const p of ['Makefile', 'blob.unknownext', 'dir.d/noext', '.hidden'])
    assert.equal(mimeFor(p), 'application/octet-stream');
  assert.equal(contentTypeFor('blob.unknownext'), 'application/octet-stream');
});

test('contentTypeFor adds charset=utf-8 to textual types only', () => {
  assert.equal(contentTypeFor('data.csv'), 'text/csv; charset=utf-8');
  assert.equal(contentTypeFor('notes.txt'), 'text/plain; charset=utf-8');
  assert.equal(contentTypeFor('data.json'), 'application/json; charset=utf-8');
  assert.equal(contentTypeFor('chart.png'), 'image/png');
  assert.equal(contentTypeFor('report.pdf'), 'application/pdf');
});
