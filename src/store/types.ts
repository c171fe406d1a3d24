/** The shapes the store's contract (`Store`, in `store.ts`) reads and answers, in camelCase. */
import type {
  AttemptOutcome,
  DeliveryState,
  Limit,
  MisfirePolicy,
  NotificationEvent,
  OverlapPolicy,
  Retention,
  RetentionState,
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
  /** JSON Schema every payload of the job must match; `null`: any. */
  payloadSchema: unknown;
  /** Retention by state overriding the tenant's (canonical), or null. */
  retention: Retention | null;
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
  overlap: OverlapPolicy;
  maxConcurrency: number | null;
  limits: string[];
  enabled: boolean;
  shardId: number;
  /** The earliest slot not yet materialised; `null` once a one-shot job has fired. */
  nextRunAt: Date | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * One of Tock's tables as the server's statistics see it (`Store.tableStats`). The counters are the
 * server's estimates, kept since its statistics were last reset (a crash resets them).
 */
export interface TableStats {
  /** The table's name, without its schema. */
  table: string;
  /** Live rows (`n_live_tup`). */
  liveTuples: number;
  /** Dead row versions a vacuum has not reclaimed yet (`n_dead_tup`). */
  deadTuples: number;
  /** Rows updated (`n_tup_upd`). */
  updates: number;
  /** Of `updates`, those that were HOT: the new version on the same page, no index written (`n_tup_hot_upd`). */
  hotUpdates: number;
  /** The table with its indexes and TOAST, bytes (`pg_total_relation_size`). */
  bytes: number;
  /** When the autovacuum last vacuumed it; null when it has not since the reset. */
  lastAutovacuumAt: Date | null;
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
  /** The handler's latest progress (`ctx.progress`), or null: none reported. */
  progress: number | null;
  /** That progress report's message (at most `PROGRESS_MESSAGE_MAX_CHARS`), or null. */
  progressMessage: string | null;
  /** The attempt's last `LOG_LINES_MAX` log lines (`ctx.log`), oldest first. */
  logs: string[];
  /** Log lines dropped, oldest first, to keep the last `LOG_LINES_MAX`. */
  logsDropped: number;
  /** When progress or log lines were last written; null: none reported. */
  reportedAt: Date | null;
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

/** Claimable runs of one queue (a pool) and priority class. */
export interface ReadyDepth {
  pool: string;
  priority: number;
  ready: number;
}

/** Which dead runs a bulk count or replay takes (every field optional; all given must hold). */
export interface DeadFilter {
  jobId?: string;
  /** Text the run's last error holds, in any case, taken literally (no wildcards). */
  errorContains?: string;
  /** First slot, included (epoch ms). */
  slotFrom?: number;
  /** End of the slots, excluded (epoch ms). */
  slotTo?: number;
}

/** What one bulk replay call did. */
export interface DeadReplay {
  /** Dead runs the call found (at most its limit). */
  matched: number;
  /** The runs it replayed (pending again). */
  replayed: string[];
  /** Found, but no longer dead when written (replayed or pruned meanwhile): left alone. */
  skipped: number;
  /** Where the next call goes on; null: no matching dead run after this batch. */
  nextCursor: string | null;
}

/** What a job list keeps (every field optional; all given must hold). */
export interface JobFilter {
  /** Jobs whose id starts with this text, taken literally (no wildcards). */
  idPrefix?: string;
  /** `active` (slots to come), `paused`, or `finished` (no slot left). */
  state?: 'active' | 'paused' | 'finished';
  pool?: string;
  handler?: string;
}

/**
 * A limit at an instant (the gauges' sample, or a read of `GET /v1/limits`), and the runs it holds
 * back then.
 */
export interface LimitGauge extends Limit {
  /**
   * Queued runs available by then that pass the limit's gate, while it is exhausted (less than a
   * whole token, or every slot in use); 0 while it is not.
   */
  heldRuns: number;
  /** The count read its tenant's `HELD_SCAN` longest-due runs and stopped: `heldRuns` counts among those. */
  heldCapped: boolean;
}

/** What an upsert did to one job; with `withJobs`, also the job's row after it (`job`). */
export type JobChange<WithJobs extends boolean = false> = {
  jobId: string;
  change: UpsertChange;
} & (WithJobs extends true ? { job: Job } : { job?: Job });

/** What a range backfill did (`Store.backfillRuns`). */
export interface BackfillResult {
  /** Runs created: slots of the range that had none. */
  created: number;
  /** Slots of the range that already had a run (in any state), left as they were. */
  existing: number;
  /** The range's first slot; null when it holds none. */
  firstSlot: Date | null;
  /** The range's last slot; null when it holds none. */
  lastSlot: Date | null;
}

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

/** Where a tenant's pruning got to: the last (slot, run) looked at. */
export interface PruneCursor {
  slot: Date;
  runId: string;
}

export interface PruneBatchResult {
  /** Runs looked at: fewer than the batch's limit means the tenant's pass reached its horizon. */
  scanned: number;
  /** Where the next batch starts; null when this one reached the horizon. */
  next: PruneCursor | null;
  /** The last run looked at (null: none). */
  last: PruneCursor | null;
  /**
   * This batch kept a run that expires within \`soonMs\` (it ended well after its slot): a later pass
   * should start before it, after \`settled\`, the last run before it (null: before this batch).
   */
  soon: boolean;
  settled: PruneCursor | null;
  /** Runs deleted (or, dry, that would be), by state. */
  byState: Partial<Record<RetentionState, number>>;
}

/** What `pruneTenant` did: runs deleted (dry: that would be) by state, and where to go on from. */
export interface PruneTenantResult {
  byState: Record<RetentionState, number>;
  scanned: number;
  /** The runs looked at were those scheduled before this instant; null: the tenant keeps every run forever. */
  horizon: Date | null;
  /** Give it back to go on; null: the tenant's runs have all been looked at. */
  cursor: string | null;
}

/** A delivery the notifier claimed: what to send, where, and the attempt it is. */
export interface DueDelivery {
  deliveryId: string;
  tenantId: string;
  name: string;
  event: NotificationEvent;
  data: Record<string, unknown>;
  createdAt: Date;
  /** This attempt's number, from 1. */
  attempt: number;
  url: string;
  /** Signs the delivery; null: unsigned. */
  secret: string | null;
}

/** A notification: its tenant and name. */
export interface NotificationKey {
  tenantId: string;
  name: string;
}

/**
 * A claim of due deliveries, fair between notifications and tenants: the notifications with
 * pending deliveries are walked in (tenant, name) order from after `after` (null: the first), at
 * most `walk` of them; each due one gives its oldest due deliveries, at most `perNotification`
 * less those of it in flight (`busy`), a tenant at most `perTenant` less its own in flight; the
 * first of every notification come before the second of any, and so on, up to `limit`.
 */
export interface DeliveryClaim {
  now: number;
  limit: number;
  leaseMs: number;
  /** Where the walk starts (after this notification); null or absent: from the first. */
  after?: NotificationKey | null;
  /** Most notifications the walk looks at. Default 1000. */
  walk?: number;
  /** Most deliveries of one notification in flight at once. Default: no cap but `limit`. */
  perNotification?: number;
  /** Most deliveries of one tenant in flight at once. Default: no cap but `limit`. */
  perTenant?: number;
  /** Deliveries in flight on this node, per notification. */
  busy?: readonly (NotificationKey & { count: number })[];
}

/** An attempt's outcome, as the notifier records it (`finishDelivery`). */
export interface DeliveryOutcome {
  deliveryId: string;
  /** The attempt it is the outcome of: recorded only while the delivery is still at it. */
  attempt: number;
  state: DeliveryState;
  status: number | null;
  error: string | null;
  nextAttemptAt: number | null;
  now: number;
}
