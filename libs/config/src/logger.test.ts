import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger, redactUrl } from './logger.ts';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { lines, destination: destination as unknown as import('pino').DestinationStream };
}

test("a signed URL's sig never reaches a log; the rest of the query does", () => {
  assert.equal(
    redactUrl('/files/sess_1/a.png?expires=99&sig=abc123&inline=true'),
    '/files/sess_1/a.png?expires=99&sig=[redacted]&inline=true',
  );
  assert.equal(redactUrl('/files/sess_1/a.png?sig=abc123'), '/files/sess_1/a.png?sig=[redacted]');
  assert.equal(redactUrl('/v1/sessions?design=1'), '/v1/sessions?design=1');
  const { lines, destination } = capture();
  const log = createLogger({ logLevel: 'info', logFormat: 'json' }, 't', { destination });
  log.info(
    { req: { method: 'GET', url: '/files/s/x?expires=1&sig=SECRETSIG', headers: { authorization: 'Bearer k' } } },
    'incoming request',
  );
  const line = JSON.parse(lines[0]!);
  assert.equal(line.req.url, '/files/s/x?expires=1&sig=[redacted]');
  assert.doesNotMatch(lines[0]!, /SECRETSIG/);
});

test('JSON lines off a terminal, pretty lines on one, and SANDGATE_LOG_FORMAT overrides either', () => {
  const json = capture();
  createLogger({ logLevel: 'info', logFormat: null }, 't', { tty: false, destination: json.destination }).info(
    { execution_id: 'exec_1' },
    'hello',
  );
  assert.equal(JSON.parse(json.lines[0]!).execution_id, 'exec_1');

  const pretty = capture();
  createLogger({ logLevel: 'info', logFormat: null }, 't', { tty: true, destination: pretty.destination }).info(
    { execution_id: 'exec_1' },
    'hello',
  );
  const text = pretty.lines.join('');
  assert.throws(() => JSON.parse(text));
  assert.match(text, /INFO.*hello/);
  assert.match(text, /execution_id: "exec_1"/);

  const forced = capture();
  createLogger({ logLevel: 'info', logFormat: 'json' }, 't', { tty: true, destination: forced.destination }).info('x');
  assert.equal(JSON.parse(forced.lines[0]!).msg, 'x');
});
