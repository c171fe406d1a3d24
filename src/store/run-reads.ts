/**
 * Reads of runs: one run with its attempts, pages of a tenant's or a job's runs, counts by state,
 * the ready queue's depth, runs no live worker serves, and when a pool's next run becomes
 * claimable. Every read of a run goes through the `run_states` view (a claimed run is `running`).
 */
import {
  DEFAULT_NODE_LIVE_MS,
  describeWaits,
  isRunState,
  type LeaseRef,
  NotFoundError,
  RUN_STATES,
  type RunState,
  ValidationError,
  validateId,
} from '../core/index.js';
import { checkInstant, checkLeases, checkLimit, UUID } from './checks.js';
import { tenantFilter } from './claims.js';
import { decodeCursor, encodeCursor, notIssued } from './cursor.js';
import { pacingOf } from './limits.js';
import * as Q from './queries/run-reads.js';
import { attemptsOfRun } from './queries/runs.js';
import { type Queryable, toAttempt, toRun } from './rows.js';
import type { Page, ReadyDepth, Run, RunWithAttempts, UnservedRuns } from './types.js';

/**
 * A tenant's runs in one state: queued and claimed runs from the queue and the claims (few), dead,
 * cancelled and skipped ones through their own index, succeeded ones newest first through the
 * tenant's. `stateParam`: the statement takes the state as $2.
 */
const LIST_BY_STATE: Record<RunState, { sql: (shape: Q.PageShape) => string; stateParam: boolean }> = {
  pending: { sql: Q.runListQueued, stateParam: false },
  running: { sql: Q.runListClaimed, stateParam: false },
  dead: { sql: Q.runListParked, stateParam: true },
  cancelled: { sql: Q.runListParked, stateParam: true },
  skipped: { sql: Q.runListParked, stateParam: true },
  succeeded: { sql: Q.runListSucceeded, stateParam: false },
};

export async function getRun(
  db: Queryable,
  p: { tenantId: string; runId: string },
): Promise<RunWithAttempts> {
  const missing = () => new NotFoundError(`run ${p.runId} does not exist`, { run_id: p.runId });
  if (!UUID.test(p.runId)) throw missing();
  const { rows } = await db.query(Q.runGet, [p.tenantId, p.runId]);
  if (!rows[0]) throw missing();
  const attempts = await db.query(attemptsOfRun, [p.runId]);
  return { ...toRun(rows[0]), attempts: attempts.rows.map(toAttempt) };
}

/** Which of `runIds` are runs of the tenant (ids that are not uuids are none). */
export async function tenantRunIds(
  db: Queryable,
  p: { tenantId: string; runIds: readonly string[] },
): Promise<Set<string>> {
  const ids = [...new Set(p.runIds.filter((id) => UUID.test(id)))];
  if (ids.length === 0) return new Set();
  const { rows } = await db.query(Q.runIdsOfTenant, [p.tenantId, ids]);
  return new Set(rows.map((r) => r.run_id as string));
}

/** Which runs of `leases` hold a live lease under their token and are the tenant's (malformed ids: none). */
export async function liveRunIds(
  db: Queryable,
  p: { tenantId: string; leases: readonly LeaseRef[]; now: number },
): Promise<Set<string>> {
  const { ids, tokens } = checkLeases(p.leases);
  if (ids.length === 0) return new Set();
  const { rows } = await db.query(Q.runIdsLiveOfTenant, [
    p.tenantId,
    ids,
    tokens,
    checkInstant(p.now, 'now'),
  ]);
  return new Set(rows.map((r) => r.run_id as string));
}

/** A cursor of `listRuns`: the last run's slot and id. */
function runCursor(cursor: string): { slot: Date; runId: string } {
  const [ms, id] = decodeCursor(cursor);
  if (typeof ms !== 'number' || typeof id !== 'string' || !UUID.test(id)) throw notIssued();
  return { slot: checkInstant(ms, 'cursor'), runId: id };
}

/** Newest first by `(scheduled_for, run_id)`: a job's runs through its history, a tenant's by state. */
export async function listRuns(
  db: Queryable,
  p: { tenantId: string; jobId?: string; state?: RunState; limit: number; cursor?: string | null },
): Promise<Page<Run>> {
  const limit = checkLimit(p.limit);
  if (p.state !== undefined && !isRunState(p.state)) {
    throw new ValidationError(`state must be one of ${RUN_STATES.join(', ')}`, { field: 'state' });
  }
  const after = p.cursor ? runCursor(p.cursor) : null;
  const shape = { rows: limit + 1, after: after !== null };
  let sql: string;
  let params: unknown[];
  if (p.jobId !== undefined) {
    sql =
      p.state === 'pending' || p.state === 'running'
        ? Q.runListOfJobInState(shape)
        : Q.runListOfJob(shape, p.state !== undefined);
    params = [
      p.tenantId,
      p.jobId,
      ...(p.state !== undefined ? [p.state] : []),
      ...(after ? [after.slot] : []),
    ];
  } else {
    const byState = p.state !== undefined ? LIST_BY_STATE[p.state] : null;
    sql = byState ? byState.sql(shape) : Q.runList(shape);
    params = [
      p.tenantId,
      ...(byState?.stateParam ? [p.state] : []),
      ...(after ? [after.slot, after.runId] : []),
    ];
  }
  const { rows } = await db.query(sql, params);
  const items = rows.slice(0, limit).map(toRun);
  const last = items[items.length - 1];
  return {
    items,
    nextCursor: rows.length > limit && last ? encodeCursor([last.scheduledFor.getTime(), last.runId]) : null,
  };
}

/** Rows of (state, n) as a count for every state, 0 for those without a row. */
function byState(rows: { state: string; n: number }[]): Record<RunState, number> {
  const counts = Object.fromEntries(RUN_STATES.map((s) => [s, 0])) as Record<RunState, number>;
  for (const r of rows) if (isRunState(r.state)) counts[r.state] = r.n;
  return counts;
}

export async function countRuns(db: Queryable, p: { tenantId?: string }): Promise<Record<RunState, number>> {
  return byState((await db.query(Q.runCountByState, [p.tenantId ?? null])).rows);
}

/** Below this many rows in \`runs\` (the planner's estimate), \`sampleRunCounts\` counts exactly. */
export const EXACT_COUNT_BELOW = 100_000;

/**
 * Runs per state of every tenant, for the gauges: exact while \`runs\` is small (under
 * \`exactBelow\` rows by the planner's estimate, or never analysed), else without reading every
 * run: pending, running, dead, cancelled and skipped exact, succeeded the rest of the estimated
 * rows. Returns whether succeeded is an estimate.
 */
export async function sampleRunCounts(
  db: Queryable,
  p: { exactBelow?: number } = {},
): Promise<{ counts: Record<RunState, number>; estimated: boolean }> {
  const rows = (await db.query(Q.runRowsEstimate)).rows[0].n as number;
  if (!(rows >= (p.exactBelow ?? EXACT_COUNT_BELOW)))
    return { counts: await countRuns(db, {}), estimated: false };
  const counts = byState((await db.query(Q.runCountSample)).rows);
  // Pending runs a claim holds are running; every other run is in the queue, parked or succeeded.
  const known = counts.pending + counts.running + counts.dead + counts.cancelled + counts.skipped;
  counts.succeeded = Math.max(0, Math.round(rows - known));
  return { counts, estimated: true };
}

/** Claimable queued runs by pool and priority (all tenants), the deepest first. */
export async function readyDepth(db: Queryable, p: { now: number }): Promise<ReadyDepth[]> {
  const { rows } = await db.query(Q.runReadyByPriority, [checkInstant(p.now, 'now')]);
  return rows
    .map((r) => ({ pool: r.pool as string, priority: r.priority as number, ready: r.n as number }))
    .sort((a, b) => b.ready - a.ready || a.pool.localeCompare(b.pool) || a.priority - b.priority);
}

export async function unservedRuns(
  db: Queryable,
  p: { now: number; tenantId?: string | null; limit: number },
): Promise<UnservedRuns> {
  const tenantId =
    p.tenantId === undefined || p.tenantId === null ? null : validateId(p.tenantId, 'tenant_id');
  const { rows } = await db.query(Q.runUnserved, [
    checkInstant(p.now, 'now'),
    tenantId,
    checkLimit(p.limit),
    DEFAULT_NODE_LIVE_MS,
  ]);
  return {
    runs: rows[0] ? Number(rows[0].runs) : 0,
    groups: rows[0] ? (rows[0].groups as number) : 0,
    items: rows.map((r) => ({
      tenantId: r.tenant_id as string,
      pool: r.pool as string,
      handler: r.handler as string,
      runs: r.n as number,
      since: r.since as Date,
    })),
  };
}

/**
 * The earliest instant after `now` (the instant of a claim that found too little) that a pool's
 * pending run may become claimable: its `available_at`, or a limit's room (`runNextAvailable`); null
 * when none is known.
 */
export async function nextAvailableAt(
  db: Queryable,
  p: { pool: string; now: number; tenantId?: string; tenants?: readonly string[]; aheadMs?: number },
): Promise<Date | null> {
  const { rows } = await db.query(Q.runNextAvailable, [
    p.pool,
    checkInstant(p.now, 'now'),
    p.tenantId ?? null,
    tenantFilter(p.tenants),
    Math.max(0, Math.floor(p.aheadMs ?? 0)),
  ]);
  return (rows[0]?.at as Date | null) ?? null;
}

/** The most (tenant, pool, handler) groups `waitingFor` reads to find whether a run's is unserved. */
const UNSERVED_GROUPS = 500;

/**
 * What holds a queued run, as phrases (`describeWaits`): its limits, its job's cap or overlap, and
 * no live worker serving its pool and handler; null for a run that is not queued or not due
 * (a run due later waits for its time, which `available_at` says).
 */
export async function waitingFor(
  db: Queryable,
  p: { tenantId: string; runId: string; now: number },
): Promise<string | null> {
  const found = await waitingForMany(db, { tenantId: p.tenantId, runIds: [p.runId], now: p.now });
  return found.get(p.runId) ?? null;
}

/** Most runs `waitingForMany` answers for at once: the largest page of a list. */
export const MAX_WAITING_RUNS = 500;

/**
 * `waitingFor` for a page of runs at once, in three statements whatever the page's size (its
 * queue rows, all their gates, the unserved groups of the tenant): the run ids that wait, each
 * with its phrases; a run not queued, not due or held by nothing is not in the map.
 */
export async function waitingForMany(
  db: Queryable,
  p: { tenantId: string; runIds: readonly string[]; now: number },
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const ids = [...new Set(p.runIds.filter((id) => UUID.test(id)))];
  if (ids.length > MAX_WAITING_RUNS)
    throw new ValidationError(`at most ${MAX_WAITING_RUNS} runs at once`, { field: 'run_ids' });
  checkInstant(p.now, 'now');
  if (ids.length === 0) return out;
  const queued = await db.query(Q.runQueued, [p.tenantId, ids]);
  const due = queued.rows.filter((r) => (r.available_at as Date).getTime() <= p.now);
  if (due.length === 0) return out;
  const { rows } = await db.query(Q.runGates, [p.tenantId, due.map((r) => r.run_id)]);
  const unserved = await unservedRuns(db, { now: p.now, tenantId: p.tenantId, limit: UNSERVED_GROUPS });
  for (const run of due) {
    const waits = describeWaits(
      rows
        .filter((r) => r.run_id === run.run_id)
        .map((r) => ({
          key: r.key,
          maxConcurrency: r.max_concurrency,
          inUse: r.in_use,
          overlap: r.overlap,
          pacing: pacingOf(r),
          holder: r.holder,
        })),
      p.now,
    );
    if (unserved.items.some((g) => g.pool === run.pool && g.handler === run.handler)) {
      waits.push(`no live worker serves handler ${run.handler} in pool ${run.pool}`);
    }
    if (waits.length > 0) out.set(run.run_id as string, waits.join('; '));
  }
  return out;
}
