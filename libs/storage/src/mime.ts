import { contentType, lookup } from 'mime-types';

const FALLBACK = 'application/octet-stream';

/** The bare MIME type for API fields (`mime_type`), e.g. 'text/csv'. */
export function mimeFor(path: string): string {
  return lookup(path) || FALLBACK;
}

/** The Content-Type header value: textual types carry '; charset=utf-8', e.g. 'text/csv; charset=utf-8'. */
export function contentTypeFor(path: string): string {
  return contentType(mimeFor(path)) || FALLBACK;
}
