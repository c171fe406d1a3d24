/**
 * The in-process worker: claims runs of its pool in batches up to its free capacity, runs the
 * named handler for each, renews every lease it holds in one batched heartbeat, and reports each
 * result under the run's lease token. The lease model: a run is ours only while its lease is live;
 * when a heartbeat says a lease is lost (or we could not renew it before it expired), the handler's
 * `signal` is aborted and its result is dropped, because the run may already belong to another
 * worker. Graceful stop: stop claiming, let handlers finish within a grace period, then abort the
 * rest and release their leases so another worker can take them at once.
 *
 * `Worker` composes the parts that do this, around the register of the runs it holds
 * (`active-run.ts`): the producer claims and starts runs (`producer.ts`), the executor runs one
 * handler (`executor.ts`), the completer batches results (`completer.ts`), the lease keeper renews
 * and loses leases (`lease-keeper.ts`), and the node report lists the worker (`node-report.ts`).
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, type LeaseSource, validateId } from '../core/index.js';
import { type ActiveRun, ActiveRuns, abortRun, type EmitEvent, type WorkerEvents } from './active-run.js';
import { Completer } from './completer.js';
import { Executor, type Handler } from './executor.js';
import { LeaseKeeper } from './lease-keeper.js';
import { NodeReport } from './node-report.js';
import { Producer } from './producer.js';

export type { ActiveRun, WorkerEvents } from './active-run.js';
export { errorParts, type Handler, type RunContext } from './executor.js';
export { LEASE_TOO_SHORT, START_MARGIN_MS } from './producer.js';

/**
 * What a worker needs of a store: the lease operations.
 * @deprecated Use `LeaseSource` (core), which `PostgresStore` and `HttpLeaseSource` both implement.
 */
export type LeaseStore = LeaseSource;

export interface WorkerOptions {
  /** Where leases come from: a `PostgresStore` (direct) or an `HttpLeaseSource` (a Tock server). */
  store: LeaseSource;
  clock: Clock;
  logger: Logger;
  /** Handlers by name; the worker claims only runs whose handler it has. */
  handlers: Record<string, Handler>;
  /** Pool to claim from. Default `default`. */
  pool?: string;
  /** Most runs executing at once. Default 10. */
  concurrency?: number;
  /**
   * Unique per process start. Default: the source's own `workerId` (an `HttpLeaseSource`'s), else
   * `worker-<random>`. A source bound to another worker is refused.
   */
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
   * Runs to hold claimed beyond `concurrency`, waiting for a free slot: `auto` (the default) or a
   * fixed number from 0 to 1000 (0: none). Held runs put the next batch in hand when slots free, so
   * claims overlap with running and each claim takes many runs instead of one slot's worth. `auto`
   * holds about 100 ms of the worker's own work: at each claim, the handler starts of the last
   * second × 0.1, up to two full claims of its source less `concurrency` (2000 − `concurrency` on the
   * database, 1000 − `concurrency` over HTTP; none while the worker is new or idle), so a held run
   * waits about 100 ms for its slot whether handlers are fast or slow. Held runs are leased like
   * running ones (renewed by the heartbeat), released at once by a graceful stop, and, if the
   * process dies, retried once their leases expire, which spends an attempt.
   */
  prefetch?: number | 'auto';
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

/** The least time a stopping worker gives the results in hand to be recorded, ms (beyond the grace period's end). */
const STOP_FLUSH_MS = 5000;

/** The worker's settings, checked: what the constructor refuses is a `RangeError`. */
function settingsOf(o: WorkerOptions) {
  const workerId = validateId(
    o.workerId ?? o.store.workerId ?? `worker-${randomBytes(6).toString('hex')}`,
    'worker_id',
  );
  // An HTTP source sends heartbeats and reports under its own id: they must be this worker's.
  if (o.store.workerId !== undefined && o.store.workerId !== workerId) {
    throw new RangeError(`worker id ${workerId} differs from its lease source's, ${o.store.workerId}`);
  }
  const pool = validateId(o.pool ?? 'default', 'pool');
  const concurrency = o.concurrency ?? 10;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) {
    throw new RangeError('worker concurrency must be an integer from 1 to 1000');
  }
  let tenants: readonly string[] | undefined;
  if (o.tenants !== undefined) {
    if (o.tenants.length < 1 || o.tenants.length > 1000) {
      throw new RangeError('a worker restricted to tenants needs 1 to 1000 of them');
    }
    tenants = [...new Set(o.tenants.map((t) => validateId(t, 'tenant')))];
  }
  const prefetch = o.prefetch ?? 'auto';
  if (prefetch !== 'auto' && !(Number.isInteger(prefetch) && prefetch >= 0 && prefetch <= 1000)) {
    throw new RangeError('worker prefetch must be "auto" or an integer from 0 to 1000');
  }
  const claimAheadMs = o.claimAheadMs ?? 250;
  if (!Number.isInteger(claimAheadMs) || claimAheadMs < 0 || claimAheadMs > 10_000) {
    throw new RangeError('worker claim-ahead must be an integer from 0 to 10000 ms');
  }
  if (o.resultRetryMs !== undefined && !(Number.isFinite(o.resultRetryMs) && o.resultRetryMs >= 0)) {
    throw new RangeError('worker result retry must be a non-negative number of ms');
  }
  const handlers = Object.keys(o.handlers);
  if (handlers.length === 0) throw new RangeError('a worker needs at least one handler');
  return {
    workerId,
    pool,
    concurrency,
    tenants,
    prefetch,
    claimAheadMs,
    handlers,
  };
}

export class Worker extends EventEmitter<WorkerEvents> {
  readonly workerId: string;
  readonly pool: string;
  readonly concurrency: number;
  /** Runs it may hold claimed beyond `concurrency`: a fixed number, or `auto` (sized by its pace). */
  readonly prefetch: number | 'auto';
  readonly claimAheadMs: number;
  /** The tenants whose runs it claims; undefined: every tenant's. */
  readonly tenants: readonly string[] | undefined;
  /** Every run this worker holds a lease on: held (by the producer) or started. */
  private readonly runs = new ActiveRuns();
  private readonly producer: Producer;
  private readonly executor: Executor;
  /** Writes results: completions batched, failures one by one, retries bounded in time. */
  private readonly completer: Completer;
  private readonly keeper: LeaseKeeper;
  private readonly node: NodeReport;

  constructor(private readonly o: WorkerOptions) {
    super();
    const s = settingsOf(o);
    this.workerId = s.workerId;
    this.pool = s.pool;
    this.concurrency = s.concurrency;
    this.tenants = s.tenants;
    this.prefetch = s.prefetch;
    this.claimAheadMs = s.claimAheadMs;
    const { store: source, clock, logger } = o;
    const emit = this.emit.bind(this) as EmitEvent;
    const onError = (err: unknown) => this.emitError(err);
    this.completer = new Completer({ store: source, clock, logger, onError });
    this.keeper = new LeaseKeeper({
      source,
      clock,
      logger,
      runs: this.runs,
      emit,
      checkMs: o.heartbeatCheckMs ?? 1000,
      forgetHeld: (a) => this.producer.forget(a),
      afterCheck: () => this.node.touch(),
      onError,
    });
    this.executor = new Executor({
      handlers: o.handlers,
      clock,
      logger,
      completer: this.completer,
      resultRetryMs: o.resultRetryMs,
      emit,
      extendLease: (a) => this.keeper.extendLease(a),
      // Its slot is free: a held run takes it now, and the claim loop refills what is held.
      onFinished: (a) => {
        this.runs.finished(a);
        this.producer.pump();
        this.producer.poke();
      },
      onEnded: (a) => {
        this.runs.ended(a);
        this.producer.poke();
      },
    });
    this.producer = new Producer({
      source,
      clock,
      logger,
      runs: this.runs,
      scope: { ...s, tenantId: o.tenantId },
      pollIntervalMs: o.pollIntervalMs ?? 1000,
      emit,
      begin: (a) => this.executor.begin(a),
      onError,
    });
    this.node = new NodeReport({
      source,
      clock,
      logger,
      workerId: s.workerId,
      pool: s.pool,
      concurrency: s.concurrency,
      handlers: s.handlers,
      tenants: s.tenants,
      clockState: o.clockState,
      inFlight: () => this.runs.size,
      onError,
    });
  }

  /** A failure already logged, for whoever listens ('error' with no listener would throw). */
  private emitError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  /** Runs this worker holds: running, being recorded, or held for a slot or their instant. */
  get inFlight(): number {
    return this.runs.size;
  }

  start(): void {
    this.producer.start();
    this.keeper.start();
  }

  /**
   * One claim for the free capacity. Returns true when it filled the capacity it asked for
   * (more may be ready: claim again as soon as a slot frees); when it did not and the store can
   * tell, the ms until the next run of the pool becomes claimable (the next claim is then).
   */
  claimOnce(): Promise<boolean | number> {
    return this.producer.claimOnce();
  }

  /**
   * Once any held lease is a third of the way through, renews every held lease in one statement
   * and aborts the handlers whose lease is gone. `force` renews regardless.
   */
  heartbeatOnce(force = false): Promise<void> {
    return this.keeper.heartbeatOnce(force);
  }

  /** Gives `runs` back for another worker at shutdown (no attempt spent), logging the outcome. */
  private async releaseOnStop(runs: ActiveRun[], log: { done: string; failed: string }): Promise<void> {
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
    const { clock } = this.o;
    await this.producer.stop();
    // Runs held for a slot never started: give them back at once.
    await this.releaseOnStop(this.producer.takeHeld(), {
      done: 'released runs held for a slot',
      failed: 'could not release held runs; their leases will expire',
    });
    const graceEnd = clock.nowMs() + graceMs;
    const deadline = new AbortController();
    const all = Promise.all([...this.runs.values()].map((a) => a.done));
    await Promise.race([all, clock.sleep(graceMs, deadline.signal)]);
    deadline.abort();
    const rest = [...this.runs.values()].filter((a) => a.dropped === null && !a.finishing);
    const finishing = [...this.runs.values()].filter((a) => a.finishing);
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
    await this.completer.settle(Math.max(STOP_FLUSH_MS, graceEnd - clock.nowMs()));
    await Promise.all(finishing.map((a) => a.done));
    await this.keeper.stop();
    await this.node.leave();
  }
}
