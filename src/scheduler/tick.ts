/**
 * The tick loop: materialises due slots into runs. It never runs handlers. Each tick is one short
 * transaction in the store (lock a bounded batch of due jobs with SKIP LOCKED, insert their slots
 * under the unique run key, advance next_run_at), so several schedulers may tick at once and a
 * midnight herd drains over several ticks in slot order.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, Periodic } from '../core/index.js';
import type { Store, TickResult } from '../store/index.js';

export interface TickLoopOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Consulted before each pass: a reason not to trust the clock skips the pass (see ClockSync). */
  refusal?: () => string | null;
  /** Pause between ticks, ms. Default 1000. */
  intervalMs?: number;
  /** Slots up to this far ahead are materialised early (claimable only at their slot), ms. Default 1000. */
  lookaheadMs?: number;
  /** Most due jobs one tick handles. Default 1000. */
  batchSize?: number;
  /** Shards this node ticks; all when unset. */
  shards?: () => readonly number[] | undefined;
  /**
   * The shard leases this node holds (see ShardManager): when set, a tick covers only these shards
   * and the store checks their epochs in the tick's transaction. No shard held: no tick.
   */
  fence?: () => { nodeId: string; shards: { shardId: number; epoch: number }[] };
}

export interface TickLoopEvents {
  tick: [result: TickResult & { now: number; durationMs: number }];
  error: [err: unknown];
}

export class TickLoop extends EventEmitter<TickLoopEvents> {
  private readonly periodic: Periodic;
  readonly lookaheadMs: number;
  readonly batchSize: number;

  constructor(private readonly o: TickLoopOptions) {
    super();
    this.lookaheadMs = o.lookaheadMs ?? 1000;
    this.batchSize = o.batchSize ?? 1000;
    this.periodic = new Periodic({
      clock: o.clock,
      intervalMs: o.intervalMs ?? 1000,
      step: async () => {
        if (o.refusal?.()) return false;
        return (await this.tickOnce()).full;
      },
      onError: (err, failures) => {
        o.logger.error({ err, failures }, 'tick failed; retrying with backoff');
        if (this.listenerCount('error') > 0) this.emit('error', err); // logged already; unheard, it must not throw
      },
    });
  }

  /** One tick at the clock's now. */
  async tickOnce(): Promise<TickResult> {
    const fence = this.o.fence?.();
    if (fence && fence.shards.length === 0) {
      return { jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] };
    }
    const now = this.o.clock.nowMs();
    const started = performance.now();
    const result = await this.o.store.tick({
      now,
      lookaheadMs: this.lookaheadMs,
      batchSize: this.batchSize,
      shards: this.o.shards?.(),
      fence,
    });
    if (result.fencedOut.length > 0) {
      this.o.logger.warn(
        { shards: result.fencedOut },
        'shards lost before this tick could write for them; another node ticks them now',
      );
    }
    for (const job of result.parked) {
      this.o.logger.error(
        { tenant_id: job.tenantId, job_id: job.jobId, reason: job.reason },
        'schedule can no longer be evaluated; job parked (re-register it to resume)',
      );
    }
    if (result.created.length > 0 || result.dropped > 0) {
      this.o.logger.debug(
        { jobs: result.jobs, created: result.created.length, dropped: result.dropped },
        'tick',
      );
    }
    this.emit('tick', { ...result, now, durationMs: performance.now() - started });
    return result;
  }

  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
