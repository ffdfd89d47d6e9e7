/** The slice of a pino logger the backends use: object first, then the message. */
export interface BackendLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const noop = (): void => {};

/** Used when the caller passes no logger, so call sites never test for one. */
export const silentLogger: BackendLogger = { debug: noop, info: noop, warn: noop, error: noop };
