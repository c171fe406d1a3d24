/**
 * The tick: one transaction that locks up to a batch of due jobs (`FOR UPDATE SKIP LOCKED`, so
 * schedulers racing on the same shards share them), inserts the runs `planTick` plans for each
 * (a slot that has a run is skipped: one run per slot), and advances each job's `next_run_at`,
 * adding the slots its misfire policy dropped to the job's misfire record (migration 0025).
 * With a fence, only the shards this node still holds at the epochs it was given, locked
 * `FOR SHARE` until the commit so none changes hands during the tick. A job whose misfire policy
 * dropped slots gets its `job.misfired` deliveries in the same transaction.
 */
import { planTick, type Schedule, ValidationError } from '../core/index.js';
import { checkInstant } from './checks.js';
import { runNotify } from './queries/channel.js';
import * as J from './queries/jobs.js';
import { misfireDeliveries } from './queries/notifications.js';
import * as R from './queries/runs.js';
import * as S from './queries/shards.js';
import { type Queryable, type Row, toRef } from './rows.js';
import type { Store } from './store.js';
import type { RunRef, TickResult } from './types.js';

export type TickParams = Parameters<Store['tick']>[0];

/** Checks a tick's parameters before its transaction; returns its horizon (now + lookahead). */
export function checkTick(p: TickParams): Date {
  if (!Number.isInteger(p.batchSize) || p.batchSize < 1)
    throw new ValidationError('tick batch size must be positive');
  if (!(p.lookaheadMs >= 0)) throw new ValidationError('lookahead must not be negative');
  return checkInstant(p.now + p.lookaheadMs, 'now');
}

/** The shards of the fence this node still holds at its epochs (locked), and those it lost. */
async function fence(
  db: Queryable,
  p: TickParams & { fence: NonNullable<TickParams['fence']> },
): Promise<{ held: number[]; fencedOut: number[] }> {
  const asked = p.fence.shards.filter((f) => p.shards === undefined || p.shards.includes(f.shardId));
  const { rows } = await db.query(S.shardFence, [
    p.fence.nodeId,
    new Date(p.now),
    asked.map((f) => f.shardId),
    asked.map((f) => f.epoch),
  ]);
  const kept = new Set<number>(rows.map((r) => r.shard_id as number));
  const ids = asked.map((f) => f.shardId);
  return { held: ids.filter((id) => kept.has(id)), fencedOut: ids.filter((id) => !kept.has(id)) };
}

/** What `planTick` needs of a due row of `jobDueLock`. */
function dueJob(row: Row) {
  return {
    tenantId: row.tenant_id as string,
    jobId: row.job_id as string,
    schedule: row.schedule as string,
    timezone: row.timezone as string,
    nextRunAt: (row.next_run_at as Date).getTime(),
    misfire: row.misfire,
    catchUpLimit: row.catch_up_limit as number,
    priority: row.priority as number,
    jitterSeconds: row.jitter_seconds as number,
    misfireThresholdSeconds: row.misfire_threshold_seconds as number | null,
  };
}

type TickContext = TickParams & {
  horizon: Date;
  shardIds: number[];
  misfireThresholdMs: number;
  agingStepMs: number;
  parse: (source: string, timezone: string) => Schedule;
};

/**
 * The statements' arrays for the due jobs' plans: the slots to insert, and each job's new
 * `next_run_at` with the slots its misfire policy dropped.
 */
function planDue(rows: Row[], p: TickContext) {
  const slots = { tenants: [] as string[], jobs: [] as string[], at: [] as Date[], keys: [] as Date[] };
  const available: Date[] = [];
  const next = {
    tenants: [] as string[],
    jobs: [] as string[],
    at: [] as (Date | null)[],
    dropped: [] as number[],
    misfired: [] as boolean[],
  };
  let dropped = 0;
  const parked: TickResult['parked'] = [];
  for (const row of rows) {
    const job = dueJob(row);
    const plan = planTick({
      job,
      now: p.now,
      lookaheadMs: p.lookaheadMs,
      misfireThresholdMs: p.misfireThresholdMs,
      agingStepMs: p.agingStepMs,
      parse: p.parse,
    });
    for (const run of plan.runs) {
      slots.tenants.push(job.tenantId);
      slots.jobs.push(job.jobId);
      slots.at.push(new Date(run.scheduledFor));
      available.push(new Date(run.availableAt));
      slots.keys.push(new Date(run.sortKey));
    }
    dropped += plan.dropped;
    if (plan.parked !== null) parked.push({ tenantId: job.tenantId, jobId: job.jobId, reason: plan.parked });
    next.tenants.push(job.tenantId);
    next.jobs.push(job.jobId);
    next.at.push(plan.nextRunAt === null ? null : new Date(plan.nextRunAt));
    next.dropped.push(plan.dropped);
    next.misfired.push(plan.misfired);
  }
  return { slots, available, next, dropped, parked };
}

/**
 * One tick, inside a transaction (`db` a client in it). `shardIds`: the shards to scan when no
 * fence narrows them (`p.shards`, or all).
 */
export async function tick(db: Queryable, p: TickContext): Promise<TickResult> {
  let shards = p.shardIds;
  let fencedOut: number[] = [];
  if (p.fence) {
    ({ held: shards, fencedOut } = await fence(db, { ...p, fence: p.fence }));
    if (shards.length === 0) return { jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut };
  }
  const due = await db.query(J.jobDueLock, [p.horizon, p.batchSize, shards]);
  const { slots, available, next, dropped, parked } = planDue(due.rows, p);
  const now = new Date(p.now);
  let created: RunRef[] = [];
  if (slots.at.length > 0) {
    const inserted = await db.query(R.runInsertSlots, [
      slots.tenants,
      slots.jobs,
      slots.at,
      slots.keys,
      now,
      available,
    ]);
    created = inserted.rows.map(toRef);
  }
  if (next.jobs.length > 0)
    await db.query(J.jobAdvanceMany, [next.tenants, next.jobs, next.at, next.dropped, next.misfired, now]);
  if (created.length > 0) await db.query(runNotify);
  // A misfire's notifications, in the tick's transaction; a tick that dropped nothing pays nothing.
  // `dropped_slots` null: more than the policy could count (a long cron backlog).
  const misfired = next.jobs.flatMap((_, i) => (next.misfired[i] ? [i] : []));
  if (misfired.length > 0) {
    const of = <T>(xs: T[]) => misfired.map((i) => xs[i] as T);
    const counts = of(next.dropped).map((n) => (n > 0 ? n : null));
    await db.query(misfireDeliveries, [of(next.tenants), of(next.jobs), counts, now]);
  }
  return {
    jobs: due.rows.length,
    created,
    dropped,
    parked,
    full: due.rows.length === p.batchSize,
    fencedOut,
  };
}
