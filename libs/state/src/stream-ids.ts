/** Redis stream entry ids ('<ms>-<seq>'), which sandgate also uses as SSE event ids. */
export const STREAM_ID = /^\d{1,20}-\d{1,20}$/;

export const isStreamId = (s: unknown): s is string => typeof s === 'string' && STREAM_ID.test(s);

/** Orders two stream ids; both must be valid. Runs for every event each subscriber gets, so it parses nothing. */
export function compareStreamIds(a: string, b: string): number {
  const ad = a.indexOf('-');
  const bd = b.indexOf('-');
  return compareDigits(a.slice(0, ad), b.slice(0, bd)) || compareDigits(a.slice(ad + 1), b.slice(bd + 1));
}

/** Orders two decimal numbers of any length, as text (a Last-Event-ID may come with leading zeros). */
function compareDigits(a: string, b: string): number {
  a = noLeadingZeros(a);
  b = noLeadingZeros(b);
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
}

const noLeadingZeros = (s: string) => (s.length > 1 && s[0] === '0' ? s.replace(/^0+(?=\d)/, '') : s);
