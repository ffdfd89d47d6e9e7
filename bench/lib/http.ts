/** A lean HTTP/1.1 client on node:http with keep-alive, so the client adds as little as possible to a figure. */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';

export const agent = new Agent({ keepAlive: true, maxSockets: 256 });

export interface Response {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The body parsed as JSON, or null. */
  json: any;
}

export interface RequestOptions {
  json?: unknown;
  /** A streamed body (sent chunked); `json` wins if both are given. */
  body?: Readable;
  headers?: Record<string, string>;
  agent?: Agent;
  timeoutMs?: number;
}

export function request(method: string, url: string, opts: RequestOptions = {}): Promise<Response> {
  const payload = opts.json === undefined ? undefined : Buffer.from(JSON.stringify(opts.json));
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (payload) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(payload.length);
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method, headers, agent: opts.agent ?? agent, timeout: opts.timeoutMs ?? 120_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown = null;
          try {
            json = text ? JSON.parse(text) : null;
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`${method} ${url}: no answer within ${opts.timeoutMs ?? 120_000} ms`)),
    );
    req.on('error', reject);
    if (payload) req.end(payload);
    else if (opts.body) opts.body.on('error', (e) => req.destroy(e)).pipe(req);
    else req.end();
  });
}

/** Throws with the problem body unless the status is one of `ok`. */
export function expectStatus(res: Response, ok: number[], what: string): Response {
  if (!ok.includes(res.status)) {
    const j = res.json;
    const detail = j?.detail ?? j?.code ?? (j?.state ? `state ${j.state} (${j.id ?? ''})` : res.text.slice(0, 300));
    throw new Error(`${what}: HTTP ${res.status} ${detail}`);
  }
  return res;
}
