/** A bench's child process that serves until its runner stops it (SIGTERM, or Ctrl-C in a terminal). */

/** Runs `start`, which answers how to stop what it started; a signal stops it and exits 0, a failed start exits 1. */
export function serve(start: () => Promise<() => Promise<unknown>>): void {
  start().then(
    (stop) => {
      const onSignal = () => void stop().finally(() => process.exit(0));
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
    },
    (err: unknown) => {
      console.error(err instanceof Error ? err.stack : err);
      process.exit(1);
    },
  );
}
