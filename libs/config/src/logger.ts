import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config.ts';

/** Query parameters a log must never show: a signed URL's `sig` is a credential until the URL expires. */
const SECRET_PARAMS = /([?&]sig=)[^&#]*/gi;

/** The URL as a log may show it: the signature of a signed download link replaced. */
export const redactUrl = (url: string): string => url.replace(SECRET_PARAMS, '$1[redacted]');

interface RequestLike {
  id?: unknown;
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

export interface LoggerOptions {
  /** Whether the output is a terminal; default: whether stdout is one. Picks the format unless config names one. */
  tty?: boolean;
  /** Where lines go; default stdout. */
  destination?: DestinationStream;
}

/**
 * The process logger: pretty lines on a terminal, JSON lines otherwise (SANDGATE_LOG_FORMAT overrides), secrets
 * redacted wherever they might appear: keys in headers and config, and `sig` in logged request URLs.
 */
export function createLogger(
  config: Pick<Config, 'logLevel' | 'logFormat'>,
  name: string,
  { tty = process.stdout.isTTY === true, destination }: LoggerOptions = {},
): Logger {
  const options = {
    name,
    level: config.logLevel,
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        'config.apiKeys',
        'config.signingKey',
        'config.operatorKeys',
        'apiKeys',
        'signingKey',
        'operatorKeys',
      ],
      censor: '[redacted]',
    },
    serializers: {
      // Fastify's own request serializer, with the URL's secrets taken out.
      req: (req: RequestLike) => ({
        method: req.method,
        url: redactUrl(req.url ?? ''),
        host: req.host,
        remoteAddress: req.ip,
        remotePort: req.socket?.remotePort,
      }),
    },
  };
  const format = config.logFormat ?? (tty ? 'pretty' : 'json');
  if (format === 'json') return destination ? pino(options, destination) : pino(options);
  return pino(
    options,
    pretty({
      colorize: tty && destination === undefined,
      sync: true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
      ...(destination ? { destination } : {}),
    }),
  );
}
