import { SandgateError } from '@sandgate/contracts';

/** Limits chosen to sit well inside Linux's NAME_MAX (255) and PATH_MAX (4096) once joined to a session root. */
export const MAX_SEGMENT_BYTES = 255;
export const MAX_SEGMENTS = 32;
export const MAX_PATH_BYTES = 1024;
/** Names starting with this belong to sandgate (temp files, markers); clients may neither address nor see them. */
export const RESERVED_PREFIX = '.sandgate';

// C0, DEL and C1 controls: never legitimate in a file name and dangerous in headers, logs and terminals.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// A lone surrogate cannot be encoded as UTF-8, so the name on disk would silently differ from the one asked for.
const LONE_SURROGATE = /\p{Cs}/u;

function reject(detail: string): never {
  throw new SandgateError('invalid_path', detail);
}

/** The reason a single name would be refused, or undefined when it is acceptable. */
export function segmentProblem(segment: string): string | undefined {
  if (segment === '') return 'path contains an empty segment (leading, trailing or doubled "/")';
  if (segment === '.' || segment === '..') return 'path segments "." and ".." are not allowed';
  if (segment.includes('/')) return 'path segment contains "/"';
  if (segment.includes('\\')) return 'path contains a backslash; use "/" as the separator';
  if (CONTROL.test(segment)) return 'path contains a NUL or control character';
  if (LONE_SURROGATE.test(segment)) return 'path contains invalid Unicode (a lone surrogate)';
  if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES)
    return `path segment is longer than ${MAX_SEGMENT_BYTES} bytes`;
  if (segment.startsWith(RESERVED_PREFIX)) return `names starting with "${RESERVED_PREFIX}" are reserved`;
  return undefined;
}

/**
 * Validates a client-supplied relative path ('a/b.csv') and returns it unchanged: bad input is refused rather than
 * repaired, so the name a client asked for is always the name on disk (no Unicode folding either: the sandbox may
 * have written either form, and listing must round-trip).
 */
export function normalizeUserPath(p: string): string {
  if (typeof p !== 'string' || p === '') reject('path is empty');
  // Checked before splitting so a hostile megabyte-long string costs nothing more.
  if (Buffer.byteLength(p, 'utf8') > MAX_PATH_BYTES) reject(`path is longer than ${MAX_PATH_BYTES} bytes`);
  if (p.startsWith('/')) reject('path must be relative to the session directory, not absolute');
  if (p.includes('\\')) reject('path contains a backslash; use "/" as the separator');
  if (CONTROL.test(p)) reject('path contains a NUL or control character');
  const segments = p.split('/');
  if (segments.length > MAX_SEGMENTS) reject(`path has more than ${MAX_SEGMENTS} segments`);
  for (const segment of segments) {
    const problem = segmentProblem(segment);
    if (problem !== undefined) reject(problem);
  }
  return p;
}

/** Splits an already normalised path into its parent segments and its leaf name. */
export function splitPath(normalized: string): { parents: string[]; leaf: string } {
  const parents = normalized.split('/');
  const leaf = parents.pop() as string; // split() always yields at least one element
  return { parents, leaf };
}
