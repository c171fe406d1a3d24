/**
 * The `jobs` table: definitions and their scheduling state. An upsert writes a whole batch in one
 * statement and changes a job only when its definition's digest changed (`version` counts the
 * changes); a new schedule or timezone restarts `next_run_at` from now, any other change keeps it.
 * A one-shot whose instant has passed is refused unless it re-applies that same instant to the job
 * that has it. The definitions arrive validated (`ValidJob`): the edges check them.
 */
import {
  checkJobBatch,
  definitionHash,
  firstSlotFrom,
  JOB_FIELDS,
  NotFoundError,
  pastOneShotError,
  type Schedule,
  shardOf,
  unknownLimitError,
  ValidationError,
  type ValidJob,
  validateId,
} from '../core/index.js';
import { checkInstant, checkLimit } from './checks.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import * as J from './queries/jobs.js';
import * as L from './queries/limits.js';
import * as R from './queries/runs.js';
import { type Queryable, type Row, toJob } from './rows.js';
import type { Job, JobFilter, Page, UpsertChange } from './types.js';

/** What reading jobs needs: the store's misfire threshold, shown on jobs that set none (ms). */
interface Reading {
  misfireThresholdMs: number;
}

const jobOf = (row: Row, o: Reading): Job => toJob(row, o.misfireThresholdMs / 1000);

/** One job as a row of `jobUpsert`'s `$2`: the statement's column names, written once here. */
export function jobRow(p: { tenantId: string; job: ValidJob; now: number; shardCount: number }) {
  const { spec, schedule } = p.job;
  const first = firstSlotFrom(schedule, p.now);
  // Keyed by column, from core's field table (the payload as JSON, not as its text).
  const row: Record<string, unknown> = {};
  for (const [property, field] of Object.entries(JOB_FIELDS))
    row[field.column] = spec[property as keyof typeof spec];
  return {
    ...row,
    shard_id: shardOf(p.tenantId, spec.jobId, p.shardCount),
    next_run_at: first === null ? null : new Date(first).toISOString(),
    definition_hash: definitionHash(spec),
  };
}

/** Refuses the batch when a one-shot's instant has passed, unless it re-applies an existing job's instant. */
async function checkPastOneShots(
  db: Queryable,
  p: { tenantId: string; jobs: readonly ValidJob[]; now: number },
): Promise<void> {
  const past = p.jobs.filter((j) => j.schedule.kind === 'at' && j.schedule.atMs <= p.now);
  if (past.length === 0) return;
  const { rows } = await db.query(J.jobSchedules, [p.tenantId, past.map((j) => j.spec.jobId)]);
  const existing = new Map(rows.map((r) => [r.job_id as string, `${r.timezone}\u0000${r.schedule}`]));
  for (const job of past) {
    if (existing.get(job.spec.jobId) !== `${job.spec.timezone}\u0000${job.spec.schedule}`)
      throw pastOneShotError(job, (job.schedule as Extract<Schedule, { kind: 'at' }>).atMs);
  }
}

/** Refuses the batch when a job names a limit its tenant has not defined. */
async function checkLimitKeys(
  db: Queryable,
  p: { tenantId: string; jobs: readonly ValidJob[] },
): Promise<void> {
  const keys = [...new Set(p.jobs.flatMap((j) => j.spec.limits))];
  if (keys.length === 0) return;
  const { rows } = await db.query(L.limitKeysDefined, [p.tenantId, keys]);
  const defined = new Set(rows.map((r) => r.key as string));
  for (const job of p.jobs) {
    const missing = job.spec.limits.find((k) => !defined.has(k));
    if (missing !== undefined) throw unknownLimitError(job, missing);
  }
}

/**
 * Creates or updates up to `MAX_BULK_JOBS` jobs in one statement, all or nothing. `withJobs`: each
 * change also carries the job's row (an unchanged job's is read by one more statement).
 */
export async function upsertJobs(
  db: Queryable,
  p: {
    tenantId: string;
    jobs: readonly ValidJob[];
    now: number;
    shardCount: number;
    withJobs?: boolean;
  } & Reading,
): Promise<{ changes: { jobId: string; change: UpsertChange; job?: Job }[] }> {
  const tenantId = validateId(p.tenantId, 'tenant_id');
  const now = checkInstant(p.now, 'now');
  checkJobBatch(p.jobs);
  await checkPastOneShots(db, { tenantId, jobs: p.jobs, now: p.now });
  await checkLimitKeys(db, { tenantId, jobs: p.jobs });
  const rows = p.jobs.map((job) => jobRow({ tenantId, job, now: p.now, shardCount: p.shardCount }));
  const written = await db.query(p.withJobs ? J.jobUpsert : J.jobUpsertIds, [
    tenantId,
    JSON.stringify(rows),
    now,
  ]);
  const byId = new Map<string, Row>(written.rows.map((r) => [r.job_id, r]));
  const changes = p.jobs.map(({ spec }) => {
    const r = byId.get(spec.jobId);
    const change: UpsertChange = r === undefined ? 'unchanged' : r.inserted ? 'created' : 'updated';
    return { jobId: spec.jobId, change };
  });
  if (!p.withJobs) return { changes };
  const unchanged = changes.filter((c) => c.change === 'unchanged').map((c) => c.jobId);
  if (unchanged.length > 0) {
    const read = await db.query(J.jobGetMany, [tenantId, unchanged]);
    for (const r of read.rows) byId.set(r.job_id, r);
  }
  return {
    changes: changes.map((c) => {
      const r = byId.get(c.jobId);
      // Gone between the write and the read (deleted meanwhile): as a read of it would say.
      if (!r) throw new NotFoundError(`job "${c.jobId}" does not exist`, { job_id: c.jobId });
      return { ...c, job: jobOf(r, p) };
    }),
  };
}

export async function getJob(db: Queryable, p: { tenantId: string; jobId: string } & Reading): Promise<Job> {
  const { rows } = await db.query(J.jobGet, [p.tenantId, p.jobId]);
  if (!rows[0]) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
  return jobOf(rows[0], p);
}

/**
 * A tenant's jobs by id (byte order), one page after the cursor (the last page's last job id),
 * optionally only those matching `filter` (the same filter for every page of one listing).
 */
export async function listJobs(
  db: Queryable,
  p: { tenantId: string; limit: number; cursor?: string | null; filter?: JobFilter } & Reading,
): Promise<Page<Job>> {
  const limit = checkLimit(p.limit);
  let after: string | null = null;
  if (p.cursor) {
    const [jobId] = decodeCursor(p.cursor);
    if (typeof jobId !== 'string') throw new ValidationError('cursor is not one this server issued');
    after = jobId;
  }
  const f = checkJobFilter(p.filter ?? {});
  const { rows } = await db.query(J.jobList, [
    p.tenantId,
    after,
    limit + 1,
    f.idPrefix ?? null,
    f.state ?? null,
    f.pool ?? null,
    f.handler ?? null,
  ]);
  const items = rows.slice(0, limit).map((r) => jobOf(r, p));
  const last = items[items.length - 1];
  return { items, nextCursor: rows.length > limit && last ? encodeCursor([last.jobId]) : null };
}

/** Most characters of a job id prefix: an id's own most. */
export const MAX_JOB_PREFIX = 200;
const JOB_STATES: readonly string[] = ['active', 'paused', 'finished'];

/** The filter as the statement takes it, or a ValidationError naming the bad field. */
function checkJobFilter(f: JobFilter): JobFilter {
  const text = (value: string | undefined, field: string, max: number) => {
    if (value === undefined) return;
    if (value.length === 0 || value.length > max)
      throw new ValidationError(`${field} must be 1 to ${max} characters`, { field });
  };
  text(f.idPrefix, 'q', MAX_JOB_PREFIX);
  text(f.pool, 'pool', 200);
  text(f.handler, 'handler', 200);
  if (f.state !== undefined && !JOB_STATES.includes(f.state))
    throw new ValidationError('state must be active, paused or finished', { field: 'state' });
  return f;
}

export async function pauseJob(
  db: Queryable,
  p: { tenantId: string; jobId: string; now: number } & Reading,
): Promise<Job> {
  const { rows } = await db.query(J.jobPause, [p.tenantId, p.jobId, checkInstant(p.now, 'now')]);
  if (!rows[0]) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
  return jobOf(rows[0], p);
}

/**
 * Resumes a paused job from its first slot at or after now: the paused time is not backfilled.
 * `parse` reads the job's schedule (the store's cache).
 */
export async function resumeJob(
  db: Queryable,
  p: {
    tenantId: string;
    jobId: string;
    now: number;
    parse: (source: string, timezone: string) => Schedule;
  } & Reading,
): Promise<Job> {
  const job = await getJob(db, p);
  if (job.enabled) return job;
  const next = firstSlotFrom(p.parse(job.schedule, job.timezone), p.now);
  const { rows } = await db.query(J.jobResume, [
    p.tenantId,
    p.jobId,
    checkInstant(p.now, 'now'),
    next === null ? null : new Date(next),
  ]);
  return rows[0] ? jobOf(rows[0], p) : getJob(db, p);
}

/** Deletes a job and cancels its queued runs: run in one transaction (`db` a client in it). */
export async function deleteJob(
  db: Queryable,
  p: { tenantId: string; jobId: string; now: Date },
): Promise<{ cancelledRuns: number }> {
  const deleted = await db.query(J.jobDelete, [p.tenantId, p.jobId]);
  if (deleted.rowCount === 0) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
  const cancelled = await db.query(R.runCancelPendingOfJob, [p.tenantId, p.jobId, p.now]);
  return { cancelledRuns: cancelled.rowCount ?? 0 };
}
