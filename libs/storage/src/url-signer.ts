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

/** The query parameters of a signed grant (UrlSigner.signGrant). */
export interface GrantQuery {
  /** Unix seconds. */
  expires: string;
  sig: string;
}

const EXPIRES = /^[0-9]{1,12}$/;
const SIG = /^[A-Za-z0-9_-]{43}$/; // 32 bytes of base64url, unpadded

/**
 * A file's URL without a signature: `${publicUrl}/files/${sessionId}/${path}` for a session's file, and
 * `${publicUrl}/files/volumes/${volumeId}/${path}` for a volume's (`owner` is the session's or volume's id), which an
 * API key of the owner's tenant authorises. Workers put it on artifacts; the gateway signs it when it presents them
 * (UrlSigner).
 */
export function fileUrl(publicUrl: string, owner: string, relPath: string): string {
  const encoded = normalizeUserPath(relPath).split('/').map(encodeURIComponent).join('/');
  const base = owner.startsWith('vol_') ? '/files/volumes' : '/files';
  return `${publicUrl.replace(/\/+$/, '')}${base}/${encodeURIComponent(owner)}/${encoded}`;
}

/**
 * Signed, expiring download URLs: fileUrl's with `?expires=<unix s>&sig=<base64url>`. The signature covers the owner's
 * id (a session's `sess_…` or a volume's `vol_…`) and the path, so a link to one file opens no other.
 */
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
  downloadUrl(owner: string, relPath: string, now: number = Date.now()): string {
    const path = normalizeUserPath(relPath);
    const expires = String(Math.floor(now / 1000 + this.#ttlSeconds));
    const sig = this.#sign(owner, path, expires);
    return `${fileUrl(this.#publicUrl, owner, path)}?expires=${expires}&sig=${sig}`;
  }

  /** True only for an unexpired URL signed for exactly this owner and path. `now` in milliseconds. Never throws. */
  verify(
    owner: string,
    relPath: string,
    expires: string | undefined,
    sig: string | undefined,
    now: number = Date.now(),
  ): boolean {
    try {
      if (typeof expires !== 'string' || typeof sig !== 'string' || !EXPIRES.test(expires) || !SIG.test(sig))
        return false;
      if (Number(expires) * 1000 <= now) return false;
      return sameText(sig, this.#sign(owner, normalizeUserPath(relPath), expires));
    } catch {
      return false;
    }
  }

  /**
   * `expires` and `sig` query parameters that grant `purpose` (e.g. 'terminal') on `subject` (e.g. a session's id) for
   * `ttlSeconds`: a signed URL of another kind than a download's, which no download signature can stand for.
   */
  signGrant(purpose: string, subject: string, ttlSeconds: number, now: number = Date.now()): GrantQuery {
    const expires = String(Math.floor(now / 1000 + ttlSeconds));
    return { expires, sig: this.#mac([`sandgate-${purpose}-v1`, subject, expires]) };
  }

  /** True only for an unexpired grant signed for exactly this purpose and subject. Never throws. */
  verifyGrant(
    purpose: string,
    subject: string,
    expires: string | undefined,
    sig: string | undefined,
    now: number = Date.now(),
  ): boolean {
    if (typeof expires !== 'string' || typeof sig !== 'string' || !EXPIRES.test(expires) || !SIG.test(sig))
      return false;
    if (Number(expires) * 1000 <= now) return false;
    return sameText(sig, this.#mac([`sandgate-${purpose}-v1`, subject, expires]));
  }

  #sign(owner: string, path: string, expires: string): string {
    return this.#mac(['sandgate-download-v1', owner, path, expires]);
  }

  #mac(fields: string[]): string {
    // Fields are length-prefixed so no choice of owner id or path can make two tuples sign the same bytes.
    const message = fields.map((f) => `${Buffer.byteLength(f)}:${f}`).join('');
    return createHmac('sha256', this.#key).update(message).digest('base64url');
  }
}

/** Compared as text, in constant time: decoding first would accept the several spellings of the same base64 bits. */
function sameText(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
