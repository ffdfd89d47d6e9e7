import { pino, type Logger } from 'pino';
import type { Config } from './config.ts';

/** The process logger: JSON lines, secrets redacted wherever they might appear. */
export function createLogger(config: Pick<Config, 'logLevel'>, name: string): Logger {
  return pino({
    name,
    level: config.logLevel,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'config.apiKeys', 'config.signingKey', 'apiKeys', 'signingKey'],
      censor: '[redacted]',
    },
  });
}
