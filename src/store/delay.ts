/**
 * Scheduling delay from run history (`queries/delay.ts`): a tenant's series in buckets of slots
 * for `GET /v1/delay`, and the jobs of every tenant with the latest and the most dead runs in a
 * recent window, and with a recent misfire, for the `tock_job_*` gauges. Read from the database,
 * so every server answers the same; every read is bounded (buckets and range by
 * `checkDelayWindow`, jobs by `limit`).
 */
import {
  checkDelayWindow,
  type DelayBucket,
  type DelayWindow,
  ValidationError,
  validateId,
} from '../core/index.js';
import { checkInstant, checkLimit } from './checks.js';
import * as Q from './queries/delay.js';
import {
  JOB_SUCCESS_COUNT_CAP,
  jobSuccessForgetIdle,
  jobSuccessOldest,
  jobSuccessRecord,
} from './queries/job-successes.js';
import { jobMisfiredRecent } from './queries/jobs.js';
import type { Queryable } from './rows.js';

/** A recent window of slots, [now − windowMs, now], and the most jobs a per-job read returns per ranking. */
export interface RecentParams {
  now: number;
  windowMs: number;
  limit: number;
}

/** The start of a recent window, checked. */
function windowStart(p: RecentParams): Date {
  if (!Number.isInteger(p.windowMs) || p.windowMs < 1)
    throw new ValidationError('windowMs must be a positive integer', { field: 'windowMs' });
  return checkInstant(p.now - p.windowMs, 'from');
}

/** A job in the recent window (`recentJobDelays`): its largest delay and its dead runs there. */
export interface JobDelay {
  tenantId: string;
  jobId: string;
  /** The largest delay of its runs with a slot in the window, ms: ended runs, and the wait so far of queued ones. */
  delayMs: number;
  /** Its runs with a slot in the window that are dead. */
  dead: number;
  /** Among the `limit` jobs with the largest `delayMs`. */
  late: boolean;
  /** Among the `limit` jobs with the most dead runs (and has one). */
  dying: boolean;
}

/**
 * The buckets with runs of a tenant's delay series over `window` (checked as `delayWindow` does),
 * of one pool or job when given.
 */
export async function delaySeries(
  db: Queryable,
  p: { tenantId: string; window: DelayWindow; pool?: string; jobId?: string },
): Promise<DelayBucket[]> {
  const w = p.window;
  // The caller's window, checked again here: the statement's cost rests on its bounds.
  if (checkDelayWindow(w.fromMs, w.toMs, w.stepMs).buckets !== w.buckets)
    throw new ValidationError('the window has the wrong number of buckets');
  const params = [
    p.tenantId,
    checkInstant(w.fromMs, 'from'),
    checkInstant(w.toMs, 'to'),
    w.fromMs,
    w.stepMs,
    p.pool ?? null,
  ];
  const { rows } =
    p.jobId === undefined
      ? await db.query(Q.runDelaySeries, params)
      : await db.query(Q.runDelaySeriesOfJob, [...params, validateId(p.jobId, 'job_id')]);
  return rows.map((r) => ({
    index: r.bucket as number,
    runs: r.runs as number,
    p50Ms: r.p50 as number,
    p99Ms: r.p99 as number,
    maxMs: r.max as number,
  }));
}

/**
 * Every tenant's jobs with a run whose slot is in [now − windowMs, now]: those among the `limit`
 * with the largest delay, and those among the `limit` with the most dead runs; at most 2 × `limit`
 * rows, with the number of jobs seen in the window.
 */
export async function recentJobDelays(
  db: Queryable,
  p: RecentParams,
): Promise<{ jobs: JobDelay[]; seen: number }> {
  const { rows } = await db.query(Q.runJobDelayTop, [
    windowStart(p),
    checkInstant(p.now, 'now'),
    checkLimit(p.limit, 10_000),
  ]);
  return {
    seen: rows[0] ? (rows[0].jobs as number) : 0,
    jobs: rows.map((r) => ({
      tenantId: r.tenant_id as string,
      jobId: r.job_id as string,
      delayMs: r.delay_ms as number,
      dead: r.dead as number,
      late: r.late as boolean,
      dying: r.dying as boolean,
    })),
  };
}

/** A job whose last misfire is recent (`recentMisfires`). */
export interface JobMisfire {
  tenantId: string;
  jobId: string;
  /** Slots its misfire policy dropped since it was created, where countable. */
  slots: number;
  /** The last tick that found it behind and dropped slots. */
  at: Date;
}

/**
 * Every tenant's jobs whose last misfire is in [now − windowMs, now], newest first, at most
 * `limit`, with how many there are (`jobs_misfired`; migration 0025).
 */
export async function recentMisfires(
  db: Queryable,
  p: RecentParams,
): Promise<{ jobs: JobMisfire[]; seen: number }> {
  const { rows } = await db.query(jobMisfiredRecent, [windowStart(p), checkLimit(p.limit, 10_000)]);
  return {
    seen: rows[0] ? (rows[0].jobs as number) : 0,
    jobs: rows.map((r) => ({
      tenantId: r.tenant_id as string,
      jobId: r.job_id as string,
      slots: Number(r.misfired_slots),
      at: r.misfired_at as Date,
    })),
  };
}

/** A job's last success as recorded in `job_successes` (`jobLastSuccesses`). */
export interface JobSuccess {
  tenantId: string;
  jobId: string;
  at: Date;
}

/** How far back of `now` the slots of the runs `jobLastSuccesses` looks at go, ms: 1 hour. */
export const JOB_SUCCESS_LOOKBACK_MS = 3_600_000;

/**
 * Records the successes of every tenant's newest runs with a slot in the last `lookbackMs`
 * (`jobSuccessRecord`: a job's last success only moves forward, and nothing is written when
 * nothing is new), then answers the `limit` enabled jobs whose last success is oldest, with how
 * many jobs have one (`seen`, at most JOB_SUCCESS_COUNT_CAP). Read from the database, so every
 * server answers the same; the completion writes nothing for it.
 */
export async function jobLastSuccesses(
  db: Queryable,
  p: { now: number; limit: number; lookbackMs?: number },
): Promise<{ jobs: JobSuccess[]; seen: number }> {
  const limit = checkLimit(p.limit, 10_000);
  const lookback = p.lookbackMs ?? JOB_SUCCESS_LOOKBACK_MS;
  await db.query(jobSuccessRecord, [
    windowStart({ now: p.now, windowMs: lookback, limit }),
    checkInstant(p.now, 'now'),
  ]);
  await db.query(jobSuccessForgetIdle, [limit]);
  const { rows } = await db.query(jobSuccessOldest, [limit]);
  return {
    seen: Math.min(rows[0] ? (rows[0].jobs as number) : 0, JOB_SUCCESS_COUNT_CAP),
    jobs: rows
      .filter((r) => r.job_id !== null)
      .map((r) => ({
        tenantId: r.tenant_id as string,
        jobId: r.job_id as string,
        at: r.succeeded_at as Date,
      })),
  };
}
