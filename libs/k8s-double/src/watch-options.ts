import type { ApiRequest } from './api-context.ts';
import { queryFlag, RESOURCE } from './objects.ts';
import { badRequest, invalid, type StatusCause } from './status.ts';
import type { Kind } from './store.ts';

/** Where a watch starts: the current state as ADDED events, only what changes from now, or after a resourceVersion. */
export type WatchStart = { state: true } | { now: true } | { after: number };

/** A watch request after the API server's defaulting and validation. */
export interface WatchOptions {
  start: WatchStart;
  bookmarks: boolean;
  timeoutMs: number;
}

/** --min-request-timeout: a watch without timeoutSeconds ends after a random time between this and twice it. */
const MIN_REQUEST_TIMEOUT_MS = 1800_000;
const NOT_OLDER_THAN = 'NotOlderThan';

/**
 * The watch parameters of a list request. The WatchList feature is on (as on 1.34), so a watch from no
 * resourceVersion or "0" is defaulted to sendInitialEvents=true with resourceVersionMatch=NotOlderThan; the
 * combinations validateWatchOptions refuses are a 422 on ListOptions.meta.k8s.io.
 */
export function watchOptions(kind: Kind, req: ApiRequest): WatchOptions {
  const q = req.query;
  const rv = q.get('resourceVersion') ?? '';
  let match = q.get('resourceVersionMatch') ?? '';
  let initial = q.has('sendInitialEvents') ? queryFlag(q, 'sendInitialEvents') : undefined;
  if (initial === undefined && match === '' && (rv === '' || rv === '0')) {
    initial = true;
    match = NOT_OLDER_THAN;
  }
  const problems = optionProblems(initial, match, q.get('continue') ?? '');
  if (problems.length) throw invalid('ListOptions', '', problems, 'meta.k8s.io');
  const after = resourceVersion(kind, rv);
  return {
    start: initial ? { state: true } : after === 0 ? { now: true } : { after },
    bookmarks: queryFlag(q, 'allowWatchBookmarks'),
    timeoutMs: timeout(q.get('timeoutSeconds')),
  };
}

function optionProblems(initial: boolean | undefined, match: string, cont: string): StatusCause[] {
  const forbidden = (message: string): StatusCause => ({
    reason: 'FieldValueForbidden',
    message: `Forbidden: ${message}`,
    field: 'resourceVersionMatch',
  });
  const problems: StatusCause[] = [];
  if (initial !== undefined && match !== NOT_OLDER_THAN) {
    problems.push(forbidden(`sendInitialEvents requires setting resourceVersionMatch to ${NOT_OLDER_THAN}`));
  }
  if (match === '') return problems;
  if (initial === undefined) {
    problems.push(forbidden('resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'));
  }
  if (match !== NOT_OLDER_THAN) {
    problems.push({
      reason: 'FieldValueNotSupported',
      message: `Unsupported value: "${match}": supported values: "${NOT_OLDER_THAN}"`,
      field: 'resourceVersionMatch',
    });
  }
  if (cont !== '') problems.push(forbidden('resourceVersionMatch is forbidden when continue is provided'));
  return problems;
}

/** The resourceVersion to watch after; 0 for none. Anything but digits is refused as the storage layer refuses it. */
function resourceVersion(kind: Kind, rv: string): number {
  if (rv === '') return 0;
  if (!/^\d+$/.test(rv)) {
    throw invalid(RESOURCE[kind], '', [
      {
        reason: 'FieldValueInvalid',
        message: `Invalid value: "${rv}": strconv.ParseUint: parsing "${rv}": invalid syntax`,
        field: 'resourceVersion',
      },
    ]);
  }
  return Number(rv);
}

function timeout(raw: string | null): number {
  if (raw === null || raw === '') return randomDefaultTimeout();
  if (!/^-?\d+$/.test(raw)) throw badRequest(`strconv.ParseInt: parsing "${raw}": invalid syntax`);
  const seconds = Number(raw);
  return seconds === 0 ? randomDefaultTimeout() : Math.max(0, seconds * 1000);
}

const randomDefaultTimeout = (): number => Math.round(MIN_REQUEST_TIMEOUT_MS * (1 + Math.random()));
