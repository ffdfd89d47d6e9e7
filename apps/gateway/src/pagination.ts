import { createHmac, timingSafeEqual } from 'node:crypto';
import { SandgateError } from '@sandgate/contracts';

const invalid = () =>
  new SandgateError('invalid_cursor', 'the cursor is malformed or belongs to another list; start again without one');

/**
 * Opaque list cursors: a position in a list, signed together with the list's scope (tenant, endpoint, filters),
 * so a cursor is read back only by the list that gave it. Any list endpoint pages with these (sessions, executions,
 * a session's files): `encode` the position after the last item returned, `decode` what the client sends back.
 */
export class Cursors {
  readonly #key: Buffer;
  constructor(key: Buffer) {
    this.#key = key;
  }

  encode(scope: string, position: string): string {
    const body = Buffer.from(position, 'utf8').toString('base64url');
    return `${body}.${this.#mac(scope, body)}`;
  }

  /** The position a cursor stands for; null for no cursor (the first page); invalid_cursor for anything else. */
  decode(scope: string, cursor: string | undefined): string | null {
    if (cursor === undefined) return null;
    const [body, mac, ...rest] = cursor.split('.');
    if (!body || !mac || rest.length > 0) throw invalid();
    const want = Buffer.from(this.#mac(scope, body));
    const got = Buffer.from(mac);
    if (got.length !== want.length || !timingSafeEqual(got, want)) throw invalid();
    return Buffer.from(body, 'base64url').toString('utf8');
  }

  #mac(scope: string, body: string): string {
    return createHmac('sha256', this.#key)
      .update(`sandgate-cursor\n${scope}\n${body}`)
      .digest('base64url')
      .slice(0, 22);
  }
}
