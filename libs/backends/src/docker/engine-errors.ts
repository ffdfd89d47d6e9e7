import { SandgateError, isSandgateError } from '@sandgate/contracts';

/** What docker-modem puts on its errors: an HTTP status from the engine, or a socket error code. */
interface ModemError {
  statusCode?: number;
  code?: string;
  message?: string;
}

const UNREACHABLE = new Set(['ENOENT', 'ECONNREFUSED', 'ECONNRESET', 'EACCES', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH']);

/** The runtime image is not on the engine: nothing can run until someone builds or pulls it. */
export function imageMissing(image: string, cause: unknown): SandgateError {
  return new SandgateError(
    'backend_unavailable',
    `The runtime image ${image} is not on the Docker engine; build it (npm run image) or set SANDGATE_IMAGE.`,
    { cause },
  );
}

export const statusOf = (err: unknown): number | undefined => (err as ModemError | null)?.statusCode;

/** True for an engine 404 (no such container/image): docker-modem labels every 404 "no such container". */
export const isNotFound = (err: unknown): boolean => statusOf(err) === 404;

/** Removes a container, running or not; one already gone (a sweep or another remove got there first) is fine. */
export async function forceRemove(container: { remove(opts: { force: boolean }): Promise<unknown> }): Promise<void> {
  await container.remove({ force: true }).catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });
}

/**
 * Turns a failure of the engine into the platform error the worker reports as `backend_unavailable`:
 * the run could not happen, through no fault of the user's code.
 */
export function engineError(err: unknown, image: string): SandgateError {
  if (isSandgateError(err)) return err;
  const e = (err ?? {}) as ModemError;
  const message = (e.message ?? String(err)).trim();
  if (e.statusCode === 404 && /no such image/i.test(message)) return imageMissing(image, err);
  if (e.code !== undefined && UNREACHABLE.has(e.code)) {
    return new SandgateError('backend_unavailable', `The Docker engine is unreachable (${e.code}): ${message}`, {
      cause: err,
    });
  }
  return new SandgateError('backend_unavailable', `The Docker engine failed: ${message}`, { cause: err });
}

/** A failure of the engine in a few words, as a health report gives it: `engine unreachable: connect ENOENT …`. */
export function engineProblem(err: unknown): string {
  const e = (err ?? {}) as ModemError;
  const message = (e.message ?? String(err)).trim();
  return e.code !== undefined && UNREACHABLE.has(e.code)
    ? `engine unreachable: ${message}`
    : `engine failed: ${message}`;
}
