/** The process logger: JSON lines (for machines) or a readable, coloured line per event (for people). */
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export type LogFormat = 'json' | 'pretty';

/**
 * A logger writing to stdout, or to stderr with `{ stderr: true }` (for commands whose stdout is
 * their answer, such as `tock keys create`).
 */
export function createLogger(format: LogFormat, level = 'info', options: { stderr?: boolean } = {}): Logger {
  if (format === 'json') return options.stderr ? pino({ level }, pino.destination(2)) : pino({ level });
  return pino(
    { level },
    pretty({
      destination: options.stderr ? 2 : 1,
      sync: true,
      singleLine: true,
      colorize: (options.stderr ? process.stderr : process.stdout).isTTY === true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
    }),
  );
}
