/**
 * The lease contract: what a worker needs of whoever hands out runs, written once for the three
 * parties that share it. The database (`PostgresStore`) and the HTTP adapter (`HttpLeaseSource`, in
 * the client) implement it; the worker depends on nothing else.
 *
 * The lease model: a claim hands a run to one worker under a fresh token until `leaseExpiresAt`.
 * Every write the worker makes about the run (renew, complete, fail, release) carries that token
 * and lands only while the lease is live; "no row" is an answer (`lost`, `LeaseLostError`), never a
 * partial write. A worker that cannot tell whether it still holds a lease steps down: it aborts the
 * handler and drops the result, because the run may already be another worker's.
 */
import type { RunReport } from './progress.js';

/** A run handed to a worker under a lease. */
export interface ClaimedRun {
  runId: string;
  tenantId: string;
  jobId: string;
  handler: string;
  payload: unknown;
  pool: string;
  scheduledFor: Date;
  attempt: number;
  maxAttempts: number;
  leaseToken: string;
  leaseExpiresAt: Date;
  /** When the run became claimable: start − availableAt is the scheduling delay. */
  availableAt: Date;
  /** Abort the handler after this long (the job's `timeout_seconds`), or null for no limit. */
  timeoutMs: number | null;
  /**
   * When the run was materialised or triggered (absent over HTTP): a run that became available
   * before it existed (a trigger or catch-up slot in the past) was not delayed by scheduling
   * before then (`schedulingDelayMs`).
   */
  createdAt?: Date;
}

export interface LeaseRef {
  runId: string;
  leaseToken: string;
}

/**
 * A lease being renewed, with what its handler reported since the last heartbeat (`ctx.progress`,
 * `ctx.log`): written in the heartbeat's statement, only under the live lease.
 */
export interface HeartbeatLease extends LeaseRef, RunReport {}

/** A lease being ended, with when its handler started (epoch ms; absent or null: never started, or unknown). */
export interface EndedLease extends LeaseRef {
  /** Kept within [the claim, the end] by the store: a worker's clock is trusted no further. */
  startedAt?: number | null;
}

/**
 * A lease being completed, with the tail of what the handler printed or returned, and what it
 * reported (progress, log lines) that no heartbeat carried yet.
 */
export interface Completion extends EndedLease, RunReport {
  output?: string | null;
}

/** A claim: up to `max` claimable runs of `pool`, best `sort_key` first, each under a fresh token. */
export interface ClaimRunsParams {
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
  /**
   * The worker has never sent `claimId` before (not a retry), so no claim can hold it yet: the
   * store skips the lookup of `claimId`'s claim, one round trip per claim. A claim that the same id
   * made meanwhile (the same claim sent twice at once) is still answered, through the claim ids'
   * unique index. Default: false (the lookup is made).
   */
  firstTry?: boolean;
}

export interface HeartbeatRunsParams {
  leases: readonly HeartbeatLease[];
  now: number;
  /** Only this tenant's runs (the API passes the caller's). */
  tenantId?: string;
}

/** The leases renewed (with their new expiries) and the runs whose lease is gone. */
export interface HeartbeatRunsAnswer {
  renewed: { runId: string; leaseExpiresAt: Date }[];
  lost: string[];
}

export interface CompleteRunsParams {
  leases: readonly Completion[];
  now: number;
  /** Only this tenant's runs (the API passes the caller's). */
  tenantId?: string;
}

export interface CompleteRunsAnswer {
  completed: string[];
  lost: string[];
}

/** A failed attempt, with what its handler reported (progress, log lines) that no heartbeat carried yet. */
export interface FailRunParams extends RunReport {
  runId: string;
  leaseToken: string;
  /** The error's message (what run tables show). */
  error: string;
  /** The error's stack, kept on the attempt. Default none. */
  errorStack?: string | null;
  /** When the handler started, epoch ms (kept within [the claim, now]). Default unknown. */
  startedAt?: number | null;
  /** Dead-letter now, whatever attempts are left. Default false. */
  permanent?: boolean;
  /** Retry no sooner than this, ms, instead of the job's backoff. */
  retryAfterMs?: number;
  /** The tail of what the handler printed before it failed. */
  output?: string | null;
  now: number;
  tenantId?: string;
}

/** Where a failed run went: back to the queue (`pending`, from `availableAt`) or dead. */
export interface FailRunAnswer {
  state: 'pending' | 'dead';
  attempt: number;
  availableAt: Date | null;
}

export interface ReleaseRunsParams {
  leases: readonly EndedLease[];
  reason: string;
  now: number;
  tenantId?: string;
}

export interface NextAvailableParams {
  pool: string;
  /**
   * The instant of the claim that found too little: the answer is the first instant after it that
   * something may become claimable, and may be past by now (a limit's window that freed while the
   * answer was asked for): claim again at once.
   */
  now: number;
  tenantId?: string;
  tenants?: readonly string[];
  /** How long before a run's available_at the caller claims it, ms (default 0). */
  aheadMs?: number;
}

export interface TouchNodeParams {
  nodeId: string;
  role: string;
  now: number;
  clock?: { offsetMs: number; uncertaintyMs: number };
  info?: Record<string, unknown>;
}

/** Where a worker's leases come from: the database directly, or a Tock server over HTTP. */
export interface LeaseSource {
  /**
   * The worker this source is bound to, when it is (an HTTP source sends its heartbeats and reports
   * under it): a `Worker` given no id of its own takes this one, and refuses a different one.
   */
  readonly workerId?: string;
  /**
   * True when a claim waits for work where the runs are (an HTTP source's long-poll): an answer
   * with fewer runs than asked, or none after a wait, is no reason to sleep, so the worker claims
   * again at once, and that claim waits in its turn.
   */
  readonly waitsForWork?: boolean;
  /**
   * The most runs one claim of this source can take (a Tock server's claim route takes 500); a
   * worker asks for no more, so an answer of that many is a full one. Default 1000.
   */
  readonly maxClaimRuns?: number;
  /** Leases up to `max` claimable runs, best `sort_key` first, each with a fresh token. */
  claimRuns(p: ClaimRunsParams): Promise<ClaimedRun[]>;
  /** Renews every live lease in one statement; the rest come back as lost. */
  heartbeatRuns(p: HeartbeatRunsParams): Promise<HeartbeatRunsAnswer>;
  /** Marks runs succeeded, each only under its live lease. */
  completeRuns(p: CompleteRunsParams): Promise<CompleteRunsAnswer>;
  /** Records a failed attempt under the live lease (retry or dead); `LeaseLostError` when it is not live. */
  failRun(p: FailRunParams): Promise<FailRunAnswer>;
  /** Gives runs back without spending an attempt (worker shutdown): claimable again at once. */
  releaseRuns(p: ReleaseRunsParams): Promise<{ released: string[] }>;
  /** Wakes an idle worker when runs may have become claimable (NOTIFY on a direct connection). */
  listen?(onWake: () => void): Promise<() => Promise<void>>;
  /**
   * The earliest `available_at` after `now` of the pool's pending runs: a worker that found
   * nothing claimable sleeps until then rather than a whole poll interval (runs are materialised
   * up to a second before their slot and never claimable early).
   */
  nextAvailableAt?(p: NextAvailableParams): Promise<Date | null>;
  /** Registers the worker in `nodes` (for `tock status`) and records that it is alive. */
  touchNode?(p: TouchNodeParams): Promise<void>;
  /** Forgets the node when the worker stops. */
  leaveNode?(p: { nodeId: string }): Promise<unknown>;
}
