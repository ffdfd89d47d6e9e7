import { badRequest, gone } from './status.ts';

interface Token {
  v: 'meta.k8s.io/v1';
  rv: number;
  start: string;
}

export interface Page<T> {
  items: T[];
  continue?: string;
  remainingItemCount?: number;
}

const TOO_OLD = [
  'The provided continue parameter is too old to display a consistent list result. You can start a new list',
  'without the continue parameter, or use the continue token in this response to retrieve the remainder of the',
  'results. Continuing with the provided token results in an inconsistent list - objects that were created,',
  'modified, or deleted between the time the first chunk was returned and now may show up in the list.',
].join(' ');

/**
 * `limit`/`continue` over a list in key order, with the API server's token (base64 JSON of the list's
 * resourceVersion and the key to start after). Tokens minted before `expiredBefore` answer 410 Expired, as after
 * an etcd compaction. The rest of the list is read as it is now, not as a snapshot: a difference from etcd.
 */
export function paginate<T>(
  items: T[],
  keyOf: (item: T) => string,
  query: URLSearchParams,
  rv: number,
  expiredBefore: number,
): Page<T> {
  const limitRaw = query.get('limit');
  const limit = limitRaw === null || limitRaw === '' ? 0 : Number(limitRaw);
  if (!Number.isInteger(limit) || limit < 0) throw badRequest(`invalid limit: ${limitRaw}`);
  let rest = items;
  const cont = query.get('continue');
  if (cont) {
    const token = decode(cont);
    if (token.rv < expiredBefore) throw gone(TOO_OLD);
    rest = items.filter((i) => keyOf(i) > token.start);
  }
  if (limit === 0 || rest.length <= limit) return { items: rest };
  const page = rest.slice(0, limit);
  const last = keyOf(page[page.length - 1]!);
  const token: Token = { v: 'meta.k8s.io/v1', rv, start: `${last}\u0000` };
  return {
    items: page,
    continue: Buffer.from(JSON.stringify(token)).toString('base64'),
    remainingItemCount: rest.length - limit,
  };
}

function decode(raw: string): Token {
  try {
    const t = JSON.parse(Buffer.from(raw, 'base64').toString('utf8')) as Token;
    if (t.v === 'meta.k8s.io/v1' && typeof t.rv === 'number' && typeof t.start === 'string') return t;
  } catch {
    /* falls through */
  }
  throw badRequest('continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
}
