/** Redis stream entry ids ('<ms>-<seq>'), which sandgate also uses as SSE event ids. */
export const STREAM_ID = /^\d{1,20}-\d{1,20}$/;

export const isStreamId = (s: unknown): s is string => typeof s === 'string' && STREAM_ID.test(s);

/** Orders two stream ids; both must be valid. */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  if (am !== bm) return am < bm ? -1 : 1;
  return as === bs ? 0 : as < bs ? -1 : 1;
}
