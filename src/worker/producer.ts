/**
 * The producer: claims runs for the worker's free capacity and starts each when a slot is free and
 * its instant has come. Claimed runs wait in `held`, in claim (`sort_key`) order, leased like
 * running ones; a run claimed ahead starts at its `availableAt`, not before. Idle, it sleeps until
 * woken (a notification from the source's `listen`, or a slot freeing), until the next run of the
 * pool becomes claimable, or for the poll interval (`core/wakeups.ts`). How many runs it may hold
 * beyond its concurrency is its prefetch: fixed, or (`auto`) about 100 ms of the pace at which it
 * has started runs over the last second (`pace.ts`, `core/prefetch.ts`).
 *
 * Invariants: a held run is started only with at least {@link START_MARGIN_MS} of its lease left
 * (else it is released, or dropped if its lease is gone), because a claim answered late may hand
 * out runs the reaper is already taking back; a claim that failed is sent again with the same claim
 * id, so a lost answer does not strand the runs it claimed.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import {
  autoPrefetch,
  type ClaimedRun,
  type Clock,
  idleSleepMs,
  type LeaseSource,
  MAX_CLAIM_RUNS,
  msUntilClaimable,
  Periodic,
} from '../core/index.js';
import { type ActiveRun, type ActiveRuns, type EmitEvent, FINISHED, heldRun } from './active-run.js';
import { FailureLog } from './failure-log.js';
import { PaceMeter } from './pace.js';

/**
 * The least lease a held run must have left for its handler to start, ms (a quarter of the lease,
 * if that is less). A claim's answer can arrive late (a database or server stalled after claiming):
 * a run whose lease has expired, or is about to, may already be the reaper's and another worker's,
 * so starting it would run it twice. It is released instead (no attempt spent), or, if its lease is
 * gone, dropped.
 */
export const START_MARGIN_MS = 1000;

/**
 * How often `pump` looks at every held run even while the slots are full, ms: a held run whose
 * lease is nearly out (its heartbeats failing) is given back within this of it, not when its turn
 * comes.
 */
export const SWEEP_MS = 100;

/**
 * An empty answer of a source that waits for work (`waitsForWork`) sooner than this, ms, did not
 * wait (the server is closing, or was told not to): the worker sleeps its poll interval before the
 * next claim instead of claiming again at once, so it cannot loop on such answers.
 */
export const LONG_POLL_ANSWERED_EARLY_MS = 100;

/** Why a held run was not started: its lease had expired, or was about to, when its turn came. */
export const LEASE_TOO_SHORT = 'lease expired or about to expire before the run started';

/** What the producer claims, and for whom: the worker's settings. */
export interface ClaimScope {
  workerId: string;
  pool: string;
  handlers: readonly string[];
  concurrency: number;
  /**
   * Runs to hold claimed beyond `concurrency`: a fixed number (0: none), or `auto`, which sizes
   * them at each claim to about 100 ms of the handlers' recent pace (`core/prefetch.ts`).
   */
  prefetch: number | 'auto';
  claimAheadMs: number;
  tenantId?: string;
  tenants?: readonly string[];
}

export interface ProducerOptions {
  source: Pick<
    LeaseSource,
    'claimRuns' | 'releaseRuns' | 'listen' | 'nextAvailableAt' | 'waitsForWork' | 'maxClaimRuns'
  >;
  clock: Clock;
  logger: Logger;
  runs: ActiveRuns;
  scope: ClaimScope;
  /** Wait between claims when nothing is ready, ms. */
  pollIntervalMs: number;
  emit: EmitEvent;
  /** Starts a held run's handler (the executor's). */
  begin: (a: ActiveRun) => void;
  /** Told of each failed claim (after it is logged). */
  onError: (err: unknown) => void;
}

export class Producer {
  /** Claimed runs not started yet, in claim (`sort_key`) order: `held` from `heldHead` on. */
  private held: ActiveRun[] = [];
  private heldHead = 0;
  /** Wakes `pump` when the earliest held run not yet due becomes due. */
  private pumpTimer: AbortController | null = null;
  private pumpAt = Number.POSITIVE_INFINITY;
  private readonly loop: Periodic;
  private readonly failures: FailureLog;
  private claiming = false;
  /** The id of the claim being made; kept when it fails, so that its retry answers what it claimed. */
  private claimId: string | null = null;
  /**
   * The last claim took fewer runs than it had room for: the queue, not the capacity, is what
   * limits it, so a slot freeing is no reason to claim again (that claim would come back empty
   * while runs wait for a limit's tokens); a wake, the next run's instant or the poll interval is.
   */
  private starved = false;
  /** Aborted when stop begins: cuts a waiting (long-poll) claim short. */
  private stopping = new AbortController();
  private listening: Promise<(() => Promise<void>) | null> = Promise.resolve(null);
  /** Handler starts, for an `auto` prefetch. */
  private readonly pace = new PaceMeter();
  /** When `pump` last looked at every held run (a sweep). */
  private sweptAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly o: ProducerOptions) {
    this.failures = new FailureLog({
      clock: o.clock,
      logger: o.logger,
      message: 'claim failed; retrying with backoff',
      recovered: 'claims work again',
    });
    this.loop = new Periodic({
      clock: o.clock,
      intervalMs: o.pollIntervalMs,
      step: async () => {
        const claimed = await this.claim();
        this.failures.succeeded();
        if (!(claimed instanceof Date)) return claimed;
        // Idle: until woken (`poke`), until the next run may be claimed, or the poll interval.
        const now = o.clock.nowMs();
        return idleSleepMs({
          now,
          next: claimed,
          aheadMs: o.scope.claimAheadMs,
          intervalMs: o.pollIntervalMs,
        });
      },
      onError: (err) => {
        this.failures.failed(err);
        o.onError(err);
      },
    });
  }

  /** Runs held for a slot or their instant. */
  get heldCount(): number {
    return this.held.length - this.heldHead;
  }

  /** Starts claiming, woken by the source's notifications where it has them. */
  start(): void {
    this.claiming = true;
    if (this.stopping.signal.aborted) this.stopping = new AbortController();
    const { source } = this.o;
    const listen = source.listen?.bind(source);
    if (listen) {
      // Woken by the database when work arrives; the poll interval remains the fallback.
      this.listening = listen(() => this.loop.poke()).catch((err) => {
        this.o.logger.warn({ err }, 'could not listen for new runs; polling only');
        return null;
      });
    }
    this.loop.start();
  }

  /** Stops claiming: cuts a waiting claim short, stops listening, waits for the claim in flight. */
  async stop(): Promise<void> {
    this.claiming = false;
    this.stopping.abort();
    await (await this.listening)?.();
    this.listening = Promise.resolve(null);
    await this.loop.stop();
  }

  /** Claims again as soon as it can: a slot was freed (unless the last claim found too few runs). */
  poke(): void {
    if (this.claiming && !this.starved) this.loop.poke();
  }

  /**
   * One claim for the free capacity. Returns true when it filled the capacity it asked for
   * (more may be ready: claim again as soon as a slot frees); when it did not and the source can
   * tell, the ms until the next run of the pool becomes claimable (the next claim is then).
   */
  async claimOnce(): Promise<boolean | number> {
    const claimed = await this.claim();
    if (!(claimed instanceof Date)) return claimed;
    return msUntilClaimable(claimed, this.o.scope.claimAheadMs, this.o.clock.nowMs());
  }

  /**
   * One claim for the free capacity: true when it filled the capacity it asked for, the instant the
   * next run of the pool becomes available when it did not and the source can tell, else false; on
   * a source that waits for work, when to claim again (`afterLongPoll`).
   */
  private async claim(): Promise<boolean | number | Date> {
    const { runs, scope, clock, source } = this.o;
    // No more than the source can take in one claim: an answer of that many is then a full one.
    const claimMax = source.maxClaimRuns ?? MAX_CLAIM_RUNS;
    const capacity = scope.concurrency + this.prefetchNow(claimMax);
    // Runs whose handler has returned only wait for their result to be written: their slots are
    // free, so the next claim overlaps with those writes.
    const free = Math.min(claimMax, capacity - (runs.size - runs.finishing));
    if (!this.claiming || free <= 0) return false;
    // The leases start no earlier than this: their length is measured from it, not from the
    // answer's arrival, which may be late.
    const sentAt = clock.nowMs();
    // Retry-safe: a claim that failed (its answer may have been lost after it claimed) is sent
    // again with its claim id, which answers what it claimed; a new claim gets a new id.
    const firstTry = this.claimId === null;
    this.claimId ??= randomUUID();
    const claimedAt = clock.nowMs();
    const claimed = await source.claimRuns({
      claimId: this.claimId,
      firstTry,
      signal: this.stopping.signal,
      workerId: scope.workerId,
      pool: scope.pool,
      max: free,
      now: claimedAt,
      handlers: scope.handlers,
      tenantId: scope.tenantId,
      tenants: scope.tenants,
      aheadMs: scope.claimAheadMs,
    });
    this.claimId = null;
    for (const run of claimed) if (!runs.has(run.runId)) this.hold(run, sentAt);
    this.pump();
    this.starved = claimed.length < free;
    if (claimed.length === free) return runs.size - runs.finishing < capacity;
    if (source.waitsForWork) return this.afterLongPoll(claimed.length, sentAt);
    if (this.claiming && source.nextAvailableAt) {
      // As of the claim: what frees between it and this answer (a limit's window) is then in it.
      const next = await source.nextAvailableAt({
        pool: scope.pool,
        now: claimedAt,
        tenantId: scope.tenantId,
        tenants: scope.tenants,
        aheadMs: scope.claimAheadMs,
      });
      if (next !== null) return next;
    }
    return false;
  }

  /**
   * Runs to hold beyond concurrency now: the fixed prefetch, or `auto`'s for the recent pace (within
   * two claims of `claimMax`, the most one claim of the source takes).
   */
  private prefetchNow(claimMax: number): number {
    const { prefetch, concurrency } = this.o.scope;
    if (prefetch !== 'auto') return prefetch;
    return autoPrefetch({
      startsPerSecond: this.pace.perSecond(this.o.clock.nowMs()),
      concurrency,
      claimRuns: claimMax,
    });
  }

  /**
   * When to claim again after a claim that waited for work on the server (a long-poll) and came
   * back short: after some runs, in half the claim-ahead (those runs were claimed ahead; the runs
   * due next are then still claimed ahead of their instant, by fewer, larger claims), or at once
   * without claim-ahead; after none, at once (that claim waits in its turn), unless the answer did
   * not wait (a server closing): then after the poll interval.
   */
  private afterLongPoll(claimed: number, sentAt: number): boolean | number {
    if (claimed > 0) return Math.floor(this.o.scope.claimAheadMs / 2) || true;
    return this.o.clock.nowMs() - sentAt >= LONG_POLL_ANSWERED_EARLY_MS;
  }

  private hold(run: ClaimedRun, sentAt: number): void {
    const a = heldRun(run, sentAt);
    this.o.runs.add(a);
    this.held.push(a);
  }

  /**
   * Starts held runs that are due, in claim order, while slots are free; when a slot is free but
   * the next held run is not due yet, wakes at its instant. Once the slots are full it looks no
   * further (a slot freeing calls this once per run, with up to 1000 held), except in a sweep, at
   * most every {@link SWEEP_MS}, which also gives back held runs whose lease is nearly out wherever
   * they are. A run is checked for its lease whenever it is started.
   */
  pump(): void {
    if (!this.claiming || this.heldCount === 0) return;
    const { runs, scope } = this.o;
    const now = this.o.clock.nowMs();
    let running = runs.size - runs.finishing - this.heldCount;
    const sweep = now - this.sweptAt >= SWEEP_MS;
    if (running >= scope.concurrency && !sweep) return;
    if (sweep) this.sweptAt = now;
    let nextDue = Number.POSITIVE_INFINITY;
    // Taken out of `held` before any starts (a handler may run synchronously); the rest keep
    // their order. One pass over the runs looked at, not a splice per started run, nor a copy of
    // those not looked at.
    const held = this.held;
    const due: ActiveRun[] = [];
    const waiting: ActiveRun[] = [];
    const stale: ActiveRun[] = [];
    let i = this.heldHead;
    for (; i < held.length && (sweep || running < scope.concurrency); i++) {
      const a = held[i] as ActiveRun;
      const at = a.run.availableAt.getTime();
      if (a.leaseExpiresAt - now < Math.min(START_MARGIN_MS, a.leaseMs / 4)) {
        stale.push(a);
      } else if (running < scope.concurrency && at <= now) {
        due.push(a);
        running += 1;
      } else {
        if (at > now) nextDue = Math.min(nextDue, at);
        waiting.push(a);
      }
    }
    // Those kept go back just before the runs not looked at, in their order.
    this.heldHead = i - waiting.length;
    for (let k = 0; k < waiting.length; k++) held[this.heldHead + k] = waiting[k] as ActiveRun;
    // The consumed front is dropped once it is all or most of the array: amortised, one copy per run.
    if (this.heldHead === held.length) {
      this.held = [];
      this.heldHead = 0;
    } else if (this.heldHead > 1024 && this.heldHead * 2 > held.length) {
      this.held = held.slice(this.heldHead);
      this.heldHead = 0;
    }
    if (stale.length > 0) this.giveBackStale(stale, now);
    this.pace.count(now, due.length);
    for (const a of due) this.o.begin(a);
    if (running < scope.concurrency && nextDue < Number.POSITIVE_INFINITY) this.wakeAt(nextDue);
  }

  /**
   * Held runs whose lease has expired or is about to: never started. Those still leased are
   * released (no attempt spent) so another worker takes them at once; the rest are the reaper's.
   * Each is reported as dropped once that is settled.
   */
  private giveBackStale(stale: ActiveRun[], now: number): void {
    const { emit, logger } = this.o;
    const dropped = (list: ActiveRun[]) => {
      for (const a of list) emit('run:dropped', a.run, LEASE_TOO_SHORT);
    };
    for (const a of stale) {
      a.dropped = LEASE_TOO_SHORT;
      this.o.runs.remove(a);
      logger.warn(
        { run_id: a.run.runId, job_id: a.run.jobId, lease_left_ms: a.leaseExpiresAt - now },
        `${LEASE_TOO_SHORT}; not started`,
      );
    }
    const live = stale.filter((a) => a.leaseExpiresAt > now);
    dropped(stale.filter((a) => a.leaseExpiresAt <= now));
    if (live.length === 0) return;
    this.o.source
      .releaseRuns({
        leases: live.map((a) => ({ runId: a.run.runId, leaseToken: a.run.leaseToken })),
        reason: LEASE_TOO_SHORT,
        now,
      })
      .catch((err: unknown) =>
        logger.warn(
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

  /** A held run whose lease was lost: no longer ours, never started. */
  forget(a: ActiveRun): void {
    this.held = this.held.slice(this.heldHead).filter((h) => h !== a);
    this.heldHead = 0;
    this.o.runs.remove(a);
  }

  /** Takes every held run out of the register (a stop): they were never started. */
  takeHeld(): ActiveRun[] {
    const held = this.held.slice(this.heldHead);
    this.held = [];
    this.heldHead = 0;
    for (const a of held) {
      a.dropped = 'worker shutdown';
      this.o.runs.remove(a);
    }
    this.pumpTimer?.abort(FINISHED);
    this.pumpTimer = null;
    this.pumpAt = Number.POSITIVE_INFINITY;
    return held;
  }
}
