/**
 * The PostgreSQL implementation of `Store`. It owns every SQL statement (in `queries/`) and keeps
 * Tock's invariants in the database: one run per (tenant, job, slot) by a unique index; every
 * write a worker makes is fenced by its lease token and a live lease; the reaper's write is
 * guarded by the token it read; time always comes in as a parameter, never from `now()`.
 */
import type pg from 'pg';
import {
  allows,
  badTextAt,
  ConflictError,
  DEFAULT_MISFIRE_THRESHOLD_MS,
  DEFAULT_NODE_LIVE_MS,
  definitionHash,
  describeBadText,
  firstSlotFrom,
  hashSecret,
  isRunState,
  type JobInput,
  jitterOffsetMs,
  KEY_PREFIX,
  keyOfRole,
  LeaseLostError,
  NotFoundError,
  newApiKey,
  parseRole,
  parseSchedule,
  planSlots,
  type Random,
  type Role,
  RUN_STATES,
  type RunState,
  remoteNodeId,
  resultText,
  retryDelayMs,
  type Schedule,
  shardOf,
  sortKey,
  TockError,
  ValidationError,
  validateId,
  validateJob,
} from '../core/index.js';
import { checkInstant, checkLimit, UUID } from './checks.js';
import { type ClaimParams, claimRuns, releaseClaim, tenantFilter } from './claims.js';
import { inTransaction } from './db.js';
import * as A from './queries/api.js';
import * as J from './queries/jobs.js';
import * as R from './queries/runs.js';
import * as S from './queries/shards.js';
import type {
  ApiKey,
  Attempt,
  ClaimedRun,
  Completion,
  EndedLease,
  IdempotentAnswer,
  Job,
  LeaseRef,
  NodeInfo,
  Page,
  ReapResult,
  Run,
  RunRef,
  RunWithAttempts,
  ShardInfo,
  ShardLease,
  ShardStep,
  Store,
  TickResult,
  UnservedRuns,
  UpsertChange,
} from './types.js';

export interface PostgresStoreOptions {
  /** Lease length for runs whose job sets none, ms. Default 30000. */
  leaseMs?: number;
  /** Waiting this long raises a run's effective priority by one, ms. Default 60000. */
  agingStepMs?: number;
  /** A job whose `next_run_at` is older than this is behind and its misfire policy applies, ms. Default 60000. */
  misfireThresholdMs?: number;
  /** Uniform [0, 1) source for backoff jitter. Default `Math.random`. */
  random?: Random;
}

// biome-ignore lint/suspicious/noExplicitAny: pg rows are untyped until mapped here
type Row = Record<string, any>;

function toJob(r: Row, misfireDefaultSeconds: number): Job {
  return {
    tenantId: r.tenant_id,
    jobId: r.job_id,
    handler: r.handler,
    payload: r.payload,
    schedule: r.schedule,
    timezone: r.timezone,
    priority: r.priority,
    maxAttempts: r.max_attempts,
    backoffBaseSeconds: r.backoff_base_seconds,
    backoffCapSeconds: r.backoff_cap_seconds,
    misfire: r.misfire,
    catchUpLimit: r.catch_up_limit,
    pool: r.pool,
    leaseSeconds: r.lease_seconds,
    jitterSeconds: r.jitter_seconds,
    timeoutSeconds: r.timeout_seconds,
    misfireThresholdSeconds: r.misfire_threshold_seconds,
    misfireAfterSeconds: r.misfire_threshold_seconds ?? misfireDefaultSeconds,
    enabled: r.enabled,
    shardId: r.shard_id,
    nextRunAt: r.next_run_at,
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/**
 * A tenant's runs in one state: queued and claimed runs from the queue and the claims (few), dead
 * and cancelled ones through their own index, succeeded ones newest first through the tenant's.
 */
const LIST_BY_STATE: Record<RunState, string> = {
  pending: R.runListQueued,
  running: R.runListClaimed,
  dead: R.runListParked,
  cancelled: R.runListParked,
  succeeded: R.runList,
};

function toRun(r: Row): Run {
  return {
    runId: r.run_id,
    tenantId: r.tenant_id,
    jobId: r.job_id,
    scheduledFor: r.scheduled_for,
    state: r.state,
    attempt: r.attempt,
    maxAttempts: r.max_attempts,
    handler: r.handler,
    payload: r.payload,
    pool: r.pool,
    priority: r.priority,
    availableAt: r.available_at,
    leaseOwner: r.lease_owner,
    leaseExpiresAt: r.lease_expires_at,
    lastError: r.last_error,
    createdAt: r.created_at,
    startedAt: r.started_at,
    claimedAt: r.claimed_at,
    finishedAt: r.finished_at,
  };
}

function toApiKey(r: Row): ApiKey {
  return {
    keyId: r.key_id,
    tenantId: r.tenant_id,
    role: r.role,
    name: r.name,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}

function toRef(r: Row): RunRef {
  return { runId: r.run_id, tenantId: r.tenant_id, jobId: r.job_id, scheduledFor: r.scheduled_for };
}

function encodeCursor(parts: unknown[]): string {
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

/**
 * A cursor's parts. A cursor is base64url JSON a caller may forge, and the API's text guard sees
 * only its encoding: one decoding to text PostgreSQL refuses (U+0000, an unpaired surrogate) is
 * refused here, like any cursor this server did not issue.
 */
function decodeCursor(cursor: string): unknown[] {
  try {
    const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(parts) && badTextAt(parts) === null) return parts;
  } catch {
    // fall through
  }
  throw new ValidationError('cursor is not one this server issued', { field: 'cursor' });
}

/** The largest page of nodes. */
export const MAX_NODE_PAGE = 500;

/**
 * Output, error and release-reason text as it is stored (`resultText`: the last 64 KiB, U+0000 and
 * unpaired surrogates replaced by U+FFFD). The last line of defence: no text a handler or an API
 * caller sends can make these writes fail with SQLSTATE 22021 (a data error the whole completion
 * batch would share).
 */
const clip = resultText;

/**
 * A handler start a worker reported, checked, as epoch ms (the statements take numbers: the driver
 * sends one in a third of the time a `Date` takes); null when it reported none.
 */
function startedMsOf(ms: number | null | undefined): number | null {
  if (ms === undefined || ms === null) return null;
  checkInstant(ms, 'started_at');
  return ms;
}

function checkLeases<L extends LeaseRef>(
  leases: readonly L[],
): { ids: string[]; tokens: string[]; invalid: string[]; valid: L[] } {
  const ids: string[] = [];
  const tokens: string[] = [];
  const invalid: string[] = [];
  const valid: L[] = [];
  for (const l of leases) {
    if (UUID.test(l.runId) && UUID.test(l.leaseToken)) {
      ids.push(l.runId);
      tokens.push(l.leaseToken);
      valid.push(l);
    } else {
      invalid.push(l.runId);
    }
  }
  return { ids, tokens, invalid, valid };
}

/** Most jobs one `upsertJobs` call takes. */
export const MAX_BULK_JOBS = 1000;

export { MAX_CLAIM_AHEAD_MS } from './claims.js';

export class PostgresStore implements Store {
  readonly leaseMs: number;
  readonly agingStepMs: number;
  readonly misfireThresholdMs: number;
  private readonly random: Random;
  private readonly schedules = new Map<string, Schedule>();
  /** Rows of `shards`, read once. */
  private shardTotal: number | undefined;

  /** The shard count, fixed in the `shards` table when the database was initialised. */
  private async shardCount(): Promise<number> {
    this.shardTotal ??= await this.countShards();
    return this.shardTotal;
  }

  private async allShardIds(): Promise<number[]> {
    return Array.from({ length: await this.shardCount() }, (_, i) => i);
  }

  constructor(
    private readonly pool: pg.Pool,
    options: PostgresStoreOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 30_000;
    this.agingStepMs = options.agingStepMs ?? 60_000;
    this.misfireThresholdMs = options.misfireThresholdMs ?? DEFAULT_MISFIRE_THRESHOLD_MS;
    this.random = options.random ?? Math.random;
    if (!Number.isInteger(this.leaseMs) || this.leaseMs < 1000)
      throw new ValidationError('lease must be at least 1s');
  }

  /** Parsed schedules, cached: a tick over many jobs parses each distinct expression once. */
  private schedule(source: string, timezone: string): Schedule {
    const key = `${timezone}\u0000${source}`;
    let s = this.schedules.get(key);
    if (!s) {
      s = parseSchedule(source, timezone);
      if (this.schedules.size >= 10_000) this.schedules.clear();
      this.schedules.set(key, s);
    }
    return s;
  }

  // -- jobs -------------------------------------------------------------------------------------

  /** A `jobs` row as a `Job`, with the misfire threshold that applies to it. */
  private job(row: Row): Job {
    return toJob(row, this.misfireThresholdMs / 1000);
  }

  async upsertJob(p: {
    tenantId: string;
    job: JobInput;
    now: number;
  }): Promise<{ job: Job; change: UpsertChange }> {
    const tenantId = validateId(p.tenantId, 'tenant_id');
    const { spec, schedule } = validateJob(p.job);
    const now = checkInstant(p.now, 'now');
    if (schedule.kind === 'at' && schedule.atMs <= p.now) {
      // A one-shot in the past is a mistake for a new job, but re-applying one that already
      // exists with that same instant (it fired, or is firing) must stay a harmless no-op.
      const existing = await this.getJob({ tenantId, jobId: spec.jobId }).catch(() => null);
      if (!existing || existing.schedule !== spec.schedule || existing.timezone !== spec.timezone) {
        throw new ValidationError(`@at instant ${new Date(schedule.atMs).toISOString()} is in the past`, {
          field: 'schedule',
        });
      }
    }
    const first = firstSlotFrom(schedule, p.now);
    const { rows } = await this.pool.query(J.jobUpsert, [
      tenantId,
      spec.jobId,
      spec.handler,
      JSON.stringify(spec.payload),
      spec.schedule,
      spec.timezone,
      spec.priority,
      spec.maxAttempts,
      spec.backoffBaseSeconds,
      spec.backoffCapSeconds,
      spec.misfire,
      spec.catchUpLimit,
      spec.pool,
      spec.leaseSeconds,
      shardOf(tenantId, spec.jobId, await this.shardCount()),
      first === null ? null : new Date(first),
      definitionHash(spec),
      now,
      spec.jitterSeconds,
      spec.timeoutSeconds,
      spec.misfireThresholdSeconds,
    ]);
    const row = rows[0];
    if (!row) return { job: await this.getJob({ tenantId, jobId: spec.jobId }), change: 'unchanged' };
    return { job: this.job(row), change: row.inserted ? 'created' : 'updated' };
  }

  /**
   * Creates or updates up to 1000 jobs in one statement: the bulk path for registering many
   * definitions. Every job is validated first; one bad job (or a job id twice) refuses the whole
   * batch with its index named, and nothing is written. Same rules per job as `upsertJob`.
   */
  async upsertJobs(p: {
    tenantId: string;
    jobs: readonly JobInput[];
    now: number;
  }): Promise<{ changes: { jobId: string; change: UpsertChange }[] }> {
    const tenantId = validateId(p.tenantId, 'tenant_id');
    const now = checkInstant(p.now, 'now');
    if (!Array.isArray(p.jobs) || p.jobs.length === 0)
      throw new ValidationError('jobs must be a non-empty list');
    if (p.jobs.length > MAX_BULK_JOBS)
      throw new ValidationError(`at most ${MAX_BULK_JOBS} jobs per request (got ${p.jobs.length})`);
    const shardCount = await this.shardCount();
    const seen = new Set<string>();
    const specs: { spec: ReturnType<typeof validateJob>['spec']; first: number | null; pastAt: boolean }[] =
      [];
    for (const [i, input] of p.jobs.entries()) {
      let checked: ReturnType<typeof validateJob>;
      try {
        checked = validateJob(input);
      } catch (err) {
        if (err instanceof ValidationError)
          throw new ValidationError(`jobs[${i}]: ${err.message}`, { ...err.details, index: i });
        throw err;
      }
      const { spec, schedule } = checked;
      if (seen.has(spec.jobId))
        throw new ValidationError(`jobs[${i}]: job_id "${spec.jobId}" appears twice`, { index: i });
      seen.add(spec.jobId);
      specs.push({
        spec,
        first: firstSlotFrom(schedule, p.now),
        pastAt: schedule.kind === 'at' && schedule.atMs <= p.now,
      });
    }
    // A one-shot in the past is refused unless it re-applies an existing job's same instant.
    const pastAt = specs.filter((s) => s.pastAt);
    if (pastAt.length > 0) {
      const { rows } = await this.pool.query(J.jobSchedules, [tenantId, pastAt.map((s) => s.spec.jobId)]);
      const existing = new Map(rows.map((r) => [r.job_id as string, `${r.timezone}\u0000${r.schedule}`]));
      for (const s of pastAt) {
        if (existing.get(s.spec.jobId) !== `${s.spec.timezone}\u0000${s.spec.schedule}`) {
          const i = specs.indexOf(s);
          throw new ValidationError(`jobs[${i}]: @at instant of job "${s.spec.jobId}" is in the past`, {
            field: 'schedule',
            index: i,
          });
        }
      }
    }
    const col = <T>(f: (s: (typeof specs)[number]) => T) => specs.map(f);
    const { rows } = await this.pool.query(J.jobUpsertMany, [
      tenantId,
      col((s) => s.spec.jobId),
      col((s) => s.spec.handler),
      col((s) => JSON.stringify(s.spec.payload)),
      col((s) => s.spec.schedule),
      col((s) => s.spec.timezone),
      col((s) => s.spec.priority),
      col((s) => s.spec.maxAttempts),
      col((s) => s.spec.backoffBaseSeconds),
      col((s) => s.spec.backoffCapSeconds),
      col((s) => s.spec.misfire),
      col((s) => s.spec.catchUpLimit),
      col((s) => s.spec.pool),
      col((s) => s.spec.leaseSeconds),
      col((s) => shardOf(tenantId, s.spec.jobId, shardCount)),
      col((s) => (s.first === null ? null : new Date(s.first))),
      col((s) => definitionHash(s.spec)),
      now,
      col((s) => s.spec.jitterSeconds),
      col((s) => s.spec.timeoutSeconds),
      col((s) => s.spec.misfireThresholdSeconds),
    ]);
    const written = new Map(
      rows.map((r) => [r.job_id as string, r.inserted ? 'created' : 'updated'] as const),
    );
    return {
      changes: specs.map((s) => ({ jobId: s.spec.jobId, change: written.get(s.spec.jobId) ?? 'unchanged' })),
    };
  }

  async getJob(p: { tenantId: string; jobId: string }): Promise<Job> {
    const { rows } = await this.pool.query(J.jobGet, [p.tenantId, p.jobId]);
    if (!rows[0]) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
    return this.job(rows[0]);
  }

  async listJobs(p: { tenantId: string; limit: number; cursor?: string | null }): Promise<Page<Job>> {
    const limit = checkLimit(p.limit);
    let after: string | null = null;
    if (p.cursor) {
      const [jobId] = decodeCursor(p.cursor);
      if (typeof jobId !== 'string') throw new ValidationError('cursor is not one this server issued');
      after = jobId;
    }
    const { rows } = await this.pool.query(J.jobList, [p.tenantId, after, limit + 1]);
    const items = rows.slice(0, limit).map((r) => this.job(r));
    const last = items[items.length - 1];
    return { items, nextCursor: rows.length > limit && last ? encodeCursor([last.jobId]) : null };
  }

  async pauseJob(p: { tenantId: string; jobId: string; now: number }): Promise<Job> {
    const { rows } = await this.pool.query(J.jobPause, [p.tenantId, p.jobId, checkInstant(p.now, 'now')]);
    if (!rows[0]) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
    return this.job(rows[0]);
  }

  /** Resuming starts from the next slot after now: the slots of the paused time are not backfilled. */
  async resumeJob(p: { tenantId: string; jobId: string; now: number }): Promise<Job> {
    const job = await this.getJob(p);
    if (job.enabled) return job;
    const next = firstSlotFrom(this.schedule(job.schedule, job.timezone), p.now);
    const { rows } = await this.pool.query(J.jobResume, [
      p.tenantId,
      p.jobId,
      checkInstant(p.now, 'now'),
      next === null ? null : new Date(next),
    ]);
    return rows[0] ? this.job(rows[0]) : this.getJob(p);
  }

  async deleteJob(p: { tenantId: string; jobId: string; now: number }): Promise<{ cancelledRuns: number }> {
    const now = checkInstant(p.now, 'now');
    return inTransaction(this.pool, async (client) => {
      const deleted = await client.query(J.jobDelete, [p.tenantId, p.jobId]);
      if (deleted.rowCount === 0)
        throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
      const cancelled = await client.query(R.runCancelPendingOfJob, [p.tenantId, p.jobId, now]);
      return { cancelledRuns: cancelled.rowCount ?? 0 };
    });
  }

  // -- scheduling -------------------------------------------------------------------------------

  async tick(p: {
    now: number;
    lookaheadMs: number;
    batchSize: number;
    shards?: readonly number[];
    fence?: { nodeId: string; shards: readonly { shardId: number; epoch: number }[] };
  }): Promise<TickResult> {
    if (!Number.isInteger(p.batchSize) || p.batchSize < 1)
      throw new ValidationError('tick batch size must be positive');
    if (!(p.lookaheadMs >= 0)) throw new ValidationError('lookahead must not be negative');
    const horizon = checkInstant(p.now + p.lookaheadMs, 'now');
    return inTransaction(this.pool, async (client) => {
      // Without a shard list, every shard: the due scan walks the (shard_id, next_run_at) index either way.
      let shards = p.shards ? [...p.shards] : await this.allShardIds();
      let fencedOut: number[] = [];
      if (p.fence) {
        // Only the shards this node still holds at the epochs it was given; FOR SHARE keeps them
        // from changing hands until this transaction ends.
        const asked = p.fence.shards.filter((f) => p.shards === undefined || p.shards.includes(f.shardId));
        const held = await client.query(S.shardFence, [
          p.fence.nodeId,
          new Date(p.now),
          asked.map((f) => f.shardId),
          asked.map((f) => f.epoch),
        ]);
        const kept = new Set<number>(held.rows.map((r) => r.shard_id as number));
        shards = asked.map((f) => f.shardId).filter((id) => kept.has(id));
        fencedOut = asked.map((f) => f.shardId).filter((id) => !kept.has(id));
        if (shards.length === 0)
          return { jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut };
      }
      const due = await client.query(J.jobDueLock, [horizon, p.batchSize, shards]);
      const tenants: string[] = [];
      const jobs: string[] = [];
      const slots: Date[] = [];
      const keys: Date[] = [];
      const available: Date[] = [];
      const nextTenants: string[] = [];
      const nextJobs: string[] = [];
      const nexts: (Date | null)[] = [];
      let dropped = 0;
      const parked: TickResult['parked'] = [];
      for (const row of due.rows) {
        let next: number | null = null;
        try {
          const plan = planSlots({
            schedule: this.schedule(row.schedule, row.timezone),
            nextRunAt: (row.next_run_at as Date).getTime(),
            now: p.now,
            lookaheadMs: p.lookaheadMs,
            misfireThresholdMs:
              row.misfire_threshold_seconds === null
                ? this.misfireThresholdMs
                : row.misfire_threshold_seconds * 1000,
            policy: row.misfire,
            catchUpLimit: row.catch_up_limit,
          });
          const jitter = jitterOffsetMs(row.tenant_id, row.job_id, row.jitter_seconds);
          for (const slot of plan.slots) {
            tenants.push(row.tenant_id);
            jobs.push(row.job_id);
            slots.push(new Date(slot));
            available.push(new Date(slot + jitter));
            keys.push(new Date(sortKey(slot + jitter, row.priority, this.agingStepMs)));
          }
          dropped += plan.dropped ?? 0;
          next = plan.nextRunAt;
        } catch (err) {
          // A stored schedule that no longer parses (a runtime without its timezone) cannot fire:
          // park the job rather than let it head the due scan forever, and say so.
          next = null;
          parked.push({
            tenantId: row.tenant_id,
            jobId: row.job_id,
            reason: err instanceof Error ? err.message : String(err),
          });
        }
        nextTenants.push(row.tenant_id);
        nextJobs.push(row.job_id);
        nexts.push(next === null ? null : new Date(next));
      }
      let created: RunRef[] = [];
      if (slots.length > 0) {
        const inserted = await client.query(R.runInsertSlots, [
          tenants,
          jobs,
          slots,
          keys,
          new Date(p.now),
          available,
        ]);
        created = inserted.rows.map(toRef);
      }
      if (nextJobs.length > 0) await client.query(J.jobAdvanceMany, [nextTenants, nextJobs, nexts]);
      if (created.length > 0) await client.query(R.runNotify);
      return {
        jobs: due.rows.length,
        created,
        dropped,
        parked,
        full: due.rows.length === p.batchSize,
        fencedOut,
      };
    });
  }

  async triggerRun(p: { tenantId: string; jobId: string; scheduledFor?: number; now: number }): Promise<Run> {
    const now = checkInstant(p.now, 'now');
    const slot = checkInstant(p.scheduledFor ?? p.now, 'scheduled_for');
    const job = await this.getJob(p);
    const key = new Date(sortKey(slot.getTime(), job.priority, this.agingStepMs));
    const { rows } = await this.pool.query(R.runInsertOne, [p.tenantId, p.jobId, slot, key, now]);
    if (rows[0]) {
      await this.pool.query(R.runNotify);
      return toRun(rows[0]);
    }
    const existing = await this.pool.query(R.runBySlot, [p.tenantId, p.jobId, slot]);
    const runId = existing.rows[0]?.run_id;
    if (!runId) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
    throw new ConflictError(`job "${p.jobId}" already has run ${runId} for ${slot.toISOString()}`, {
      run_id: runId,
    });
  }

  // -- leased execution -------------------------------------------------------------------------

  async claimRuns(p: ClaimParams): Promise<ClaimedRun[]> {
    return claimRuns(this.pool, this.leaseMs, p);
  }

  async releaseClaim(p: {
    claimId: string;
    workerId: string;
    now: number;
    reason: string;
    tenantId?: string;
  }): Promise<{ released: string[] }> {
    return releaseClaim(this.pool, p);
  }

  async heartbeatRuns(p: {
    leases: readonly LeaseRef[];
    now: number;
    tenantId?: string;
  }): Promise<{ renewed: { runId: string; leaseExpiresAt: Date }[]; lost: string[] }> {
    const { ids, tokens, invalid } = checkLeases(p.leases);
    const now = checkInstant(p.now, 'now');
    const { rows } = ids.length
      ? await this.pool.query(R.runHeartbeatMany, [ids, tokens, now, p.tenantId ?? null])
      : { rows: [] };
    const renewed = rows.map((r: Row) => ({
      runId: r.run_id as string,
      leaseExpiresAt: r.lease_expires_at as Date,
    }));
    const ok = new Set(renewed.map((r) => r.runId));
    return { renewed, lost: [...invalid, ...ids.filter((id) => !ok.has(id))] };
  }

  async completeRuns(p: {
    leases: readonly Completion[];
    now: number;
    tenantId?: string;
    withJobs?: boolean;
  }): Promise<{
    completed: string[];
    lost: string[];
    jobs?: { runId: string; tenantId: string; jobId: string }[];
  }> {
    const { ids, tokens, invalid, valid } = checkLeases(p.leases);
    const now = checkInstant(p.now, 'now');
    // In the order of `ids`: checkLeases keeps the well-formed leases in order.
    const outputs = valid.map((l) =>
      l.output === undefined || l.output === null ? null : clip(String(l.output)),
    );
    const starts = valid.map((l) => startedMsOf(l.startedAt));
    const { rows } = ids.length
      ? await this.pool.query(R.runCompleteMany, [ids, tokens, now, p.tenantId ?? null, outputs, starts])
      : { rows: [] };
    const completed = rows.map((r: Row) => r.run_id as string);
    const ok = new Set(completed);
    const answer = { completed, lost: [...invalid, ...ids.filter((id) => !ok.has(id))] };
    if (!p.withJobs) return answer;
    return {
      ...answer,
      jobs: rows.map((r: Row) => ({ runId: r.run_id, tenantId: r.tenant_id, jobId: r.job_id })),
    };
  }

  async failRun(p: {
    runId: string;
    leaseToken: string;
    error: string;
    errorStack?: string | null;
    startedAt?: number | null;
    permanent?: boolean;
    retryAfterMs?: number;
    output?: string | null;
    now: number;
    tenantId?: string;
  }): Promise<{ state: 'pending' | 'dead'; attempt: number; availableAt: Date | null }> {
    const now = checkInstant(p.now, 'now');
    const startedAt = startedMsOf(p.startedAt);
    const lost = () => new LeaseLostError(`the lease on run ${p.runId} is not live`, { run_id: p.runId });
    if (!UUID.test(p.runId) || !UUID.test(p.leaseToken)) throw lost();
    if (p.retryAfterMs !== undefined && !(p.retryAfterMs >= 0 && Number.isFinite(p.retryAfterMs))) {
      throw new ValidationError('retry_after must be a non-negative number of ms', { field: 'retry_after' });
    }
    const read = await this.pool.query(R.runFailRead, [p.runId, p.leaseToken, now, p.tenantId ?? null]);
    const run = read.rows[0];
    if (!run) throw lost();
    const dead = p.permanent === true || run.attempt >= run.max_attempts;
    let availableAt: Date | null = null;
    let key: Date | null = null;
    if (!dead) {
      const delay =
        p.retryAfterMs ??
        retryDelayMs(
          run.attempt,
          { baseSeconds: run.backoff_base_seconds, capSeconds: run.backoff_cap_seconds, jitter: 0.5 },
          this.random,
        );
      availableAt = new Date(p.now + delay);
      key = new Date(sortKey(availableAt.getTime(), run.priority, this.agingStepMs));
    }
    const error = clip(String(p.error));
    const { rows } = await this.pool.query(R.runFail, [
      p.runId,
      p.leaseToken,
      now,
      dead ? 'dead' : 'pending',
      availableAt,
      key,
      error,
      p.output === undefined || p.output === null ? null : clip(String(p.output)),
      startedAt,
      p.errorStack === undefined || p.errorStack === null ? null : clip(String(p.errorStack)),
    ]);
    if (!rows[0]) throw lost();
    return { state: dead ? 'dead' : 'pending', attempt: rows[0].attempt, availableAt };
  }

  async releaseRuns(p: {
    leases: readonly EndedLease[];
    reason: string;
    now: number;
    tenantId?: string;
  }): Promise<{ released: string[] }> {
    const { ids, tokens, valid } = checkLeases(p.leases);
    if (ids.length === 0) return { released: [] };
    const { rows } = await this.pool.query(R.runReleaseMany, [
      ids,
      tokens,
      checkInstant(p.now, 'now'),
      clip(p.reason),
      p.tenantId ?? null,
      valid.map((l) => startedMsOf(l.startedAt)),
    ]);
    if (rows.length > 0) await this.pool.query(R.runNotify);
    return { released: rows.map((r: Row) => r.run_id as string) };
  }

  async reapExpired(p: { now: number; batchSize: number }): Promise<ReapResult> {
    const now = checkInstant(p.now, 'now');
    const candidates = await this.pool.query(R.runReapCandidates, [now, p.batchSize]);
    if (candidates.rows.length === 0) return { requeued: [], dead: [] };
    const ids: string[] = [];
    const tokens: string[] = [];
    const states: string[] = [];
    const available: (Date | null)[] = [];
    const keys: (Date | null)[] = [];
    for (const c of candidates.rows) {
      ids.push(c.run_id);
      tokens.push(c.lease_token);
      if (c.attempt >= c.max_attempts) {
        states.push('dead');
        available.push(null);
        keys.push(null);
      } else {
        const delay = retryDelayMs(
          c.attempt,
          { baseSeconds: c.backoff_base_seconds, capSeconds: c.backoff_cap_seconds, jitter: 0.5 },
          this.random,
        );
        states.push('pending');
        available.push(new Date(p.now + delay));
        keys.push(new Date(sortKey(p.now + delay, c.priority, this.agingStepMs)));
      }
    }
    const { rows } = await this.pool.query(R.runReap, [ids, tokens, states, available, keys, now]);
    const result: ReapResult = { requeued: [], dead: [] };
    for (const r of rows) {
      if (r.state === 'dead') result.dead.push(toRef(r));
      else result.requeued.push({ ...toRef(r), attempt: r.attempt });
    }
    return result;
  }

  // -- operator views ---------------------------------------------------------------------------

  async replayRun(p: { tenantId: string; runId: string; now: number }): Promise<Run> {
    const run = await this.getRun(p);
    if (run.state !== 'dead') {
      throw new ConflictError(`run ${p.runId} is ${run.state}; only a dead run can be replayed`, {
        state: run.state,
      });
    }
    const key = new Date(sortKey(p.now, run.priority, this.agingStepMs));
    const { rows } = await this.pool.query(R.runReplay, [
      p.tenantId,
      p.runId,
      checkInstant(p.now, 'now'),
      key,
    ]);
    if (!rows[0]) throw new ConflictError(`run ${p.runId} changed state while being replayed`);
    await this.pool.query(R.runNotify);
    return toRun(rows[0]);
  }

  async getRun(p: { tenantId: string; runId: string }): Promise<RunWithAttempts> {
    const missing = () => new NotFoundError(`run ${p.runId} does not exist`, { run_id: p.runId });
    if (!UUID.test(p.runId)) throw missing();
    const { rows } = await this.pool.query(R.runGet, [p.tenantId, p.runId]);
    if (!rows[0]) throw missing();
    const attempts = await this.pool.query(R.attemptsOfRun, [p.runId]);
    return {
      ...toRun(rows[0]),
      attempts: attempts.rows.map(
        (a): Attempt => ({
          attempt: a.attempt,
          workerId: a.worker_id,
          startedAt: a.started_at,
          claimedAt: a.claimed_at,
          finishedAt: a.finished_at,
          outcome: a.outcome,
          error: a.error,
          errorStack: a.error_stack,
          output: a.output,
        }),
      ),
    };
  }

  async listRuns(p: {
    tenantId: string;
    jobId?: string;
    state?: RunState;
    limit: number;
    cursor?: string | null;
  }): Promise<Page<Run>> {
    const limit = checkLimit(p.limit);
    if (p.state !== undefined && !isRunState(p.state)) {
      throw new ValidationError(`state must be one of ${RUN_STATES.join(', ')}`, { field: 'state' });
    }
    let slot: Date | null = null;
    let runId: string | null = null;
    if (p.cursor) {
      const [ms, id] = decodeCursor(p.cursor);
      if (typeof ms !== 'number' || typeof id !== 'string' || !UUID.test(id)) {
        throw new ValidationError('cursor is not one this server issued', { field: 'cursor' });
      }
      slot = checkInstant(ms, 'cursor');
      runId = id;
    }
    // A job's runs are read through its history; a tenant's by LIST_BY_STATE.
    const { rows } =
      p.jobId !== undefined
        ? await this.pool.query(R.runListOfJob, [p.tenantId, p.jobId, p.state ?? null, slot, limit + 1])
        : await this.pool.query(p.state ? LIST_BY_STATE[p.state] : R.runList, [
            p.tenantId,
            p.state ?? null,
            slot,
            runId,
            limit + 1,
          ]);
    const items = rows.slice(0, limit).map(toRun);
    const last = items[items.length - 1];
    return {
      items,
      nextCursor:
        rows.length > limit && last ? encodeCursor([last.scheduledFor.getTime(), last.runId]) : null,
    };
  }

  async countRuns(p: { tenantId?: string }): Promise<Record<RunState, number>> {
    const counts = Object.fromEntries(RUN_STATES.map((s) => [s, 0])) as Record<RunState, number>;
    const { rows } = await this.pool.query(R.runCountByState, [p.tenantId ?? null]);
    for (const r of rows) {
      const state: string = r.state;
      if (isRunState(state)) counts[state] = r.n;
    }
    return counts;
  }

  // -- API keys and idempotency -----------------------------------------------------------------

  async createApiKey(p: {
    tenantId: string;
    role: Role;
    name?: string;
    now: number;
  }): Promise<{ key: ApiKey; secret: string }> {
    const tenantId = validateId(p.tenantId, 'tenant_id');
    const role = parseRole(p.role);
    const name = p.name ?? '';
    if (typeof name !== 'string' || name.length > 200)
      throw new ValidationError('name must be at most 200 characters', { field: 'name' });
    const bad = badTextAt(name, 'name');
    if (bad) throw new ValidationError(describeBadText(bad), { field: 'name' });
    const { keyId, secret } = newApiKey();
    const { rows } = await this.pool.query(A.apiKeyInsert, [
      keyId,
      tenantId,
      role,
      name,
      hashSecret(secret),
      checkInstant(p.now, 'now'),
    ]);
    return { key: toApiKey(rows[0]), secret };
  }

  async authenticate(secret: string): Promise<ApiKey | null> {
    if (typeof secret !== 'string' || !secret.startsWith(KEY_PREFIX) || secret.length > 200) return null;
    const { rows } = await this.pool.query(A.apiKeyBySecret, [hashSecret(secret)]);
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async listApiKeys(p: { tenantId: string }): Promise<ApiKey[]> {
    const { rows } = await this.pool.query(A.apiKeyList, [p.tenantId]);
    return rows.map(toApiKey);
  }

  async revokeApiKey(p: {
    tenantId: string;
    keyId: string;
    now: number;
    by: Role | 'database';
  }): Promise<ApiKey> {
    const mayRevokeCluster = p.by === 'database' || allows(parseRole(p.by), 'cluster');
    const { rows } = await this.pool.query(A.apiKeyRevoke, [
      p.tenantId,
      p.keyId,
      checkInstant(p.now, 'now'),
      mayRevokeCluster,
    ]);
    if (!rows[0]) throw new NotFoundError(`key ${p.keyId} does not exist`, { key_id: p.keyId });
    if (!rows[0].revoked) {
      throw new TockError(
        'forbidden',
        `${keyOfRole(p.by)} may not revoke a cluster-admin key: that needs a cluster-admin key or the database`,
        { key_id: p.keyId },
      );
    }
    return toApiKey(rows[0]);
  }

  async hasApiKeys(): Promise<boolean> {
    const { rows } = await this.pool.query(A.apiKeyAny);
    return rows[0].any === true;
  }

  async takeIdempotent(p: {
    tenantId: string;
    scope: string;
    key: string;
    requestHash: string;
    now: number;
    ttlMs: number;
  }): Promise<
    | { state: 'taken' }
    | { state: 'done'; answer: IdempotentAnswer }
    | { state: 'in_progress'; requestHash: string }
  > {
    const notBefore = new Date(p.now - p.ttlMs);
    for (let i = 0; i < 3; i++) {
      const taken = await this.pool.query(A.idempotencyClaim, [
        p.tenantId,
        p.scope,
        p.key,
        p.requestHash,
        new Date(p.now),
        notBefore,
      ]);
      if (taken.rows.length === 1) return { state: 'taken' };
      const { rows } = await this.pool.query(A.idempotencyGet, [p.tenantId, p.scope, p.key, notBefore]);
      const r = rows[0];
      if (!r) continue; // released or expired in between: try to take it again
      if (r.status === 0) return { state: 'in_progress', requestHash: r.request_hash };
      return { state: 'done', answer: { requestHash: r.request_hash, status: r.status, body: r.body } };
    }
    return { state: 'in_progress', requestHash: p.requestHash };
  }

  async finishIdempotent(p: {
    tenantId: string;
    scope: string;
    key: string;
    answer: IdempotentAnswer;
  }): Promise<void> {
    await this.pool.query(A.idempotencyFinish, [
      p.tenantId,
      p.scope,
      p.key,
      p.answer.requestHash,
      p.answer.status,
      JSON.stringify(p.answer.body),
    ]);
  }

  async releaseIdempotent(p: { tenantId: string; scope: string; key: string }): Promise<void> {
    await this.pool.query(A.idempotencyRelease, [p.tenantId, p.scope, p.key]);
  }

  async pruneIdempotency(p: { now: number; ttlMs: number; batchSize: number }): Promise<number> {
    const r = await this.pool.query(A.idempotencyPrune, [new Date(p.now - p.ttlMs), p.batchSize]);
    return r.rowCount ?? 0;
  }

  async readyDepth(p: { now: number }): Promise<Map<number, number>> {
    const { rows } = await this.pool.query(R.runReadyByPriority, [checkInstant(p.now, 'now')]);
    return new Map(rows.map((r) => [r.priority as number, r.n as number]));
  }

  /**
   * Calls `onWake` whenever runs may have become claimable (the tick materialised some, a trigger,
   * a replay, a release). Holds one connection for LISTEN and re-listens after a connection loss;
   * the returned function stops listening. `onListening` hears each change between listening
   * (true) and not (false: the connection is lost or could not be made, and a retry is pending).
   */
  async listen(
    onWake: () => void,
    onListening: (up: boolean) => void = () => {},
  ): Promise<() => Promise<void>> {
    let stopped = false;
    let client: { c: pg.PoolClient; release: (destroy?: boolean) => void } | null = null;
    let retry: ReturnType<typeof setTimeout> | null = null;
    const connect = async (): Promise<void> => {
      try {
        const c = await this.pool.connect();
        // Released exactly once, by whichever comes first: the stop, or the connection's loss
        // (which can also arrive after the stop, while the pool shuts down).
        let released = false;
        const release = (destroy?: boolean) => {
          if (released) return;
          released = true;
          c.off('error', onError);
          c.release(destroy);
        };
        const onError = () => {
          release(true);
          if (client?.c === c) client = null;
          if (!stopped) {
            onListening(false);
            retry = setTimeout(() => void connect(), 1000);
          }
        };
        c.on('notification', () => onWake());
        c.on('error', onError);
        await c.query(`LISTEN ${R.RUNS_CHANNEL}`);
        if (stopped) {
          release();
          return;
        }
        client = { c, release };
        onListening(true);
        onWake(); // anything that arrived while not listening
      } catch {
        if (!stopped) {
          onListening(false);
          retry = setTimeout(() => void connect(), 1000);
        }
      }
    };
    await connect();
    return async () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      const held = client;
      client = null;
      if (held) {
        await held.c.query(`UNLISTEN ${R.RUNS_CHANNEL}`).catch(() => {});
        held.release();
      }
    };
  }

  // -- nodes and shards -----------------------------------------------------------------------

  /** How many shards the job space has (fixed when the database was initialised). */
  async countShards(): Promise<number> {
    const { rows } = await this.pool.query('SELECT count(*)::int AS n FROM shards');
    const n = rows[0].n as number;
    if (n < 1) throw new Error('the shards table is empty: run the migrations (tock migrate)');
    return n;
  }

  /** Registers a node or records that it is alive, with its clock offset and what it reports. */
  async touchNode(p: {
    nodeId: string;
    role: string;
    now: number;
    clock?: { offsetMs: number; uncertaintyMs: number };
    info?: Record<string, unknown>;
  }): Promise<void> {
    await this.pool.query(S.nodeTouch, [
      validateId(p.nodeId, 'node_id'),
      p.role,
      checkInstant(p.now, 'now'),
      p.clock?.offsetMs ?? null,
      p.clock?.uncertaintyMs ?? null,
      JSON.stringify(p.info ?? {}),
    ]);
  }

  /**
   * One shard-lease step of scheduler node `nodeId`: it says it is alive, renews the shards it
   * still holds (those whose lease ran out are lost), gives back those above its fair share
   * `ceil(shards / live scheduler nodes)` (highest ids first), and takes unowned or expired
   * shards up to it. A node is live while it was seen within one lease.
   */
  async shardStep(p: {
    nodeId: string;
    now: number;
    leaseMs: number;
    clock?: { offsetMs: number; uncertaintyMs: number };
    info?: Record<string, unknown>;
  }): Promise<ShardStep> {
    const now = checkInstant(p.now, 'now');
    if (!Number.isInteger(p.leaseMs) || p.leaseMs < 100)
      throw new ValidationError('shard lease must be at least 100ms');
    const expiry = new Date(p.now + p.leaseMs);
    await this.touchNode({ ...p, role: 'scheduler' });
    const shardCount = await this.shardCount();
    const live = await this.pool.query(S.nodeCountLive, ['scheduler', new Date(p.now - p.leaseMs)]);
    const liveNodes = Math.max(1, live.rows[0].n as number);
    const fairShare = Math.ceil(shardCount / liveNodes);
    const lease = (r: { shard_id: number; epoch: string; lease_expires_at: Date }): ShardLease => ({
      shardId: r.shard_id,
      epoch: Number(r.epoch),
      expiresAt: r.lease_expires_at,
    });
    let owned = (await this.pool.query(S.shardRenew, [p.nodeId, now, expiry])).rows.map(lease);
    owned.sort((a, b) => a.shardId - b.shardId);
    let released: number[] = [];
    let taken: number[] = [];
    if (owned.length > fairShare) {
      const extra = owned.slice(fairShare).map((o) => o.shardId);
      const { rows } = await this.pool.query(S.shardRelease, [p.nodeId, extra]);
      released = rows.map((r) => r.shard_id as number).sort((a, b) => a - b);
      owned = owned.filter((o) => !released.includes(o.shardId));
    } else if (owned.length < fairShare) {
      const { rows } = await this.pool.query(S.shardTake, [p.nodeId, now, expiry, fairShare - owned.length]);
      const got = rows.map(lease);
      taken = got.map((g) => g.shardId).sort((a, b) => a - b);
      owned = [...owned, ...got].sort((a, b) => a.shardId - b.shardId);
    }
    const next = await this.pool.query(S.shardNextForeignExpiry, [p.nodeId, now]);
    return {
      owned,
      released,
      taken,
      liveNodes,
      fairShare,
      shardCount,
      nextForeignExpiry: (next.rows[0]?.at as Date | null) ?? null,
    };
  }

  /** A node leaving on purpose: gives back every shard it holds and forgets the node. */
  async leaveNode(p: { nodeId: string }): Promise<{ released: number[] }> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query(S.shardRelease, [p.nodeId, await this.allShardIds()]);
      await client.query(S.nodeDelete, [p.nodeId]);
      return { released: rows.map((r) => r.shard_id as number).sort((a, b) => a - b) };
    });
  }

  /**
   * A remote worker of `tenantId` (known through the HTTP API) says it is alive: its row is
   * `<tenant>/<workerId>`, never a cluster node's or another tenant's. At most `cap` rows per
   * tenant: the least recently seen give way. `touched` is false when the id is not this tenant's
   * worker row (it cannot be, given the namespace, but the statement checks rather than trusts).
   */
  async touchRemoteWorker(p: {
    tenantId: string;
    workerId: string;
    now: number;
    info?: Record<string, unknown>;
    clock?: { offsetMs: number; uncertaintyMs: number };
    cap: number;
  }): Promise<{ nodeId: string; touched: boolean; evicted: number }> {
    const tenantId = validateId(p.tenantId, 'tenant_id');
    const nodeId = remoteNodeId(tenantId, validateId(p.workerId, 'worker_id'));
    if (!Number.isInteger(p.cap) || p.cap < 1) throw new ValidationError('cap must be a positive integer');
    const now = checkInstant(p.now, 'now');
    return inTransaction(this.pool, async (client) => {
      await client.query(S.nodeRemoteLock, [tenantId]);
      const { rows } = await client.query(S.nodeTouchRemote, [
        nodeId,
        tenantId,
        now,
        JSON.stringify(p.info ?? {}),
        p.cap,
        p.clock?.offsetMs ?? null,
        p.clock?.uncertaintyMs ?? null,
      ]);
      return { nodeId, touched: rows[0].touched === 1, evicted: rows[0].evicted as number };
    });
  }

  /** A remote worker of `tenantId` leaving on purpose: its row goes (no other tenant's, no cluster node's). */
  async leaveRemoteWorker(p: { tenantId: string; workerId: string }): Promise<{ left: boolean }> {
    const tenantId = validateId(p.tenantId, 'tenant_id');
    const nodeId = remoteNodeId(tenantId, validateId(p.workerId, 'worker_id'));
    const { rowCount } = await this.pool.query(S.nodeDeleteRemote, [nodeId, tenantId]);
    return { left: (rowCount ?? 0) > 0 };
  }

  /**
   * Forgets cluster nodes not seen since `before` (their leases ran out long ago) and remote
   * workers not seen since `remoteBefore` (default: `before`).
   */
  async pruneNodes(p: { before: number; remoteBefore?: number }): Promise<number> {
    const { rowCount } = await this.pool.query(S.nodePrune, [
      checkInstant(p.before, 'before'),
      checkInstant(p.remoteBefore ?? p.before, 'remoteBefore'),
    ]);
    return rowCount ?? 0;
  }

  async listNodes(p: {
    tenantId?: string | null;
    limit: number;
    cursor?: string | null;
  }): Promise<Page<NodeInfo>> {
    const limit = checkLimit(p.limit, MAX_NODE_PAGE);
    let after: [string | null, Date | null, string | null] = [null, null, null];
    if (p.cursor) {
      const [role, ms, id] = decodeCursor(p.cursor);
      if (typeof role !== 'string' || typeof ms !== 'number' || typeof id !== 'string')
        throw new ValidationError('cursor is not one this server issued', { field: 'cursor' });
      after = [role, checkInstant(ms, 'cursor'), id];
    }
    const { rows } = await this.pool.query(S.nodeList, [p.tenantId ?? null, limit + 1, ...after]);
    const items: NodeInfo[] = rows.slice(0, limit).map((r) => ({
      nodeId: r.node_id,
      role: r.role,
      tenantId: r.tenant_id,
      startedAt: r.started_at,
      lastSeenAt: r.last_seen_at,
      clockOffsetMs: r.clock_offset_ms,
      clockUncertaintyMs: r.clock_uncertainty_ms,
      info: r.info,
    }));
    const last = items[items.length - 1];
    return {
      items,
      nextCursor:
        rows.length > limit && last ? encodeCursor([last.role, last.startedAt.getTime(), last.nodeId]) : null,
    };
  }

  async listShards(): Promise<ShardInfo[]> {
    const { rows } = await this.pool.query(S.shardList);
    return rows.map((r) => ({
      shardId: r.shard_id,
      owner: r.owner,
      leaseExpiresAt: r.lease_expires_at,
      epoch: Number(r.epoch),
    }));
  }

  /** Jobs due by `now` whose slots are not materialised yet, per shard (of `shards`, or all): the backlog. */
  async dueBacklog(p: { now: number; shards?: readonly number[] }): Promise<Map<number, number>> {
    const shards = p.shards ? [...p.shards] : await this.allShardIds();
    const { rows } = await this.pool.query(S.jobBacklog, [checkInstant(p.now, 'now'), shards]);
    return new Map(rows.map((r) => [r.shard_id as number, r.n as number]));
  }

  async unservedRuns(p: { now: number; tenantId?: string | null; limit: number }): Promise<UnservedRuns> {
    const tenantId =
      p.tenantId === undefined || p.tenantId === null ? null : validateId(p.tenantId, 'tenant_id');
    const { rows } = await this.pool.query(R.runUnserved, [
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
   * The earliest `available_at` after `now` among `pool`'s pending runs (of `tenantId`, when
   * given), or null: when a worker that found nothing to claim should look again.
   */
  async nextAvailableAt(p: {
    pool: string;
    now: number;
    tenantId?: string;
    tenants?: readonly string[];
  }): Promise<Date | null> {
    const { rows } = await this.pool.query(R.runNextAvailable, [
      p.pool,
      checkInstant(p.now, 'now'),
      p.tenantId ?? null,
      tenantFilter(p.tenants),
    ]);
    return (rows[0]?.at as Date | null) ?? null;
  }

  async sampleClock(localNowMs: () => number) {
    const sentMs = localNowMs();
    const { rows } = await this.pool.query(R.clockRead);
    const receivedMs = localNowMs();
    return { sentMs, referenceMs: Number(rows[0].ms), receivedMs };
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
