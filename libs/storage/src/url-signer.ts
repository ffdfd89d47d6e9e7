import { createHmac, timingSafeEqual } from 'node:crypto';
import { normalizeUserPath } from './user-path.ts';

export interface UrlSignerOptions {
  /** HMAC-SHA256 key; at least 32 random bytes. */
  key: Buffer;
  /** Base URL clients reach the gateway at, e.g. 'https://sandgate.example.com' (a trailing '/' is ignored). */
  publicUrl: string;
  /** Lifetime of a signed URL in seconds. */
  ttlSeconds: number;
}

const EXPIRES = /^[0-9]{1,12}$/;
const SIG = /^[A-Za-z0-9_-]{43}$/; // 32 bytes of base64url, unpadded

/**
 * A session file's URL without a signature: `${publicUrl}/files/${sessionId}/${path}`, which an API key of the
 * session's tenant authorises. Workers put it on artifacts; the gateway signs it when it presents them (UrlSigner).
 */
export function fileUrl(publicUrl: string, sessionId: string, relPath: string): string {
  const encoded = normalizeUserPath(relPath).split('/').map(encodeURIComponent).join('/');
  return `${publicUrl.replace(/\/+$/, '')}/files/${encodeURIComponent(sessionId)}/${encoded}`;
}

/** Signed, expiring download URLs: `${publicUrl}/files/${sessionId}/${path}?expires=<unix s>&sig=<base64url>`. */
export class UrlSigner {
  readonly #key: Buffer;
  readonly #publicUrl: string;
  readonly #ttlSeconds: number;

  constructor({ key, publicUrl, ttlSeconds }: UrlSignerOptions) {
    if (key.length === 0) throw new Error('UrlSigner key must not be empty');
    if (!(ttlSeconds > 0) || !Number.isFinite(ttlSeconds))
      throw new Error('UrlSigner ttlSeconds must be a positive number');
    this.#key = Buffer.from(key);
    this.#publicUrl = publicUrl.replace(/\/+$/, '');
    this.#ttlSeconds = ttlSeconds;
  }

  /** `now` is in milliseconds (Date.now()). Throws SandgateError('invalid_path') for a path no client could use. */
  downloadUrl(sessionId: string, relPath: string, now: number = Date.now()): string {
    const path = normalizeUserPath(relPath);
    const expires = String(Math.floor(now / 1000 + this.#ttlSeconds));
    const sig = this.#sign(sessionId, path, expires);
    return `${fileUrl(this.#publicUrl, sessionId, path)}?expires=${expires}&sig=${sig}`;
  }

  /** True only for an unexpired URL signed for exactly this session and path. `now` in milliseconds. Never throws. */
  verify(
    sessionId: string,
    relPath: string,
    expires: string | undefined,
    sig: string | undefined,
    now: number = Date.now(),
  ): boolean {
    try {
      if (typeof expires !== 'string' || typeof sig !== 'string' || !EXPIRES.test(expires) || !SIG.test(sig))
        return false;
      if (Number(expires) * 1000 <= now) return false;
      const expected = Buffer.from(this.#sign(sessionId, normalizeUserPath(relPath), expires));
      // Compared as text: decoding first would accept the several spellings of the same final base64 bits.
      const given = Buffer.from(sig);
      return given.length === expected.length && timingSafeEqual(given, expected);
    } catch {
      return false;
    }
  }

  #sign(sessionId: string, path: string, expires: string): string {
    // Fields are length-prefixed so no choice of session id or path can make two tuples sign the same bytes.
    const message = ['sandgate-download-v1', sessionId, path, expires]
      .map((f) => `${Buffer.byteLength(f)}:${f}`)
      .join('');
    return createHmac('sha256', this.#key).update(message).digest('base64url');
  }
}
