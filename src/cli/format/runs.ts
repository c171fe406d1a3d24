/** Runs and their attempts as an operator reads them: `tock runs …` and `tock dlq …`. */
import type * as Api from '../../client/index.js';
import { counted, formatBlock, formatFields, formatTable, truncate } from './table.js';

/** Most characters of an error message shown in a table; `tock runs show` prints it whole, with its stack. */
const ERROR_COLUMN = 60;

const errorCell = (e: string | null) => (e === null ? null : truncate(e.replace(/\s+/g, ' '), ERROR_COLUMN));

/** Runs a row each, or `empty` alone when there are none. */
export function runTable(runs: readonly Api.Run[], empty: string): string {
  if (runs.length === 0) return `${empty}\n`;
  return formatTable(
    ['RUN', 'JOB', 'SCHEDULED FOR', 'STATE', 'ATTEMPT', 'FINISHED', 'LAST ERROR'],
    runs.map((r) => [
      r.run_id,
      r.job_id,
      r.scheduled_for,
      r.state,
      `${r.attempt}/${r.max_attempts}`,
      r.finished_at,
      errorCell(r.last_error),
    ]),
  );
}

/** A handler's progress as one cell: the number, then its message. */
function progressCell(value: number | null | undefined, message: string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return message ? `${value}  ${message}` : String(value);
}

/** One run, a field a line; with `waiting_for` and `progress` when the run has them. */
export function runFields(
  r: Api.Run & { waiting_for?: string | null; progress?: number | null; progress_message?: string | null },
): string {
  const waiting: [string, unknown][] = r.waiting_for ? [['waiting_for', r.waiting_for]] : [];
  const progress = progressCell(r.progress, r.progress_message);
  if (progress !== null) waiting.push(['progress', progress]);
  return formatFields([
    ['run_id', r.run_id],
    ['job_id', r.job_id],
    ['state', r.state],
    ['scheduled_for', r.scheduled_for],
    ['attempt', `${r.attempt} of ${r.max_attempts}`],
    ['handler', r.handler],
    ['payload', r.payload],
    ['pool', r.pool],
    ['priority', r.priority],
    ['available_at', r.available_at],
    ['lease_owner', r.lease_owner],
    ['lease_expires_at', r.lease_expires_at],
    ['created_at', r.created_at],
    ['claimed_at', r.claimed_at],
    ['started_at', r.started_at],
    ['finished_at', r.finished_at],
    ['last_error', errorCell(r.last_error)],
    ...waiting,
  ]);
}

export function attemptTable(attempts: readonly Api.Attempt[]): string {
  if (attempts.length === 0) return 'no attempts yet\n';
  return formatTable(
    ['ATTEMPT', 'WORKER', 'STARTED', 'FINISHED', 'OUTCOME', 'ERROR'],
    attempts.map((a) => [a.attempt, a.worker_id, a.started_at, a.finished_at, a.outcome, errorCell(a.error)]),
  );
}

/**
 * What the handler reported (`ctx.progress`, `ctx.log`): its progress on a line, then its log
 * lines, saying how many earlier ones were dropped; empty when it reported nothing.
 */
function reportBlocks(a: Api.Attempt): string {
  // Older servers answer attempts without these fields.
  const logs = a.logs ?? [];
  const dropped = a.logs_dropped ?? 0;
  const progress = progressCell(a.progress, a.progress_message);
  const title =
    dropped > 0 ? `LOG (last ${counted(logs.length, 'line')}; ${dropped} earlier dropped)` : 'LOG';
  return (
    formatBlock('PROGRESS', progress) +
    (logs.length > 0 ? formatBlock(title, logs.join('\n')) : dropped > 0 ? `${title}\n` : '')
  );
}

/**
 * What the attempts table cannot hold, attempt by attempt: the error's message whole (when it
 * spans lines or was cut in the table), its stack, what the handler reported (progress, log lines)
 * and its output, each on lines of its own. Attempts with none of them are left out.
 */
export function attemptDetails(attempts: readonly Api.Attempt[]): string {
  const parts: string[] = [];
  for (const a of attempts) {
    const error = a.error ?? '';
    const body =
      (errorCell(error) === error ? '' : formatBlock('ERROR', error)) +
      formatBlock('STACK', a.error_stack) +
      reportBlocks(a) +
      formatBlock('OUTPUT', a.output);
    if (body !== '') parts.push(`\nattempt ${a.attempt} (${a.outcome ?? 'running'}):\n${body}`);
  }
  return parts.join('');
}

/** `tock runs show`: the run, then its attempts, then their errors, stacks, progress, logs and output. */
export function runWithAttempts(run: Api.RunWithAttempts): string {
  return `${runFields(run)}\nattempts:\n${attemptTable(run.attempts)}${attemptDetails(run.attempts)}`;
}
