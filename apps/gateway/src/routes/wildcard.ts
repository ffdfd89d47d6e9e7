import { SandgateError } from '@sandgate/contracts';

/** Path segments a client sends when it did not fill in the document's `{path}` (or an older document's `{*}`). */
const UNEXPANDED = new Set(['{*}', '{path}']);

/**
 * The path a route's wildcard matched. A segment that is an unexpanded URI template is refused: it is a client that
 * did not substitute the parameter, and saving a file named `{*}` would only hide that mistake.
 */
export function wildcardPath(raw: string): string {
  if (raw.split('/').some((segment) => UNEXPANDED.has(segment))) {
    throw new SandgateError(
      'invalid_path',
      `"${raw.slice(0, 200)}" contains an unexpanded URI template; ` + "put the file's path in place of {path}",
    );
  }
  return raw;
}
