import { request as httpRequest, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { pinnedLookup, type HostAllowList } from '@sandgate/outbound';

export interface Delivery {
  /** The receiver's status, or null when none came. */
  statusCode: number | null;
  /** Why it failed; undefined when the receiver answered 2xx. */
  error?: string;
  /** A failure that a retry cannot fix (address refused, a 4xx other than 408/429). */
  permanent: boolean;
}

/**
 * POSTs `body` to `url`: resolves its host, refuses it unless every address is allowed, then connects to the address
 * it checked (a DNS answer that changes between the check and the connection cannot redirect it). TLS still verifies
 * the certificate against the URL's host name. No redirects are followed.
 */
export async function deliver(
  url: string,
  body: string,
  headers: Record<string, string>,
  { allow, timeoutMs }: { allow: HostAllowList; timeoutMs: number },
): Promise<Delivery> {
  const refusedUrl = allow.refuseUrl(url);
  if (refusedUrl) return { statusCode: null, error: `not allowed: ${refusedUrl}`, permanent: true };
  const u = new URL(url);
  const pinned = await allow.resolve(u.hostname, Number(u.port || (u.protocol === 'https:' ? 443 : 80)));
  if ('error' in pinned) return { statusCode: null, error: pinned.error, permanent: pinned.permanent };
  const options: RequestOptions = {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    timeout: timeoutMs,
    // Every connection goes to the address checked above, whatever DNS answers now.
    lookup: pinnedLookup(pinned),
  };
  return new Promise<Delivery>((resolve) => {
    const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)(u, options, (res) => {
      res.resume();
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) resolve({ statusCode: status, permanent: false });
      else resolve({ statusCode: status, error: `the receiver answered ${status}`, permanent: isPermanent(status) });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) => resolve({ statusCode: null, error: err.message, permanent: false }));
    req.end(body);
  });
}

/** 4xx means the receiver refused this delivery for good, except 408 (timeout) and 429 (slow down). */
const isPermanent = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;
