/**
 * Test data builders and small assertions shared by the store tests.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { expect } from 'vitest';
import {
  type ErrorCode,
  type JobInput,
  type RetentionState,
  TockError,
  validateJob,
} from '../../src/core/index.js';
import type { Job, Store, UpsertChange } from '../../src/store/index.js';
import { slotHolders } from '../../src/store/queries/gates.js';
import { attemptsOfRun } from '../../src/store/queries/runs.js';
import { T0 } from './database.js';

let counter = 0;

/** A job definition with test defaults: `job-<n>`, every 10 s, handler `noop`. */
export function job(overrides: Partial<JobInput> = {}): JobInput {
  counter += 1;
  return { jobId: `job-${counter}`, schedule: '@every 10s', handler: 'noop', ...overrides };
}

/**
 * Registers one job as `PUT /v1/jobs/{job_id}` does: validated on its own (`validateJob`'s messages),
 * written by `upsertJobs([job])`, its row back.
 */
export async function upsertJob(
  store: Pick<Store, 'upsertJobs'>,
  p: { tenantId: string; job: JobInput; now: number },
): Promise<{ job: Job; change: UpsertChange }> {
  const { changes } = await store.upsertJobs({
    tenantId: p.tenantId,
    jobs: [validateJob(p.job)],
    now: p.now,
    withJobs: true,
  });
  const { job, change } = changes[0]!;
  return { job, change };
}

/** A fresh identifier with a readable prefix (tenants, job ids), unique within the test run. */
export function uniqueId(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** Awaits `promise`, expects it to reject with a `TockError` of `code`, and returns that error. */
export async function expectTockError(promise: Promise<unknown>, code: ErrorCode): Promise<TockError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected a ${code} error, but nothing was thrown`).toBeInstanceOf(TockError);
  const err = caught as TockError;
  expect(err.code).toBe(code);
  return err;
}

/** `SELECT count(*)` of a table (optionally filtered), as a number. */
export async function countRows(
  pool: pg.Pool,
  table: string,
  where = 'true',
  params: unknown[] = [],
): Promise<number> {
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${table} WHERE ${where}`, params);
  return rows[0].n as number;
}

/**
 * The concurrency slots of limits that running runs hold, as their claims record them: of `gate`,
 * or of every gate (null; `c.gates` as the gates of interest takes each claim's own).
 */
export async function slotsHeld(pool: pg.Pool, gate: string | null = null): Promise<number> {
  const gates = gate === null ? 'c.gates' : '$1::text[]';
  const { rows } = await pool.query(
    `SELECT count(*)::int AS n FROM (${slotHolders(gates)}) h`,
    gate === null ? [] : [[gate]],
  );
  return rows[0].n as number;
}

/**
 * `n` runs of a job (handler `noop`) queued straight by SQL, as `bench/lib.mjs` seeds a backlog:
 * run i (from 0) available at `firstMs + i × stepMs` (epoch ms), created at T0; one statement for
 * the runs and their queue rows (fast for tens of thousands).
 */
export async function queueRuns(
  pool: pg.Pool,
  r: { tenantId: string; jobId: string; pool: string; n: number; firstMs: number; stepMs: number },
): Promise<void> {
  await pool.query(
    `WITH made AS (
       INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
         backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at)
       SELECT $1, $2, s.t, 3, 'noop', '{}', $3, 0, 2, 3600, s.t, s.t, $7
       FROM generate_series(0, $4::int - 1) AS i,
         LATERAL (SELECT $5::timestamptz + i * $6::int * interval '1 ms' AS t) s
       RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key
     )
     INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
     SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key FROM made`,
    [r.tenantId, r.jobId, r.pool, r.n, new Date(r.firstMs), r.stepMs, new Date(T0)],
  );
}

/**
 * `n` ready runs of a job (handler `call-api`) queued straight by SQL, at distinct slots a second
 * apart a day before `at` (fast for thousands), each taking the named limit `<tenant>/api`.
 */
export async function queueLimitedRuns(
  pool: pg.Pool,
  r: { tenantId: string; jobId: string; pool: string; n: number; at: number },
): Promise<void> {
  await pool.query(
    `WITH made AS (
       INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
         backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, gates)
       SELECT $1, $2, s.t, 3, 'call-api', '{}', $3, 0, 2, 3600, s.t, s.t, s.t, ARRAY[$1 || '/api']
       FROM generate_series(1, $4::int) AS i,
         LATERAL (SELECT $5::timestamptz - interval '1 day' + i * interval '1 second' AS t) s
       RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates
     )
     INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates)
     SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates FROM made`,
    [r.tenantId, r.jobId, r.pool, r.n, new Date(r.at)],
  );
}

/** Every column of one run, straight from the table (for "nothing changed" checks). */
export async function runRow(pool: pg.Pool, runId: string): Promise<Record<string, unknown>> {
  const { rows } = await pool.query('SELECT * FROM run_states WHERE run_id = $1', [runId]);
  expect(rows).toHaveLength(1);
  return rows[0];
}

/**
 * Every attempt of one run as the store reports it (`attemptsOfRun`): the rows of attempts that
 * ended in failure, release or expiry, and the running or succeeded attempt from the run row.
 */
export async function attemptRows(pool: pg.Pool, runId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await pool.query(attemptsOfRun, [runId]);
  return rows;
}

/** The report fields of an attempt whose handler reported nothing (`ctx.progress`, `ctx.log`). */
export const NO_REPORT = {
  progress: null,
  progressMessage: null,
  logs: [],
  logsDropped: 0,
  reportedAt: null,
} as const;

/** Rounds `ms` up to the next multiple of `step` (the next `@every` slot at or after `ms`). */
export function alignUp(ms: number, step: number): number {
  return Math.ceil(ms / step) * step;
}

/**
 * Makes `pool` run `between` once, right after the first query whose SQL matches `match` returns
 * and before the caller sees the result: a deterministic "something happened between the read
 * and the write" for stores that read, decide, then write.
 */
export function pauseAfter(
  pool: pg.Pool,
  match: (sql: string) => boolean,
  between: () => Promise<void>,
): pg.Pool {
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  let fired = false;
  const wrapped = async (...args: unknown[]) => {
    const result = await query(...args);
    // A statement is its text, or a named (prepared) statement's config object.
    const sql = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: unknown } | undefined)?.text;
    if (!fired && typeof sql === 'string' && match(sql)) {
      fired = true;
      await between();
    }
    return result;
  };
  (pool as unknown as { query: typeof wrapped }).query = wrapped;
  return pool;
}

/**
 * A run of `jobId` at `slot` that ended in `state` at `finishedAt`, with an attempt row and a
 * progress row (what pruning must take with it); with `state` null, a pending run, queued.
 */
export async function endedRun(
  db: { store: Store; pool: pg.Pool },
  p: { tenantId: string; jobId: string; slot: number; state: RetentionState | null; finishedAt: number },
): Promise<string> {
  const run = await db.store.triggerRun({
    tenantId: p.tenantId,
    jobId: p.jobId,
    scheduledFor: p.slot,
    now: p.slot,
  });
  if (p.state === null) return run.runId;
  const at = new Date(p.finishedAt);
  await db.pool.query('DELETE FROM run_queue WHERE run_id = $1', [run.runId]);
  await db.pool.query(
    `UPDATE runs SET state = $2, finished_at = $3, parked = CASE WHEN $2 = 'succeeded' THEN NULL ELSE $2 END
     WHERE run_id = $1`,
    [run.runId, p.state, at],
  );
  const token = randomUUID();
  await db.pool.query(
    `INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at, finished_at, outcome)
     VALUES ($1, $2, 1, 'w', $3, $3, 'failed')`,
    [token, run.runId, at],
  );
  await db.pool.query(
    'INSERT INTO attempt_progress (run_id, lease_token, progress, updated_at) VALUES ($1, $2, 1, $3)',
    [run.runId, token, at],
  );
  return run.runId;
}

/** A run for the delay reads (`insertDelayRuns`): its slot, and when it became due and started, epoch ms. */
export interface DelayRun {
  tenantId: string;
  jobId: string;
  slot: number;
  /** Its start minus its slot, ms; with `createdAfterMs`, minus its creation instead. Null: never started. */
  delayMs: number | null;
  /** Created this long after its slot (a trigger for a past slot, a backfill). Default 0. */
  createdAfterMs?: number;
  /** Default 'succeeded'; 'pending' is queued (in `run_queue`, available at its slot). */
  state?: 'succeeded' | 'dead' | 'cancelled' | 'pending';
  pool?: string;
}

/**
 * Runs written straight by SQL (no job needed), as run history keeps them: `available_at` at the
 * slot, `created_at` at the slot plus `createdAfterMs`, `started_at` at the later of the two plus
 * `delayMs`; a pending run is queued. Fast for thousands (one statement for the runs).
 */
export async function insertDelayRuns(pool: pg.Pool, runs: readonly DelayRun[]): Promise<void> {
  const col = <T>(f: (r: DelayRun) => T) => runs.map(f);
  await pool.query(
    `WITH made AS (
       INSERT INTO runs (tenant_id, job_id, scheduled_for, state, parked, max_attempts, handler, payload, pool,
         priority, backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, started_at,
         finished_at)
       SELECT v.tenant_id, v.job_id, to_timestamp(v.slot / 1000.0), v.state,
         CASE WHEN v.state IN ('dead', 'cancelled') THEN v.state END, 3, 'h', '{}', v.pool, 0, 2, 3600,
         to_timestamp(v.slot / 1000.0), to_timestamp(v.slot / 1000.0), to_timestamp((v.slot + v.created) / 1000.0),
         to_timestamp((v.slot + v.created + v.delay) / 1000.0),
         CASE WHEN v.state <> 'pending' THEN to_timestamp((v.slot + v.created + v.delay) / 1000.0 + 1) END
       FROM unnest($1::text[], $2::text[], $3::float8[], $4::text[], $5::text[], $6::float8[], $7::float8[])
         AS v(tenant_id, job_id, slot, state, pool, created, delay)
       RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, state
     )
     INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
     SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key FROM made
     WHERE state = 'pending'`,
    [
      col((r) => r.tenantId),
      col((r) => r.jobId),
      col((r) => r.slot),
      col((r) => r.state ?? 'succeeded'),
      col((r) => r.pool ?? 'default'),
      col((r) => r.createdAfterMs ?? 0),
      col((r) => r.delayMs),
    ],
  );
}
