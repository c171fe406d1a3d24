/**
 * What the table modules share: the connection type they run on, and the mapping of rows to the
 * store's camelCase types. node-postgres hands back untyped rows; they are typed here and nowhere
 * else.
 */
import type pg from 'pg';
import type { ApiKey, Attempt, Job, NodeInfo, Run, RunRef, ShardInfo, ShardLease } from './types.js';

/** A pool or one checked-out client (inside a transaction): what every table function runs on. */
export type Queryable = pg.Pool | pg.PoolClient;

// biome-ignore lint/suspicious/noExplicitAny: pg rows are untyped until mapped here
export type Row = Record<string, any>;

/** A `jobs` row, with the misfire threshold that applies when the job sets none (seconds). */
export function toJob(r: Row, misfireDefaultSeconds: number): Job {
  return {
    tenantId: r.tenant_id,
    jobId: r.job_id,
    handler: r.handler,
    payload: r.payload,
    payloadSchema: r.payload_schema,
    retention: r.retention ?? null,
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
    overlap: r.overlap,
    maxConcurrency: r.max_concurrency,
    limits: r.limits,
    enabled: r.enabled,
    shardId: r.shard_id,
    nextRunAt: r.next_run_at,
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** A `run_states` row (RUN_COLUMNS). */
export function toRun(r: Row): Run {
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

export function toRef(r: Row): RunRef {
  return { runId: r.run_id, tenantId: r.tenant_id, jobId: r.job_id, scheduledFor: r.scheduled_for };
}

export function toAttempt(a: Row): Attempt {
  return {
    attempt: a.attempt,
    workerId: a.worker_id,
    startedAt: a.started_at,
    claimedAt: a.claimed_at,
    finishedAt: a.finished_at,
    outcome: a.outcome,
    error: a.error,
    errorStack: a.error_stack,
    output: a.output,
    progress: a.progress ?? null,
    progressMessage: a.progress_message ?? null,
    logs: a.logs ?? [],
    // bigint, read as text.
    logsDropped: Number(a.logs_dropped ?? 0),
    reportedAt: a.reported_at ?? null,
  };
}

export function toApiKey(r: Row): ApiKey {
  return {
    keyId: r.key_id,
    tenantId: r.tenant_id,
    role: r.role,
    name: r.name,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}

export function toNode(r: Row): NodeInfo {
  return {
    nodeId: r.node_id,
    role: r.role,
    tenantId: r.tenant_id,
    startedAt: r.started_at,
    lastSeenAt: r.last_seen_at,
    clockOffsetMs: r.clock_offset_ms,
    clockUncertaintyMs: r.clock_uncertainty_ms,
    info: r.info,
  };
}

export function toShard(r: Row): ShardInfo {
  return { shardId: r.shard_id, owner: r.owner, leaseExpiresAt: r.lease_expires_at, epoch: Number(r.epoch) };
}

/** A shard lease row (`epoch` is a bigint, read as text). */
export function toShardLease(r: Row): ShardLease {
  return { shardId: r.shard_id, epoch: Number(r.epoch), expiresAt: r.lease_expires_at };
}
