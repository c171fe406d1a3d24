/** The process logger: JSON lines (for machines) or a readable, coloured line per event (for people). */
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export type LogFormat = 'json' | 'pretty';

export function createLogger(format: LogFormat, level = 'info'): Logger {
  if (format === 'json') return pino({ level });
  return pino(
    { level },
    pretty({
      sync: true,
      singleLine: true,
      colorize: process.stdout.isTTY === true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
    }),
  );
}
