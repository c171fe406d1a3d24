/**
 * What a handler reports while it runs (`ctx.progress`, `ctx.log`), and its bounds: the worker
 * buffers a run's report and sends it with its next heartbeat (or with the run's result), the store
 * keeps one per attempt, and the API refuses more than the bounds. Pure: no I/O.
 *
 * Progress is any finite number (a percentage by convention, or items done: Tock does not read it)
 * with an optional message of at most `PROGRESS_MESSAGE_MAX_CHARS`; the latest report wins. The log
 * is the last `LOG_LINES_MAX` lines of the attempt, each cut to `LOG_LINE_MAX_CHARS`; older lines
 * are dropped and counted (`logsDropped`). Text is sanitised like a handler's output (U+0000 and
 * unpaired surrogates become U+FFFD), never refused: a log line must not cost a run its lease.
 */
import { ValidationError } from './errors.js';
import { sanitiseText } from './text.js';

/** The longest progress message kept, characters (the rest is cut). */
export const PROGRESS_MESSAGE_MAX_CHARS = 200;
/** The longest log line kept, characters (the rest is cut). */
export const LOG_LINE_MAX_CHARS = 1000;
/** The most log lines kept per attempt: the last ones; older lines are dropped and counted. */
export const LOG_LINES_MAX = 100;

/** A handler's progress: a finite number and an optional short message. */
export interface ProgressReport {
  value: number;
  message?: string | null;
}

/** What a worker reports of one run while it runs: sent with a heartbeat, or with the run's result. */
export interface RunReport {
  /** The latest progress (replaces the attempt's). Default: unchanged. */
  progress?: ProgressReport | null;
  /** Log lines since the last report, oldest first (appended; the attempt keeps its last `LOG_LINES_MAX`). */
  logs?: readonly string[];
  /** Lines the worker dropped (oldest first) before it could send them; added to the attempt's count. Default 0. */
  logsDropped?: number;
}

/** A progress value as given to `ctx.progress`: a finite number, or a `ValidationError`. */
export function checkProgressValue(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ValidationError('progress must be a finite number', { field: 'progress' });
  }
  return value;
}

/** `text` cut to its first `max` characters, then sanitised (the cut may split a surrogate pair). */
function headText(text: string, max: number): string {
  return sanitiseText(text.length > max ? text.slice(0, max) : text);
}

/** A progress message as it is kept: its first `PROGRESS_MESSAGE_MAX_CHARS` characters, sanitised. */
export function progressMessage(message: unknown): string | null {
  if (message === undefined || message === null) return null;
  return headText(String(message), PROGRESS_MESSAGE_MAX_CHARS);
}

/** A log line as it is kept: its first `LOG_LINE_MAX_CHARS` characters, sanitised. */
export function logLine(line: unknown): string {
  return headText(typeof line === 'string' ? line : String(line), LOG_LINE_MAX_CHARS);
}

/** The last `LOG_LINES_MAX` of `lines`, and how many were dropped to keep them. */
export function logTail(lines: readonly string[]): { logs: string[]; dropped: number } {
  const dropped = Math.max(0, lines.length - LOG_LINES_MAX);
  return { logs: dropped > 0 ? lines.slice(dropped) : [...lines], dropped };
}

/** Whether a report carries anything to write. */
export function hasReport(r: RunReport): boolean {
  return r.progress != null || (r.logs !== undefined && r.logs.length > 0) || (r.logsDropped ?? 0) > 0;
}
