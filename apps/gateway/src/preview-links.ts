import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { previewLabelOf, type Config, type PreviewOrigin } from '@sandgate/config';

/**
 * A preview link's token: the session, the start of the service (its execution: one per instance of a service), the
 * expiry, and an HMAC over those, the service's name and how many times its links were revoked. Lower-case letters,
 * digits and dashes, at most 63 characters: it can be a DNS label, where previews have an origin of their own.
 */
export interface PreviewClaim {
  sessionId: string;
  executionId: string;
  /** Unix seconds. */
  expires: number;
}

/** What a token is signed over besides its claim, read from the service's record when the link is opened. */
export interface PreviewBinding {
  name: string;
  /** How many times the service's links were revoked: each revocation changes every signature. */
  revocations: number;
}

// 12 hex of the session id, 16 of the execution id, the expiry in base 36, 128 bits of HMAC in base 36.
const TOKEN = /^([0-9a-f]{12})-([0-9a-f]{16})-([0-9a-z]{1,7})-([0-9a-z]{25})$/;
const SIGNATURE_CHARS = 25;

/** A token for `claim`, signed with `key`. */
export function previewToken(key: Buffer, claim: PreviewClaim, binding: PreviewBinding): string {
  const session = claim.sessionId.replace(/^sess_/, '');
  const execution = claim.executionId.replace(/^exec_/, '');
  return `${session}-${execution}-${claim.expires.toString(36)}-${signature(key, claim, binding)}`;
}

/** The claim of a token that has the shape of one (not yet checked); undefined for anything else. */
export function readPreviewToken(token: string): (PreviewClaim & { signature: string }) | undefined {
  const m = TOKEN.exec(token);
  if (!m) return undefined;
  return {
    sessionId: `sess_${m[1]!}`,
    executionId: `exec_${m[2]!}`,
    expires: parseInt(m[3]!, 36),
    signature: m[4]!,
  };
}

/** Whether a token read by readPreviewToken was signed with `key` for this binding (constant time). */
export function previewSignatureOk(
  key: Buffer,
  read: PreviewClaim & { signature: string },
  binding: PreviewBinding,
): boolean {
  const expected = Buffer.from(signature(key, read, binding));
  const given = Buffer.from(read.signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function signature(key: Buffer, claim: PreviewClaim, binding: PreviewBinding): string {
  const fields = [
    'sandgate-preview-v2',
    claim.sessionId,
    binding.name,
    claim.executionId,
    String(binding.revocations),
    String(claim.expires),
  ];
  const mac = createHmac('sha256', key)
    .update(fields.map((f) => `${f.length}:${f}`).join(''))
    .digest()
    .subarray(0, 16);
  return BigInt(`0x${mac.toString('hex')}`)
    .toString(36)
    .padStart(SIGNATURE_CHARS, '0');
}

/** A preview's URL: on its own origin where SANDGATE_PREVIEW_ORIGIN says, else under /preview/ on the gateway's. */
export function previewUrl(config: Pick<Config, 'publicUrl' | 'previewOrigin'>, token: string): string {
  const o = config.previewOrigin;
  if (o) return `${o.scheme}://${token}.${o.base}${o.port ? `:${o.port}` : ''}/`;
  return `${config.publicUrl.replace(/\/+$/, '')}/preview/${token}/`;
}

/**
 * Fastify's rewriteUrl where previews have an origin of their own: a request to a preview host goes to the preview
 * route as /preview/<token><path>, whatever its path, so that nothing of the gateway is ever served there.
 */
export function previewHostRewrite(origin: PreviewOrigin): (req: IncomingMessage) => string {
  return (req) => {
    const url = req.url ?? '/';
    const token = previewLabelOf(origin, req.headers.host);
    if (token === undefined) return url;
    return `/preview/${token}${url.startsWith('/') ? url : pathOf(url)}`;
  };
}

/** The path and query of an absolute-form request target (`GET http://host/path`), else '/'. */
function pathOf(target: string): string {
  try {
    const u = new URL(target);
    return u.pathname + u.search;
  } catch {
    return '/';
  }
}
