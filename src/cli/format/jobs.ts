/** Jobs as an operator reads them: `tock jobs get` and `list`, and what `tock jobs put` changed. */
import type * as Api from '../../client/index.js';
import { counted, formatFields, formatTable } from './table.js';

/** The answer's `state`; from a server that predates it, `enabled` and `next_run_at`. */
export function jobState(j: Api.Job): string {
  if (j.state !== undefined) return j.state;
  if (!j.enabled) return 'paused';
  return j.next_run_at === null ? 'finished' : 'active';
}

/** `fire_once, once a slot is over 60s late (the scheduler's threshold)`: the policy and when it applies. */
export function misfireText(j: Api.Job): string {
  const policy = j.misfire === 'catch_up' ? `catch_up (limit ${j.catch_up_limit})` : j.misfire;
  if (j.misfire_after_seconds === undefined) return policy;
  const whose = j.misfire_threshold_seconds === null ? " (the scheduler's threshold)" : '';
  return `${policy}, applies once a slot is over ${j.misfire_after_seconds}s late${whose}`;
}

/** One job, a field a line (`tock jobs get`). */
export function jobFields(j: Api.Job): string {
  return formatFields([
    ['job_id', j.job_id],
    ['state', jobState(j)],
    ['schedule', j.schedule],
    ['timezone', j.timezone],
    ['handler', j.handler],
    ['payload', j.payload],
    ['payload_schema', j.payload_schema ?? 'none'],
    ['pool', j.pool],
    ['priority', j.priority],
    ['max_attempts', j.max_attempts],
    ['backoff', `base ${j.backoff_base_seconds}s, cap ${j.backoff_cap_seconds}s`],
    ['misfire', misfireText(j)],
    ['lease', j.lease_seconds === null ? 'server default' : `${j.lease_seconds}s`],
    ['timeout', j.timeout_seconds === null ? 'none' : `${j.timeout_seconds}s`],
    ['jitter', `${j.jitter_seconds}s`],
    ['next_run_at', j.next_run_at],
    ['version', j.version],
    ['created_at', j.created_at],
    ['updated_at', j.updated_at],
  ]);
}

/** Jobs a row each (`tock jobs list`). */
export function jobTable(jobs: readonly Api.Job[]): string {
  if (jobs.length === 0) return 'no jobs\n';
  return formatTable(
    ['JOB', 'SCHEDULE', 'TIMEZONE', 'HANDLER', 'POOL', 'PRIORITY', 'STATE', 'NEXT RUN'],
    jobs.map((j) => [
      j.job_id,
      j.schedule,
      j.timezone,
      j.handler,
      j.pool,
      j.priority,
      jobState(j),
      j.next_run_at,
    ]),
  );
}

/** `3 jobs: 1 created, 1 updated, 1 unchanged`. */
export function changeSummary(answers: readonly Api.UpsertedJob[]): string {
  const count = (c: Api.UpsertChange) => answers.filter((a) => a.change === c).length;
  const n = answers.length;
  return `${counted(n, 'job')}: ${count('created')} created, ${count('updated')} updated, ${count('unchanged')} unchanged\n`;
}

/** What `tock jobs put` did to each job. */
export function changeTable(answers: readonly Api.UpsertedJob[]): string {
  return formatTable(
    ['JOB', 'CHANGE', 'NEXT RUN'],
    answers.map((a) => [a.job_id, a.change, a.next_run_at]),
  );
}

/** A run just triggered (`tock jobs trigger`). */
/** `created 997, existing 3 (2026-01-01T00:00:00.000Z … 2026-01-01T16:39:00.000Z)`: a backfill's answer. */
export function backfillLine(b: Api.BackfillAnswer): string {
  const range = b.first_slot === null ? 'no slot in the range' : `${b.first_slot} … ${b.last_slot}`;
  return `created ${b.created}, existing ${b.existing} (${range})`;
}

export function triggeredRunFields(run: Api.Run): string {
  return formatFields([
    ['run_id', run.run_id],
    ['job_id', run.job_id],
    ['state', run.state],
    ['scheduled_for', run.scheduled_for],
    ['available_at', run.available_at],
  ]);
}
