/**
 * The store's contract: the only way the scheduler, the worker and the API touch state, and all
 * they need of it. Each operation is one conditional statement or one short transaction; "0 rows"
 * answers come back as values (lost leases, already-scheduled slots) or typed errors, never as
 * partial writes. `PostgresStore` implements it.
 */
import type {
  ClaimRunsParams,
  ClockSample,
  CompleteRunsAnswer,
  CompleteRunsParams,
  DelayBucket,
  DelayWindow,
  FailRunAnswer,
  FailRunParams,
  HeartbeatRunsAnswer,
  HeartbeatRunsParams,
  LeaseRef,
  Limit,
  LimitInput,
  NextAvailableParams,
  ReleaseRunsParams,
  Retention,
  Role,
  RunState,
  TouchNodeParams,
  ValidJob,
} from '../core/index.js';
import type { JobDelay, JobMisfire, JobSuccess, RecentParams } from './delay.js';
import type { NotificationStore } from './notification-store.js';
import type {
  ApiKey,
  BackfillResult,
  ClaimedRun,
  DeadFilter,
  DeadReplay,
  IdempotentAnswer,
  Job,
  JobChange,
  JobFilter,
  LimitGauge,
  NodeInfo,
  Page,
  PruneBatchResult,
  PruneCursor,
  PruneTenantResult,
  ReadyDepth,
  ReapResult,
  Run,
  RunWithAttempts,
  ShardInfo,
  ShardStep,
  TableStats,
  TickResult,
  UnservedRuns,
} from './types.js';

export interface Store extends NotificationStore {
  /**
   * Creates or updates 1 to `MAX_BULK_JOBS` (1000) validated jobs (`validateJob`, `validateJobs`)
   * in one statement, all or nothing: a job id twice, or a one-shot whose instant has passed (unless
   * it re-applies the instant of the job that has it), refuses the batch and nothing is written. A
   * job whose definition did not change is left as it is (`unchanged`); a new schedule or timezone
   * restarts its `next_run_at` from `now`. The changes are in the order of `jobs`.
   */
  upsertJobs<WithJobs extends boolean = false>(p: {
    tenantId: string;
    jobs: readonly ValidJob[];
    now: number;
    /** Also answer each job's row (`changes[i].job`; an unchanged job's costs one more read). Default false. */
    withJobs?: WithJobs;
  }): Promise<{ changes: JobChange<WithJobs>[] }>;
  getJob(p: { tenantId: string; jobId: string }): Promise<Job>;
  listJobs(p: {
    tenantId: string;
    limit: number;
    cursor?: string | null;
    filter?: JobFilter;
  }): Promise<Page<Job>>;
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
  /**
   * An ad-hoc run of a job for `scheduledFor` (default: now), with `payload` in place of the job's
   * when given (checked as a job's payload is, and against the job's `payloadSchema` when it has
   * one: a `ValidationError` naming the failing path). A slot that has a run is a `ConflictError`
   * naming it.
   */
  triggerRun(p: {
    tenantId: string;
    jobId: string;
    scheduledFor?: number;
    payload?: unknown;
    now: number;
  }): Promise<Run>;
  /**
   * The runs of every slot of the job's schedule in `[from, to)` (epoch ms), in one statement, each
   * only where its slot has none; at most `MAX_BACKFILL_SLOTS` slots, else a `ValidationError`
   * naming `to` (as is `from` after `to`), with nothing written.
   */
  backfillRuns(p: {
    tenantId: string;
    jobId: string;
    from: number;
    to: number;
    now: number;
  }): Promise<BackfillResult>;

  /** Leases up to `max` claimable runs of `pool`, best `sort_key` first, each with a fresh token. */
  claimRuns(p: ClaimRunsParams): Promise<ClaimedRun[]>;
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
  heartbeatRuns(p: HeartbeatRunsParams): Promise<HeartbeatRunsAnswer>;
  /** Marks runs succeeded, each only under its live lease. */
  completeRuns(p: CompleteRunsParams): Promise<CompleteRunsAnswer>;
  /** Records a failed attempt under the live lease: retry with backoff, or dead-letter (exhausted or permanent). */
  failRun(p: FailRunParams): Promise<FailRunAnswer>;
  /** Gives runs back without spending an attempt (worker shutdown): claimable again at once. */
  releaseRuns(p: ReleaseRunsParams): Promise<{ released: string[] }>;
  /** Requeues (or dead-letters) the runs of up to `batchSize` claims whose lease expired before `now`. */
  reapExpired(p: { now: number; batchSize: number }): Promise<ReapResult>;

  /**
   * Requeues a dead run with a fresh budget of attempts, numbered on from its last; any other state
   * is a `ConflictError`.
   */
  replayRun(p: { tenantId: string; runId: string; now: number }): Promise<Run>;
  /** How many of the tenant's dead runs match `filter`, counted up to 100,000 (`atLeast`: more). */
  countDeadRuns(p: { tenantId: string; filter: DeadFilter }): Promise<{ count: number; atLeast: boolean }>;
  /**
   * Replays up to `limit` (1-500) of the tenant's dead runs that match `filter`, newest slot first,
   * after `cursor`, each as `replayRun` does; one no longer dead when written is skipped.
   */
  replayDeadRuns(p: {
    tenantId: string;
    filter: DeadFilter;
    limit: number;
    cursor?: string | null;
    now: number;
  }): Promise<DeadReplay>;
  /**
   * Cancels the tenant's pending run: a queued one leaves the queue; a running one is taken off its
   * claim, so its lease is revoked (the worker's next heartbeat reports it lost, and its late result
   * is refused) and the attempt is recorded with outcome `cancelled`. Answers the run, `cancelled`,
   * with its attempts. Succeeded, dead or cancelled already: a `ConflictError` naming the state,
   * nothing written; not the tenant's (or not a uuid): a `NotFoundError`.
   */
  cancelRun(p: { tenantId: string; runId: string; now: number }): Promise<RunWithAttempts>;
  getRun(p: { tenantId: string; runId: string }): Promise<RunWithAttempts>;
  /** Which of `runIds` (at most 1000) are the tenant's runs: the rest are another tenant's, or none. */
  tenantRunIds(p: { tenantId: string; runIds: readonly string[] }): Promise<Set<string>>;
  /**
   * Which runs of `leases` (at most 1000) hold a live lease under their token and are the tenant's,
   * as of `now`: one read, so that a batch of results does not spend a write on each stale one.
   */
  liveRunIds(p: { tenantId: string; leases: readonly LeaseRef[]; now: number }): Promise<Set<string>>;
  /**
   * What holds a queued, due run ("limit payments-api: no token before …", "overlap: run … still
   * running", "max_concurrency 2", "no live worker serves handler x in pool p"), or null.
   */
  waitingFor(p: { tenantId: string; runId: string; now: number }): Promise<string | null>;
  /**
   * `waitingFor` for a page of the tenant's runs (at most 500) in a fixed number of statements: the
   * ids of those that wait, each with what holds it.
   */
  waitingForMany(p: {
    tenantId: string;
    runIds: readonly string[];
    now: number;
  }): Promise<Map<string, string>>;
  /** Newest first by `(scheduled_for, run_id)`. */
  listRuns(p: {
    tenantId: string;
    jobId?: string;
    state?: RunState;
    limit: number;
    cursor?: string | null;
  }): Promise<Page<Run>>;
  countRuns(p: { tenantId?: string }): Promise<Record<RunState, number>>;
  /**
   * Runs per state of every tenant, for the gauges, without reading every run once \`runs\` is
   * large (\`exactBelow\` rows by the planner's estimate, default 100,000): succeeded is then the
   * estimated rows less the others, which are exact (\`estimated\`).
   */
  sampleRunCounts(p?: {
    exactBelow?: number;
  }): Promise<{ counts: Record<RunState, number>; estimated: boolean }>;
  /** Claimable pending runs by pool and priority (all tenants), the deepest first. */
  readyDepth(p: { now: number }): Promise<ReadyDepth[]>;
  /**
   * Claimable runs that no live worker serves (no live worker has their pool, their handler and
   * their tenant), by tenant, pool and handler, longest waiting first: at most `limit` groups, with
   * the totals over all of them. Only `tenantId`'s when given.
   */
  unservedRuns(p: { now: number; tenantId?: string | null; limit: number }): Promise<UnservedRuns>;
  /**
   * Tock's own tables (those its migrations create, in the pool's schema) as the server's statistics
   * see them, by name: tuples live and dead, updates and HOT updates, bytes, last autovacuum. One
   * statement that scans no table.
   */
  tableStats(): Promise<TableStats[]>;
  /** A tenant's delay series from run history: the buckets of `window` with ended runs (`delay.ts`). */
  delaySeries(p: {
    tenantId: string;
    window: DelayWindow;
    pool?: string;
    jobId?: string;
  }): Promise<DelayBucket[]>;
  /** Every tenant's `limit` latest jobs and `limit` with most dead runs in [now − windowMs, now] (`delay.ts`). */
  recentJobDelays(p: RecentParams): Promise<{ jobs: JobDelay[]; seen: number }>;
  /** Every tenant's `limit` jobs with the latest misfire in [now − windowMs, now] (`delay.ts`). */
  recentMisfires(p: RecentParams): Promise<{ jobs: JobMisfire[]; seen: number }>;
  /**
   * Records the jobs' latest successes from their tenants' newest runs of the last `lookbackMs`
   * (default 1 h), then answers the `limit` enabled jobs whose last success is oldest and how many
   * jobs have one (`delay.ts`).
   */
  jobLastSuccesses(p: { now: number; limit: number; lookbackMs?: number }): Promise<{
    jobs: JobSuccess[];
    seen: number;
  }>;
  /** The earliest `available_at` after `now` of a pool's pending runs, or null. */
  nextAvailableAt(p: NextAvailableParams): Promise<Date | null>;

  /**
   * Calls `onWake` whenever runs may have become claimable (the tick materialised some, a trigger,
   * a replay, a release). Holds one connection for LISTEN and re-listens after a connection loss;
   * the returned function stops listening. `onListening` hears each change between listening
   * (true) and not (false: the connection is lost or could not be made, and a retry is pending).
   */
  listen(onWake: () => void, onListening?: (up: boolean) => void): Promise<() => Promise<void>>;

  /** How many shards the job space has (fixed when the database was initialised). */
  countShards(): Promise<number>;
  /**
   * One shard-lease step of scheduler node `nodeId`: it says it is alive, renews the shards it
   * still holds (those whose lease ran out are lost), gives back those above its fair share
   * `ceil(shards / live scheduler nodes)` (highest ids first), and takes unowned or expired
   * shards up to it. A node is live while it was seen within one lease (`leaseMs`, at least 100).
   */
  shardStep(p: {
    nodeId: string;
    now: number;
    leaseMs: number;
    clock?: { offsetMs: number; uncertaintyMs: number };
    info?: Record<string, unknown>;
  }): Promise<ShardStep>;
  /** A node leaving on purpose: gives back every shard it holds and forgets the node. */
  leaveNode(p: { nodeId: string }): Promise<{ released: number[] }>;
  /** Registers a node or records that it is alive, with its clock offset and what it reports. */
  touchNode(p: TouchNodeParams): Promise<void>;
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
  /**
   * Forgets cluster nodes not seen since `before` (their leases ran out long ago) and remote
   * workers not seen since `remoteBefore` (default: `before`); returns how many.
   */
  pruneNodes(p: { before: number; remoteBefore?: number }): Promise<number>;
  listShards(): Promise<ShardInfo[]>;
  /** Jobs due by `now` whose runs are not materialised yet, per shard (of `shards`, or all). */
  dueBacklog(p: { now: number; shards?: readonly number[] }): Promise<Map<number, number>>;

  /**
   * Creates or replaces (PUT: a field not given becomes null) a named limit or the tenant's own
   * (`tenant:<tenant>`; never a job's `job:…`), validated by `validateLimitKey` and `validateLimit`.
   * A new limit starts with `burst` tokens and the slots its gate's holds take; a replaced one
   * keeps its slots in use, its tokens refilled to `now` at the old rate and capped by the new burst.
   */
  putLimit(p: { tenantId: string; key: string; limit: LimitInput; now: number }): Promise<{
    limit: Limit;
    created: boolean;
  }>;
  /**
   * One limit of the tenant, tokens and held runs as of `now` (`NotFoundError` when it has none by
   * that key).
   */
  getLimit(p: { tenantId: string; key: string; now: number }): Promise<LimitGauge>;
  /**
   * The tenant's limits by key, one page (`limit` 1 to 500), each with the runs it holds back at
   * `now` (as `limitGauges` counts them); jobs' own gates are not listed.
   */
  listLimits(p: {
    tenantId: string;
    limit: number;
    cursor?: string | null;
    now: number;
  }): Promise<Page<LimitGauge>>;
  /**
   * Deletes a limit: `NotFoundError` when absent, `ConflictError` naming a job of the tenant that
   * lists it. Runs holding its slots keep them until they end.
   */
  deleteLimit(p: { tenantId: string; key: string }): Promise<void>;
  /**
   * Every limit of every tenant (jobs' gates too), by gate, at most `limit` (to 100000), with the
   * runs each holds back, and how many limits there are in all.
   */
  limitGauges(p: { now: number; limit: number }): Promise<{ limits: LimitGauge[]; total: number }>;

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

  /** The tenant's own retention settings (null: none set: the built-in defaults apply). */
  getTenantRetention(p: { tenantId: string }): Promise<Retention | null>;
  /** Replaces the tenant's retention settings (checked by `checkRetention`); returns them canonical. */
  putTenantRetention(p: { tenantId: string; retention: Retention; now: number }): Promise<Retention>;
  /** The tenant's shortest retention in force (its settings, defaults, its jobs' overrides), ms; null: all forever. */
  shortestRetention(p: { tenantId: string }): Promise<number | null>;
  /** The tenants that have runs, in order, after `after` (null: from the first), at most `limit`. */
  tenantsWithRuns(p: { after: string | null; limit: number }): Promise<string[]>;
  /**
   * One batch of a tenant's pruning: looks at up to `limit` runs scheduled before `horizon` from
   * `after` on, and deletes (with `dryRun`: counts) those finished longer than their retention
   * before `now`, with their attempts and reports. Never a pending or running run.
   */
  pruneBatch(p: {
    tenantId: string;
    now: number;
    horizon: number;
    after: PruneCursor | null;
    limit: number;
    dryRun: boolean;
    /** Report a kept run that expires within this many ms (\`soon\`, \`settled\`). Default 0. */
    soonMs?: number;
  }): Promise<PruneBatchResult>;
  /**
   * Prunes the tenant as the pruner does, up to `batches` batches of `limit` runs looked at, from
   * `cursor` (null: the start); with `dryRun`, counts instead. A forged cursor is a `ValidationError`.
   */
  pruneTenant(p: {
    tenantId: string;
    now: number;
    cursor: string | null;
    dryRun: boolean;
    batches: number;
    limit: number;
  }): Promise<PruneTenantResult>;
  /** Takes or renews the named maintenance lease for `owner` until now + `leaseMs`; whether it holds it. */
  takeMaintenanceLease(p: { name: string; owner: string; now: number; leaseMs: number }): Promise<boolean>;
  /** Gives the named lease back if `owner` holds it. */
  releaseMaintenanceLease(p: { name: string; owner: string }): Promise<void>;

  /** One round trip reading the database's clock, timed by `localNowMs`. */
  sampleClock(localNowMs: () => number): Promise<ClockSample>;
  /** Ends the pool the store was given. */
  close(): Promise<void>;
}
