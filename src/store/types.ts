/**
 * The store's contract: the only way the scheduler, the worker and the API touch state. Each
 * operation is one conditional statement or one short transaction; "0 rows" answers come back as
 * values (lost leases, already-scheduled slots) or typed errors, never as partial writes.
 */
import type {
  AttemptOutcome,
  ClaimedRun,
  ClockSample,
  Completion,
  EndedLease,
  JobInput,
  LeaseRef,
  MisfirePolicy,
  Role,
  RunState,
} from '../core/index.js';

// The lease types live in core (core/lease.ts), shared with the HTTP adapter and the worker.
export type { ClaimedRun, Completion, EndedLease, LeaseRef } from '../core/index.js';

export interface Job {
  tenantId: string;
  jobId: string;
  handler: string;
  payload: unknown;
  schedule: string;
  timezone: string;
  priority: number;
  maxAttempts: number;
  backoffBaseSeconds: number;
  backoffCapSeconds: number;
  misfire: MisfirePolicy;
  catchUpLimit: number;
  pool: string;
  leaseSeconds: number | null;
  jitterSeconds: number;
  timeoutSeconds: number | null;
  /** The job's own misfire threshold in seconds; `null`: the scheduler's. */
  misfireThresholdSeconds: number | null;
  /** The threshold that applies: the job's, else the store's `misfireThresholdMs` (in seconds). */
  misfireAfterSeconds: number;
  enabled: boolean;
  shardId: number;
  /** The earliest slot not yet materialised; `null` once a one-shot job has fired. */
  nextRunAt: Date | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** Claimable runs no live worker serves (`Store.unservedRuns`). */
export interface UnservedRuns {
  /** Such runs in all. */
  runs: number;
  /** (tenant, pool, handler) groups in all; `items` holds the first `limit`. */
  groups: number;
  items: { tenantId: string; pool: string; handler: string; runs: number; since: Date }[];
}

export interface Run {
  runId: string;
  tenantId: string;
  jobId: string;
  scheduledFor: Date;
  state: RunState;
  attempt: number;
  maxAttempts: number;
  handler: string;
  payload: unknown;
  pool: string;
  priority: number;
  availableAt: Date;
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  /** The last failed attempt's error message (its stack is on the attempt). */
  lastError: string | null;
  createdAt: Date;
  /**
   * When the handler of the last ended attempt started, as its worker reported it (kept within
   * the claim and the attempt's end); running: the later of the claim and `availableAt`; an attempt
   * that reported no start (reaped): the later of its claim and `availableAt` too. Never before the
   * slot a worker claimed ahead of.
   */
  startedAt: Date | null;
  /** When the attempt `startedAt` belongs to was claimed (up to the claim-ahead before its slot). */
  claimedAt: Date | null;
  finishedAt: Date | null;
}

export interface Attempt {
  /** Numbered from 1, and on across replays (a replayed run's next attempt is its last + 1). */
  attempt: number;
  workerId: string;
  /** When the handler started (see `Run.startedAt`). */
  startedAt: Date;
  /** When the attempt was claimed; null on rows written before migration 0011. */
  claimedAt: Date | null;
  finishedAt: Date | null;
  outcome: AttemptOutcome | null;
  /** The error's message. */
  error: string | null;
  /** The error's stack, when the handler threw an `Error` (null for a lease expiry or release). */
  errorStack: string | null;
  /** The last 64 KiB of what the handler printed or returned. */
  output: string | null;
}

export interface RunWithAttempts extends Run {
  attempts: Attempt[];
}

export interface RunRef {
  runId: string;
  tenantId: string;
  jobId: string;
  scheduledFor: Date;
}

export interface Page<T> {
  items: T[];
  /** Opaque; `null` on the last page. */
  nextCursor: string | null;
}

export type UpsertChange = 'created' | 'updated' | 'unchanged';

export interface TickResult {
  /** Due jobs this tick locked and planned. */
  jobs: number;
  /** Runs this tick inserted (slots another scheduler already inserted are not counted). */
  created: RunRef[];
  /** Slots that the misfire policy dropped, where countable. */
  dropped: number;
  /** Jobs whose stored schedule could no longer be evaluated: their next_run_at is now null. */
  parked: { tenantId: string; jobId: string; reason: string }[];
  /** True when the batch was full: more jobs may be due, tick again at once. */
  full: boolean;
  /** Shards of the fence this node no longer held (owner, epoch or lease changed): not ticked. */
  fencedOut: number[];
}

/** A shard a scheduler node holds: ticks for it must present this epoch. */
export interface ShardLease {
  shardId: number;
  epoch: number;
  expiresAt: Date;
}

/** What one shard-lease step of a scheduler node found and did. */
export interface ShardStep {
  /** Shards held after the step, by id. */
  owned: ShardLease[];
  /** Shards this step gave back (above the fair share) and took. */
  released: number[];
  taken: number[];
  /** Live scheduler nodes (this one included), and the fair share `ceil(shards / live)`. */
  liveNodes: number;
  fairShare: number;
  shardCount: number;
  /** Earliest expiry of a shard another node holds (when one may become free), or null. */
  nextForeignExpiry: Date | null;
}

/** A node as `tock status` shows it. */
export interface NodeInfo {
  nodeId: string;
  role: string;
  /** A remote worker's tenant; null for a cluster node (a scheduler, or a worker on the database). */
  tenantId: string | null;
  startedAt: Date;
  lastSeenAt: Date;
  clockOffsetMs: number | null;
  clockUncertaintyMs: number | null;
  info: Record<string, unknown>;
}

export interface ShardInfo {
  shardId: number;
  owner: string | null;
  leaseExpiresAt: Date | null;
  epoch: number;
}

export interface ReapResult {
  requeued: (RunRef & { attempt: number })[];
  dead: RunRef[];
}

export interface ApiKey {
  keyId: string;
  tenantId: string;
  role: Role;
  name: string;
  createdAt: Date;
  revokedAt: Date | null;
}

/** A remembered answer to a request made with an Idempotency-Key. */
export interface IdempotentAnswer {
  requestHash: string;
  status: number;
  body: unknown;
}

export interface Store {
  upsertJob(p: { tenantId: string; job: JobInput; now: number }): Promise<{ job: Job; change: UpsertChange }>;
  /** Up to 1000 jobs in one statement; one bad job refuses the whole batch, nothing written. */
  upsertJobs(p: {
    tenantId: string;
    jobs: readonly JobInput[];
    now: number;
  }): Promise<{ changes: { jobId: string; change: UpsertChange }[] }>;
  getJob(p: { tenantId: string; jobId: string }): Promise<Job>;
  listJobs(p: { tenantId: string; limit: number; cursor?: string | null }): Promise<Page<Job>>;
  pauseJob(p: { tenantId: string; jobId: string; now: number }): Promise<Job>;
  resumeJob(p: { tenantId: string; jobId: string; now: number }): Promise<Job>;
  /** Deletes the job and cancels its pending runs; history stays. */
  deleteJob(p: { tenantId: string; jobId: string; now: number }): Promise<{ cancelledRuns: number }>;

  /** Materialises due slots of up to `batchSize` jobs (in `shards`, or all) and advances `next_run_at`. */
  tick(p: {
    now: number;
    lookaheadMs: number;
    batchSize: number;
    shards?: readonly number[];
    /** Tick only the shards `nodeId` still holds at these epochs, locked against takeover until commit. */
    fence?: { nodeId: string; shards: readonly { shardId: number; epoch: number }[] };
  }): Promise<TickResult>;
  /** An ad-hoc run of a job for `scheduledFor` (default: now). A slot that has a run is a `ConflictError` naming it. */
  triggerRun(p: { tenantId: string; jobId: string; scheduledFor?: number; now: number }): Promise<Run>;

  /** Leases up to `max` claimable runs of `pool`, best `sort_key` first, each with a fresh token. */
  claimRuns(p: {
    workerId: string;
    pool: string;
    max: number;
    now: number;
    handlers?: readonly string[];
    tenantId?: string;
    /**
     * Only runs of these tenants (1 to MAX_CLAIM_TENANTS ids): a worker on the database restricted
     * with `--tenant`. Default: every tenant's (or `tenantId`'s alone, when that is given).
     */
    tenants?: readonly string[];
    /**
     * Also claim runs that become claimable within this many ms (0 to 10,000; default 0), for a
     * worker that starts each at its `availableAt`: the claim's round trip is then off the start.
     */
    aheadMs?: number;
    /** Aborts a waiting claim (a long-poll over HTTP) when the worker stops. */
    signal?: AbortSignal;
    /**
     * Makes the claim retry-safe: a uuid the worker makes per claim and sends again when it retries
     * that claim. When it names a live claim of this worker and tenant, that claim's runs and leases
     * (same tokens) are the answer and nothing more is claimed. Default: none (every call claims).
     */
    claimId?: string;
  }): Promise<ClaimedRun[]>;
  /**
   * Gives back, without spending an attempt, the runs of the live claims `claimId` names, unless a
   * retry of that claim was answered with them (its worker holds them): for a server whose client
   * went away before it could answer the claim.
   */
  releaseClaim(p: {
    claimId: string;
    workerId: string;
    now: number;
    reason: string;
    tenantId?: string;
  }): Promise<{ released: string[] }>;
  /** Renews every live lease in one statement; the rest come back as lost. */
  heartbeatRuns(p: {
    leases: readonly LeaseRef[];
    now: number;
    /** Only this tenant's runs (the API passes the caller's). */
    tenantId?: string;
  }): Promise<{ renewed: { runId: string; leaseExpiresAt: Date }[]; lost: string[] }>;
  /** Marks runs succeeded, each only under its live lease. */
  completeRuns(p: {
    leases: readonly Completion[];
    now: number;
    /** Only this tenant's runs (the API passes the caller's). */
    tenantId?: string;
    /** Also answer the completed runs' tenants and jobs (`jobs`). Default false. */
    withJobs?: boolean;
  }): Promise<{
    completed: string[];
    lost: string[];
    /** With `withJobs`: each completed run's tenant and job. */
    jobs?: { runId: string; tenantId: string; jobId: string }[];
  }>;
  /** Records a failed attempt under the live lease: retry with backoff, or dead-letter (exhausted or permanent). */
  failRun(p: {
    runId: string;
    leaseToken: string;
    /** The error's message (what run tables show). */
    error: string;
    /** The error's stack, kept on the attempt. Default none. */
    errorStack?: string | null;
    /** When the handler started, epoch ms (kept within [the claim, now]). Default unknown. */
    startedAt?: number | null;
    permanent?: boolean;
    retryAfterMs?: number;
    /** The tail of what the handler printed before it failed. */
    output?: string | null;
    now: number;
    tenantId?: string;
  }): Promise<{ state: 'pending' | 'dead'; attempt: number; availableAt: Date | null }>;
  /** Gives runs back without spending an attempt (worker shutdown): claimable again at once. */
  releaseRuns(p: {
    leases: readonly EndedLease[];
    reason: string;
    now: number;
    tenantId?: string;
  }): Promise<{ released: string[] }>;
  /** Requeues (or dead-letters) the runs of up to `batchSize` claims whose lease expired before `now`. */
  reapExpired(p: { now: number; batchSize: number }): Promise<ReapResult>;

  /**
   * Requeues a dead run with a fresh budget of attempts, numbered on from its last; any other state
   * is a `ConflictError`.
   */
  replayRun(p: { tenantId: string; runId: string; now: number }): Promise<Run>;
  getRun(p: { tenantId: string; runId: string }): Promise<RunWithAttempts>;
  /** Newest first by `(scheduled_for, run_id)`. */
  listRuns(p: {
    tenantId: string;
    jobId?: string;
    state?: RunState;
    limit: number;
    cursor?: string | null;
  }): Promise<Page<Run>>;
  countRuns(p: { tenantId?: string }): Promise<Record<RunState, number>>;
  /** Claimable pending runs by priority (all tenants). */
  readyDepth(p: { now: number }): Promise<Map<number, number>>;
  /**
   * Claimable runs that no live worker serves (no live worker has their pool, their handler and
   * their tenant), by tenant, pool and handler, longest waiting first: at most `limit` groups, with
   * the totals over all of them. Only `tenantId`'s when given.
   */
  unservedRuns(p: { now: number; tenantId?: string | null; limit: number }): Promise<UnservedRuns>;
  /** The earliest `available_at` after `now` of a pool's pending runs, or null. */
  nextAvailableAt(p: {
    pool: string;
    now: number;
    tenantId?: string;
    tenants?: readonly string[];
  }): Promise<Date | null>;

  /** Registers a node or records that it is alive, with its clock offset and what it reports. */
  touchNode(p: {
    nodeId: string;
    role: string;
    now: number;
    clock?: { offsetMs: number; uncertaintyMs: number };
    info?: Record<string, unknown>;
  }): Promise<void>;
  /**
   * A remote worker of `tenantId` says it is alive: row `<tenant>/<workerId>`, at most `cap` per
   * tenant (the least recently seen give way); it never writes a cluster node's or another tenant's row.
   */
  touchRemoteWorker(p: {
    tenantId: string;
    workerId: string;
    now: number;
    info?: Record<string, unknown>;
    /** The offset of the server's clock from the worker's, as the worker measured it; kept when unset. */
    clock?: { offsetMs: number; uncertaintyMs: number };
    cap: number;
  }): Promise<{ nodeId: string; touched: boolean; evicted: number }>;
  /** A remote worker of `tenantId` leaving on purpose (a clean stop): its row goes. */
  leaveRemoteWorker(p: { tenantId: string; workerId: string }): Promise<{ left: boolean }>;
  /**
   * Nodes (schedulers and workers) with what they last reported, by role then newest first, one
   * page (`limit` 1 to 500). `tenantId`: only that tenant's remote workers; absent or null: all.
   */
  listNodes(p: { tenantId?: string | null; limit: number; cursor?: string | null }): Promise<Page<NodeInfo>>;
  listShards(): Promise<ShardInfo[]>;
  /** Jobs due by `now` whose runs are not materialised yet, per shard (of `shards`, or all). */
  dueBacklog(p: { now: number; shards?: readonly number[] }): Promise<Map<number, number>>;

  /** Creates a key; the secret is returned once and only its hash is stored. */
  createApiKey(p: {
    tenantId: string;
    role: Role;
    name?: string;
    now: number;
  }): Promise<{ key: ApiKey; secret: string }>;
  /** The live key with this secret, or null (unknown, forged or revoked). */
  authenticate(secret: string): Promise<ApiKey | null>;
  listApiKeys(p: { tenantId: string }): Promise<ApiKey[]>;
  /**
   * Revokes one of the tenant's keys (`NotFoundError` if it has none by that id). `by`: the caller's
   * role, or `database` (an operator on the database). A cluster-admin key can only be revoked by a
   * role with the `cluster` permission or the database: otherwise a `forbidden` `TockError`, and
   * nothing changes.
   */
  revokeApiKey(p: { tenantId: string; keyId: string; now: number; by: Role | 'database' }): Promise<ApiKey>;
  /** Whether any live key exists. */
  hasApiKeys(): Promise<boolean>;

  /**
   * Takes an Idempotency-Key for a request (by its body hash). `taken`: go ahead, then `finishIdempotent`
   * (or `releaseIdempotent` on an unexpected failure). `done`: the remembered answer (its `requestHash`
   * may differ: a mismatch). `in_progress`: the same key is being served right now.
   */
  takeIdempotent(p: {
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
  >;
  finishIdempotent(p: {
    tenantId: string;
    scope: string;
    key: string;
    answer: IdempotentAnswer;
  }): Promise<void>;
  releaseIdempotent(p: { tenantId: string; scope: string; key: string }): Promise<void>;
  /** Deletes up to `batchSize` answers older than `ttlMs`; returns how many. */
  pruneIdempotency(p: { now: number; ttlMs: number; batchSize: number }): Promise<number>;

  /** One round trip reading the database's clock, timed by `localNowMs`. */
  sampleClock(localNowMs: () => number): Promise<ClockSample>;
  close(): Promise<void>;
}
