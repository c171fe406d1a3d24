/** The process logger: JSON lines (for machines) or a readable, coloured line per event (for people). */
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pretty from 'pino-pretty';
import { TockConnectionError } from '../client/index.js';

export type LogFormat = 'json' | 'pretty';

/**
 * Fastify logs `Server listening at <address>` for each address it binds; Tock announces its URL
 * itself (`tock listening on …`), once.
 */
const FASTIFY_LISTENING = /^Server listening at /;

/**
 * An error's message with its causes, each said once: pino's own serializer appends every cause's
 * message, so `cannot reach …: connect ECONNREFUSED …` became `…: fetch failed: connect
 * ECONNREFUSED …`. A `TockConnectionError` already names its cause, and carries no stack worth a
 * log line (a server that is down is not a bug).
 */
function serializeError(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error) as unknown;
  if (!(err instanceof Error) || out === null || typeof out !== 'object') return out;
  const record = out as Record<string, unknown>;
  if (err instanceof TockConnectionError) {
    record.message = err.message;
    delete record.stack;
    return record;
  }
  let message = err.message;
  const seen = new Set<unknown>([err]);
  for (let cause = err.cause; cause instanceof Error && !seen.has(cause); cause = cause.cause) {
    seen.add(cause);
    if (cause.message && !message.includes(cause.message)) message += `: ${cause.message}`;
  }
  record.message = message;
  return record;
}

/** The options every Tock process logger has: the error serializer and the listening-line filter. */
export const loggerOptions: LoggerOptions = {
  serializers: { err: serializeError },
  hooks: {
    logMethod(args, method) {
      if (typeof args[0] === 'string' && FASTIFY_LISTENING.test(args[0])) return;
      method.apply(this, args);
    },
  },
};

/**
 * A logger writing to stdout, or to stderr with `{ stderr: true }` (for commands whose stdout is
 * their answer, such as `tock keys create`), or to `destination` (tests).
 */
export function createLogger(
  format: LogFormat,
  level = 'info',
  options: { stderr?: boolean; destination?: DestinationStream } = {},
): Logger {
  const fd = options.stderr ? 2 : 1;
  if (format === 'json') {
    const destination = options.destination ?? (options.stderr ? pino.destination(2) : undefined);
    return destination ? pino({ ...loggerOptions, level }, destination) : pino({ ...loggerOptions, level });
  }
  return pino(
    { ...loggerOptions, level },
    options.destination ??
      pretty({
        destination: fd,
        sync: true,
        singleLine: true,
        colorize: (options.stderr ? process.stderr : process.stdout).isTTY === true,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname',
      }),
  );
}
