/**
 * The in-process worker: claims runs of its pool in batches up to its free capacity, runs the
 * named handler for each, renews every lease it holds in one batched heartbeat, and reports each
 * result under the run's lease token. The lease model: a run is ours only while its lease is live;
 * when a heartbeat says a lease is lost (or we could not renew it before it expired), the handler's
 * `signal` is aborted and its result is dropped, because the run may already belong to another
 * worker. Graceful stop: stop claiming, let handlers finish within a grace period, then abort the
 * rest and release their leases so another worker can take them at once.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import {
  type Clock,
  LeaseLostError,
  Periodic,
  RetryLaterError,
  resultText,
  validateId,
} from '../core/index.js';
import type { ClaimedRun, Store } from '../store/index.js';
import { Completer, type ResultOutcome } from './completer.js';
import { FailureLog } from './failure-log.js';

/** What a worker needs of a store: the lease operations. `PostgresStore` and `HttpLeaseStore` both are one. */
export type LeaseStore = Pick<
  Store,
  'claimRuns' | 'heartbeatRuns' | 'completeRuns' | 'failRun' | 'releaseRuns'
> & {
  /** Wakes an idle worker when runs may have become claimable (NOTIFY on a direct connection). */
  listen?(onWake: () => void): Promise<() => Promise<void>>;
  /**
   * The earliest `available_at` after `now` of the pool's pending runs: a worker that found
   * nothing claimable sleeps until then rather than a whole poll interval (runs are materialised
   * up to a second before their slot and never claimable early).
   */
  nextAvailableAt?(p: {
    pool: string;
    now: number;
    tenantId?: string;
    tenants?: readonly string[];
  }): Promise<Date | null>;
  /** Registers the worker in `nodes` (for `tock status`) and records that it is alive. */
  touchNode?(p: {
    nodeId: string;
    role: string;
    now: number;
    clock?: { offsetMs: number; uncertaintyMs: number };
    info?: Record<string, unknown>;
  }): Promise<void>;
  /** Forgets the node when the worker stops. */
  leaveNode?(p: { nodeId: string }): Promise<unknown>;
};

/** What a handler receives: the run's identity (key idempotent writes by `jobId` + `scheduledFor`). */
export interface RunContext {
  runId: string;
  tenantId: string;
  jobId: string;
  /** The slot this run is for: its identity and its logical date. */
  scheduledFor: Date;
  /** 1 on the first try; grows with each retry. */
  attempt: number;
  payload: unknown;
  /** Aborted when the lease is lost or the worker shuts down: stop work, the result will be dropped. */
  signal: AbortSignal;
  logger: Logger;
  /**
   * Renews this worker's leases now (one statement for all of them) before a known-long step;
   * resolves to this run's new expiry. Rejects with `LeaseLostError` when the lease is gone.
   */
  extendLease(): Promise<Date>;
}

/**
 * Resolve to succeed; a returned string, or `{ output: string }`, is kept (its last 64 KiB) on the
 * attempt. Throw `PermanentError` to dead-letter at once, `RetryLaterError` to retry no sooner than
 * its delay; any other error retries after the job's backoff. An error's `output` property, if it
 * is a string, is kept on the attempt too.
 *
 * Output and error text are sanitised, not refused: U+0000 and unpaired UTF-16 surrogates, which
 * PostgreSQL cannot store, are kept as U+FFFD, so a result is never lost over its bytes. Return
 * binary data encoded (base64) if it must survive exactly.
 */

export type Handler = (ctx: RunContext) => unknown | Promise<unknown>;

export interface WorkerOptions {
  /** Where leases come from: a `PostgresStore` (direct) or an `HttpLeaseStore` (a Tock server). */
  store: LeaseStore;
  clock: Clock;
  logger: Logger;
  /** Handlers by name; the worker claims only runs whose handler it has. */
  handlers: Record<string, Handler>;
  /** Pool to claim from. Default `default`. */
  pool?: string;
  /** Most runs executing at once. Default 10. */
  concurrency?: number;
  /** Unique per process start. Default `worker-<random>`. */
  workerId?: string;
  /** Wait between claims when nothing is ready, ms. Default 1000. */
  pollIntervalMs?: number;
  /**
   * How often the worker checks its leases, ms. Default 1000. All held leases are renewed in one
   * statement once any of them is a third of the way through its length (10 s of a 30 s lease).
   */
  heartbeatCheckMs?: number;
  /** Claim only this tenant's runs. Default: every tenant's. */
  tenantId?: string;
  /**
   * Claim only the runs of these tenants (1–1000 ids; a worker on the database, `tock worker
   * --tenant`). Reported in the node list. Default: every tenant's.
   */
  tenants?: readonly string[];
  /**
   * Runs to hold claimed beyond `concurrency`, waiting for a free slot (0–1000; default 0). The next
   * batch is then in hand when slots free, so claims overlap with running. Held runs are leased like
   * running ones (renewed by the heartbeat), released at once by a graceful stop, and, if the
   * process dies, retried once their leases expire, which spends an attempt.
   */
  prefetch?: number;
  /**
   * Claim runs up to this many ms before they become claimable and start each at its `availableAt`
   * (0–10000; default 250). Runs are materialised ahead of their slot, so a run then starts on its
   * slot instead of one claim's round trip after it. A held run counts against `concurrency`.
   */
  claimAheadMs?: number;
  /** This worker's clock offset from the database's, reported to `tock status`. */
  clockState?: () => { offsetMs: number; uncertaintyMs: number };
  /**
   * How long a result the store could not be reached to record is retried, ms, counted from its
   * first failed write. Default: the length of the lease the run was claimed with. After it the
   * result is given up and the run retries once its lease lapses. A result the store refuses as
   * data is never retried: the run is failed instead (docs/architecture.md).
   */
  resultRetryMs?: number;
}

/** The abort reason of a timeout timer whose run finished first. */
const FINISHED = Symbol('finished');

/** The least time a stopping worker gives the results in hand to be recorded, ms (beyond the grace period's end). */
const STOP_FLUSH_MS = 5000;

/**
 * At most this many handler names are reported in the node list (a worker with more is listed as
 * running any handler: `handlers` is left out, never cut short, so nothing it runs looks unserved).
 */
const MAX_REPORTED_HANDLERS = 100;

/** How often a worker tells the database it is alive (where the store can record it), ms. */
const NODE_TOUCH_MS = 5000;

/**
 * The least lease a held run must have left for its handler to start, ms (a quarter of the lease,
 * if that is less). A claim's answer can arrive late (a database or server stalled after claiming):
 * a run whose lease has expired, or is about to, may already be the reaper's and another worker's,
 * so starting it would run it twice. It is released instead (no attempt spent), or, if its lease is
 * gone, dropped.
 */
export const START_MARGIN_MS = 1000;

/** Why a held run was not started: its lease had expired, or was about to, when its turn came. */
export const LEASE_TOO_SHORT = 'lease expired or about to expire before the run started';

export interface WorkerEvents {
  'run:started': [run: ClaimedRun];
  'run:succeeded': [run: ClaimedRun];
  'run:failed': [run: ClaimedRun, result: { state: 'pending' | 'dead'; error: string }];
  /** The lease was lost or the worker shut down: the handler's result was not recorded. */
  'run:dropped': [run: ClaimedRun, reason: string];
  'lease:lost': [runId: string];
  error: [err: unknown];
}

interface Active {
  run: ClaimedRun;
  /** Made when the handler first reads `signal`, or when the run is aborted first (most never are). */
  controller: AbortController | null;
  leaseExpiresAt: number;
  /** Length of this run's lease, ms, and when it was last renewed. */
  leaseMs: number;
  renewedAt: number;
  /** Set once the run is no longer ours: its result must not be written. */
  dropped: string | null;
  /** The handler has returned: its result is being recorded, so shutdown must not release it. */
  finishing: boolean;
  /** Its handler has been called (false while it is held, waiting for a slot or its instant). */
  started: boolean;
  /** When its handler was called (epoch ms, the worker's clock): the attempt's `started_at`. */
  startedAt: number | null;
  done: Promise<void>;
}

/** What a handler's result or error carries to keep on the attempt: a string, or its `output`. */
function outputOf(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { output?: unknown }).output === 'string'
  ) {
    return (value as { output: string }).output;
  }
  return null;
}

/** Aborts a run's handler; a handler that has not read its signal yet finds it aborted when it does. */
function abortRun(a: Active, reason: unknown): void {
  a.controller ??= new AbortController();
  a.controller.abort(reason);
}

/**
 * A thrown value as the attempt's error, each part its last 64 KiB, sanitised: the message (what
 * run tables show: an `Error`'s message, prefixed by its name unless that is plain `Error`; a
 * string; or JSON) and, for an `Error`, its stack.
 */
export function errorParts(err: unknown): { message: string; stack: string | null } {
  if (err instanceof Error) {
    const name = typeof err.name === 'string' && err.name !== '' ? err.name : 'Error';
    const text = typeof err.message === 'string' ? err.message : String(err.message);
    const message = name === 'Error' ? text || name : text ? `${name}: ${text}` : name;
    return {
      message: resultText(message),
      stack: typeof err.stack === 'string' && err.stack !== '' ? resultText(err.stack) : null,
    };
  }
  try {
    return {
      message: resultText(typeof err === 'string' ? err : (JSON.stringify(err) ?? String(err))),
      stack: null,
    };
  } catch {
    return { message: resultText(String(err)), stack: null };
  }
}

export class Worker extends EventEmitter<WorkerEvents> {
  readonly workerId: string;
  readonly pool: string;
  readonly concurrency: number;
  readonly prefetch: number;
  readonly claimAheadMs: number;
  /** The tenants whose runs it claims; undefined: every tenant's. */
  readonly tenants: readonly string[] | undefined;
  /** Every run this worker holds a lease on: held (in `held`) or started. */
  private readonly active = new Map<string, Active>();
  /** Claimed runs not started yet, in claim (`sort_key`) order. */
  private held: Active[] = [];
  /** Wakes `pump` when the earliest held run not yet due becomes due. */
  private pumpTimer: AbortController | null = null;
  private pumpAt = Number.POSITIVE_INFINITY;
  private readonly claimLoop: Periodic;
  private readonly heartbeatLoop: Periodic;
  private readonly handlerNames: string[];
  private claiming = false;
  /** The id of the claim being made; kept when it fails, so that its retry answers what it claimed. */
  private claimId: string | null = null;
  /** Aborted when stop begins: cuts a waiting (long-poll) claim short. */
  private stopping = new AbortController();
  private listening: Promise<(() => Promise<void>) | null> = Promise.resolve(null);
  /** Writes results: completions batched, failures one by one, retries bounded in time. */
  private readonly completer: Completer;

  constructor(private readonly o: WorkerOptions) {
    super();
    this.workerId = validateId(o.workerId ?? `worker-${randomBytes(6).toString('hex')}`, 'worker_id');
    this.pool = validateId(o.pool ?? 'default', 'pool');
    this.concurrency = o.concurrency ?? 10;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1 || this.concurrency > 1000) {
      throw new RangeError('worker concurrency must be an integer from 1 to 1000');
    }
    if (o.tenants !== undefined) {
      if (o.tenants.length < 1 || o.tenants.length > 1000) {
        throw new RangeError('a worker restricted to tenants needs 1 to 1000 of them');
      }
      this.tenants = [...new Set(o.tenants.map((t) => validateId(t, 'tenant')))];
    } else {
      this.tenants = undefined;
    }
    this.prefetch = o.prefetch ?? 0;
    if (!Number.isInteger(this.prefetch) || this.prefetch < 0 || this.prefetch > 1000) {
      throw new RangeError('worker prefetch must be an integer from 0 to 1000');
    }
    this.claimAheadMs = o.claimAheadMs ?? 250;
    if (!Number.isInteger(this.claimAheadMs) || this.claimAheadMs < 0 || this.claimAheadMs > 10_000) {
      throw new RangeError('worker claim-ahead must be an integer from 0 to 10000 ms');
    }
    if (o.resultRetryMs !== undefined && !(Number.isFinite(o.resultRetryMs) && o.resultRetryMs >= 0)) {
      throw new RangeError('worker result retry must be a non-negative number of ms');
    }
    this.completer = new Completer({
      store: o.store,
      clock: o.clock,
      logger: o.logger,
      onError: (err) => this.emitError(err),
    });
    this.handlerNames = Object.keys(o.handlers);
    if (this.handlerNames.length === 0) throw new RangeError('a worker needs at least one handler');
    const failureLog = (message: string, recovered: string, level?: 'warn') =>
      new FailureLog({ clock: o.clock, logger: o.logger, message, recovered, level });
    this.claimFailures = failureLog('claim failed; retrying with backoff', 'claims work again');
    this.heartbeatFailures = failureLog('heartbeat failed; retrying', 'heartbeats work again');
    this.nodeFailures = failureLog(
      'could not record this worker in the node list; retrying',
      'this worker is recorded in the node list again',
      'warn',
    );
    this.claimLoop = new Periodic({
      clock: o.clock,
      intervalMs: o.pollIntervalMs ?? 1000,
      step: async () => {
        const again = await this.claimOnce();
        this.claimFailures.succeeded();
        return again;
      },
      onError: (err) => {
        this.claimFailures.failed(err);
        this.emitError(err);
      },
    });
    this.heartbeatLoop = new Periodic({
      clock: o.clock,
      intervalMs: o.heartbeatCheckMs ?? 1000,
      step: async () => {
        try {
          await this.heartbeatOnce();
          this.heartbeatFailures.succeeded();
        } finally {
          this.dropExpired();
        }
        // Being listed in `tock status` must never slow the heartbeats down.
        // Its failures are heard like the loops' (a key revoked shows here within seconds, while a
        // claim may be long-polling): logged, and emitted for the runtime to decide.
        await this.touchNode().catch((err: unknown) => {
          this.nodeFailures.failed(err);
          this.emitError(err);
        });
        return false;
      },
      onError: (err) => {
        this.heartbeatFailures.failed(err);
        this.emitError(err);
      },
    });
  }

  /** A failure already logged, for whoever listens ('error' with no listener would throw). */
  private emitError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  private touchedAt = Number.NEGATIVE_INFINITY;
  // Each loop's failures, logged on the first and then at most once a minute (failure-log.ts).
  private readonly claimFailures: FailureLog;
  private readonly heartbeatFailures: FailureLog;
  private readonly nodeFailures: FailureLog;
  /** Runs in `active` whose handler has returned (their result is being written). */
  private finishingCount = 0;

  /** Every few seconds, tells the store this worker is alive and how busy it is. */
  private async touchNode(): Promise<void> {
    const now = this.o.clock.nowMs();
    if (!this.o.store.touchNode || now - this.touchedAt < NODE_TOUCH_MS) return;
    this.touchedAt = now;
    await this.o.store.touchNode({
      nodeId: this.workerId,
      role: 'worker',
      now,
      clock: this.o.clockState?.(),
      info: {
        pid: process.pid,
        pool: this.pool,
        concurrency: this.concurrency,
        in_flight: this.active.size,
        ...(this.handlerNames.length <= MAX_REPORTED_HANDLERS ? { handlers: this.handlerNames } : {}),
        ...(this.tenants ? { tenants: this.tenants } : {}),
        live_ms: 3 * NODE_TOUCH_MS,
      },
    });
    this.nodeFailures.succeeded();
  }

  /** Runs this worker holds: running, being recorded, or held for a slot or their instant. */
  get inFlight(): number {
    return this.active.size;
  }

  /** Handlers executing now. */
  private get running(): number {
    return this.active.size - this.finishingCount - this.held.length;
  }

  start(): void {
    this.claiming = true;
    if (this.stopping.signal.aborted) this.stopping = new AbortController();
    const listen = this.o.store.listen?.bind(this.o.store);
    if (listen) {
      // Woken by the database when work arrives; the poll interval remains the fallback.
      this.listening = listen(() => this.claimLoop.poke()).catch((err) => {
        this.o.logger.warn({ err }, 'could not listen for new runs; polling only');
        return null;
      });
    }
    this.claimLoop.start();
    this.heartbeatLoop.start();
  }

  /**
   * One claim for the free capacity. Returns true when it filled the capacity it asked for
   * (more may be ready: claim again as soon as a slot frees); when it did not and the store can
   * tell, the ms until the next run of the pool becomes claimable (the next claim is then).
   */
  async claimOnce(): Promise<boolean | number> {
    // Runs whose handler has returned only wait for their result to be written: their slots are
    // free, so the next claim overlaps with those writes.
    const capacity = this.concurrency + this.prefetch;
    const free = Math.min(1000, capacity - (this.active.size - this.finishingCount));
    if (!this.claiming || free <= 0) return false;
    // The leases start no earlier than this: their length is measured from it, not from the
    // answer's arrival, which may be late.
    const sentAt = this.o.clock.nowMs();
    // Retry-safe: a claim that failed (its answer may have been lost after it claimed) is sent
    // again with its claim id, which answers what it claimed; a new claim gets a new id.
    this.claimId ??= randomUUID();
    const runs = await this.o.store.claimRuns({
      claimId: this.claimId,
      signal: this.stopping.signal,
      workerId: this.workerId,
      pool: this.pool,
      max: free,
      now: this.o.clock.nowMs(),
      handlers: this.handlerNames,
      tenantId: this.o.tenantId,
      tenants: this.tenants,
      aheadMs: this.claimAheadMs,
    });
    this.claimId = null;
    for (const run of runs) if (!this.active.has(run.runId)) this.hold(run, sentAt);
    this.pump();
    if (runs.length === free) return this.active.size - this.finishingCount < capacity;
    if (this.claiming && this.o.store.nextAvailableAt) {
      const next = await this.o.store.nextAvailableAt({
        pool: this.pool,
        now: this.o.clock.nowMs(),
        tenantId: this.o.tenantId,
        tenants: this.tenants,
      });
      if (next !== null) return Math.max(0, next.getTime() - this.claimAheadMs - this.o.clock.nowMs());
    }
    return false;
  }

  /** A claimed run, leased to us from `sentAt` (when the claim was sent), waiting in `held` until `pump` starts it. */
  private hold(run: ClaimedRun, sentAt: number): void {
    const active: Active = {
      run,
      controller: null,
      leaseExpiresAt: run.leaseExpiresAt.getTime(),
      leaseMs: Math.max(1000, run.leaseExpiresAt.getTime() - sentAt),
      renewedAt: sentAt,
      dropped: null,
      finishing: false,
      started: false,
      startedAt: null,
      done: Promise.resolve(),
    };
    this.active.set(run.runId, active);
    this.held.push(active);
  }

  /**
   * Starts held runs that are due, in claim order, while slots are free; when a slot is free but
   * the next held run is not due yet, wakes at its instant.
   */
  private pump(): void {
    if (!this.claiming || this.held.length === 0) return;
    const now = this.o.clock.nowMs();
    let running = this.running;
    let nextDue = Number.POSITIVE_INFINITY;
    // Taken out of `held` before any starts (a handler may run synchronously); the rest keep
    // their order. One pass, not a splice per started run.
    const held = this.held;
    const due: Active[] = [];
    const waiting: Active[] = [];
    const stale: Active[] = [];
    for (const a of held) {
      const at = a.run.availableAt.getTime();
      if (a.leaseExpiresAt - now < Math.min(START_MARGIN_MS, a.leaseMs / 4)) {
        stale.push(a);
      } else if (running < this.concurrency && at <= now) {
        due.push(a);
        running += 1;
      } else {
        if (at > now) nextDue = Math.min(nextDue, at);
        waiting.push(a);
      }
    }
    this.held = waiting;
    if (stale.length > 0) this.giveBackStale(stale, now);
    for (const a of due) this.begin(a);
    if (running < this.concurrency && nextDue < Number.POSITIVE_INFINITY) this.wakeAt(nextDue);
  }

  /**
   * Held runs whose lease has expired or is about to: never started. Those still leased are
   * released (no attempt spent) so another worker takes them at once; the rest are the reaper's.
   * Each is reported as dropped once that is settled.
   */
  private giveBackStale(stale: Active[], now: number): void {
    const dropped = (list: Active[]) => {
      for (const a of list) this.emit('run:dropped', a.run, LEASE_TOO_SHORT);
    };
    for (const a of stale) {
      a.dropped = LEASE_TOO_SHORT;
      this.active.delete(a.run.runId);
      this.o.logger.warn(
        { run_id: a.run.runId, job_id: a.run.jobId, lease_left_ms: a.leaseExpiresAt - now },
        `${LEASE_TOO_SHORT}; not started`,
      );
    }
    const live = stale.filter((a) => a.leaseExpiresAt > now);
    dropped(stale.filter((a) => a.leaseExpiresAt <= now));
    if (live.length === 0) return;
    this.o.store
      .releaseRuns({
        leases: live.map((a) => ({ runId: a.run.runId, leaseToken: a.run.leaseToken })),
        reason: LEASE_TOO_SHORT,
        now,
      })
      .catch((err: unknown) =>
        this.o.logger.warn(
          { err, runs: live.length },
          'could not release runs not started; their leases will expire',
        ),
      )
      .finally(() => dropped(live));
  }

  private wakeAt(at: number): void {
    if (this.pumpTimer && this.pumpAt <= at) return;
    this.pumpTimer?.abort(FINISHED);
    const timer = new AbortController();
    this.pumpTimer = timer;
    this.pumpAt = at;
    void this.o.clock.sleep(at - this.o.clock.nowMs(), timer.signal).then(() => {
      if (timer.signal.aborted) return;
      this.pumpTimer = null;
      this.pumpAt = Number.POSITIVE_INFINITY;
      this.pump();
    });
  }

  /** Takes every held run out of `active`: they were never started. */
  private takeHeld(): Active[] {
    const held = this.held;
    this.held = [];
    for (const a of held) {
      a.dropped = 'worker shutdown';
      this.active.delete(a.run.runId);
    }
    this.pumpTimer?.abort(FINISHED);
    this.pumpTimer = null;
    this.pumpAt = Number.POSITIVE_INFINITY;
    return held;
  }

  /**
   * Once any held lease is a third of the way through, renews every held lease in one statement
   * and aborts the handlers whose lease is gone. `force` renews regardless.
   */
  async heartbeatOnce(force = false): Promise<void> {
    const now = this.o.clock.nowMs();
    const live = [...this.active.values()].filter((a) => a.dropped === null);
    if (!force && !live.some((a) => now >= a.renewedAt + a.leaseMs / 3)) return;
    if (live.length === 0) return;
    const { renewed, lost } = await this.o.store.heartbeatRuns({
      leases: live.map((a) => ({ runId: a.run.runId, leaseToken: a.run.leaseToken })),
      now,
    });
    for (const r of renewed) {
      const a = this.active.get(r.runId);
      if (a) {
        a.leaseExpiresAt = r.leaseExpiresAt.getTime();
        a.renewedAt = now;
      }
    }
    for (const runId of lost) this.loseLease(runId, 'lease lost');
  }

  /** A lease we could not renew before its expiry is presumed lost: step down rather than guess. */
  private dropExpired(): void {
    const now = this.o.clock.nowMs();
    for (const a of this.active.values()) {
      if (a.dropped === null && a.leaseExpiresAt <= now)
        this.loseLease(a.run.runId, 'lease expired before renewal');
    }
  }

  private loseLease(runId: string, reason: string): void {
    const a = this.active.get(runId);
    // A handler that already returned is past aborting: its result is being recorded under its
    // token, and the store's answer reports the loss (once) if there is one.
    if (!a || a.dropped !== null || a.finishing) return;
    a.dropped = reason;
    if (!a.started) {
      // Held, never started: nothing to abort; it is simply no longer ours.
      this.held = this.held.filter((h) => h !== a);
      this.active.delete(runId);
      this.o.logger.warn(
        { run_id: runId, job_id: a.run.jobId },
        `${reason} on a run held for a slot; not started`,
      );
      this.emit('lease:lost', runId);
      this.emit('run:dropped', a.run, reason);
      return;
    }
    abortRun(a, new LeaseLostError(`${reason} on run ${runId}`, { run_id: runId }));
    this.o.logger.warn(
      { run_id: runId, job_id: a.run.jobId },
      `${reason}; handler aborted, result will be dropped`,
    );
    this.emit('lease:lost', runId);
  }

  private begin(active: Active): void {
    active.started = true;
    active.startedAt = this.o.clock.nowMs();
    this.emit('run:started', active.run);
    active.done = this.runHandler(active).finally(() => {
      if (active.finishing) this.finishingCount -= 1;
      this.active.delete(active.run.runId);
      if (this.claiming) this.claimLoop.poke();
    });
  }

  /** Renews every lease now; this run's new expiry, or `LeaseLostError` if it is gone. */
  private async extendLease(a: Active): Promise<Date> {
    await this.heartbeatOnce(true);
    if (a.dropped !== null)
      throw new LeaseLostError(`the lease on run ${a.run.runId} is lost`, { run_id: a.run.runId });
    return new Date(a.leaseExpiresAt);
  }

  private async runHandler(a: Active): Promise<void> {
    const { run } = a;
    const handler = this.o.handlers[run.handler];
    // `signal` and `logger` are made on first use: most handlers read neither, and at thousands of
    // runs a second an AbortController and a pino child per run are a measurable share of the CPU.
    const parent = this.o.logger;
    let logger: Logger | undefined;
    const ctx: RunContext = {
      runId: run.runId,
      tenantId: run.tenantId,
      jobId: run.jobId,
      scheduledFor: run.scheduledFor,
      attempt: run.attempt,
      payload: run.payload,
      get signal() {
        a.controller ??= new AbortController();
        return a.controller.signal;
      },
      get logger() {
        logger ??= parent.child({ run_id: run.runId, job_id: run.jobId, attempt: run.attempt });
        return logger;
      },
      extendLease: () => this.extendLease(a),
    };
    type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };
    const work: Promise<Outcome> = (async () => {
      if (!handler) throw new Error(`no handler named "${run.handler}" in this worker`);
      return handler(ctx);
    })().then(
      (value) => ({ ok: true, value }),
      (error) => ({ ok: false, error }),
    );
    // The job's timeout: abort the handler and fail the attempt (retryable) when it runs too long.
    const timeoutMs = run.timeoutMs;
    const timer = timeoutMs === null ? null : new AbortController();
    const timedOut: Promise<Outcome> | null =
      timeoutMs === null
        ? null
        : this.o.clock.sleep(timeoutMs, timer!.signal).then(() => {
            const error = new Error(`timed out after ${timeoutMs / 1000}s`);
            if (!timer!.signal.aborted) abortRun(a, error);
            return { ok: false, error };
          });
    const outcome = await (timedOut ? Promise.race([work, timedOut]) : work);
    // A reason of our own: aborting without one builds a DOMException with a stack, per run.
    timer?.abort(FINISHED);
    a.finishing = true;
    this.finishingCount += 1;
    // Its slot is free: a held run takes it now, and the claim loop refills what is held.
    this.pump();
    if (this.claiming) this.claimLoop.poke();
    if (a.dropped !== null) {
      this.emit('run:dropped', run, a.dropped);
      return;
    }
    const budgetMs = this.o.resultRetryMs ?? a.leaseMs;
    if (outcome.ok) {
      const output = outputOf(outcome.value);
      this.report(
        run,
        await this.completer.complete(
          run,
          output === null ? null : resultText(output),
          budgetMs,
          a.startedAt,
        ),
      );
      return;
    }
    const failure = outcome.error;
    const code =
      typeof failure === 'object' && failure !== null ? (failure as { code?: unknown }).code : undefined;
    const output = outputOf(failure);
    const { message, stack } = errorParts(failure);
    const result = await this.completer.fail(
      run,
      {
        error: message,
        errorStack: stack,
        startedAt: a.startedAt,
        permanent: code === 'permanent_failure',
        retryAfterMs: failure instanceof RetryLaterError ? failure.retryAfterMs : undefined,
        output: output === null ? null : resultText(output),
      },
      budgetMs,
    );
    this.report(run, result);
  }

  /** Emits how a run's result ended up. */
  private report(run: ClaimedRun, outcome: ResultOutcome): void {
    switch (outcome.kind) {
      case 'succeeded':
        this.emit('run:succeeded', run);
        return;
      case 'failed':
        this.emit('run:failed', run, { state: outcome.state, error: outcome.error });
        return;
      case 'lost':
        this.emit('lease:lost', run.runId);
        this.emit('run:dropped', run, 'lease lost before the result was recorded');
        return;
      case 'dropped':
        this.emit('run:dropped', run, outcome.reason);
        return;
    }
  }

  /** Gives `runs` back for another worker at shutdown (no attempt spent), logging the outcome. */
  private async releaseOnStop(runs: Active[], log: { done: string; failed: string }): Promise<void> {
    if (runs.length === 0) return;
    try {
      const { released } = await this.o.store.releaseRuns({
        leases: runs.map((a) => ({
          runId: a.run.runId,
          leaseToken: a.run.leaseToken,
          startedAt: a.startedAt,
        })),
        reason: 'worker shutdown',
        now: this.o.clock.nowMs(),
      });
      this.o.logger.info({ released: released.length }, log.done);
    } catch (err) {
      this.o.logger.error({ err }, log.failed);
    }
  }

  /**
   * Graceful stop: no new claims; running handlers get `graceMs` to finish; the rest are aborted
   * and their leases released without spending an attempt.
   */
  async stop(graceMs = 30_000): Promise<void> {
    this.claiming = false;
    this.stopping.abort();
    await (await this.listening)?.();
    this.listening = Promise.resolve(null);
    await this.claimLoop.stop();
    // Runs held for a slot never started: give them back at once.
    const held = this.takeHeld();
    await this.releaseOnStop(held, {
      done: 'released runs held for a slot',
      failed: 'could not release held runs; their leases will expire',
    });
    const graceEnd = this.o.clock.nowMs() + graceMs;
    const deadline = new AbortController();
    const all = Promise.all([...this.active.values()].map((a) => a.done));
    await Promise.race([all, this.o.clock.sleep(graceMs, deadline.signal)]);
    deadline.abort();
    const rest = [...this.active.values()].filter((a) => a.dropped === null && !a.finishing);
    const finishing = [...this.active.values()].filter((a) => a.finishing);
    for (const a of rest) {
      a.dropped = 'worker shutdown';
      abortRun(a, new Error('worker shutdown'));
    }
    await this.releaseOnStop(rest, {
      done: 'released unfinished runs for another worker',
      failed: 'could not release runs; their leases will expire',
    });
    // Results already in hand are recorded, not released: releasing them would run the slot again.
    // But not at any cost: what the store has not taken by the end of the grace period (and at
    // least STOP_FLUSH_MS) is given up, so a stop always ends.
    await this.completer.settle(Math.max(STOP_FLUSH_MS, graceEnd - this.o.clock.nowMs()));
    await Promise.all(finishing.map((a) => a.done));
    await this.heartbeatLoop.stop();
    this.touchedAt = Number.NEGATIVE_INFINITY;
    await this.o.store.leaveNode?.({ nodeId: this.workerId }).catch((err: unknown) => {
      this.o.logger.warn({ err }, 'could not remove this worker from the node list');
    });
  }
}
