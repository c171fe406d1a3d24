/**
 * Keeps a node on the database's clock: re-measures the `OffsetClock` every interval (several
 * round-trip-corrected samples) and answers whether it is trustworthy enough to make slot and
 * lease decisions. A scheduler whose clock uncertainty exceeds the bound refuses to tick or reap,
 * and says so once, rather than fire slots or expire leases at the wrong instant.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type ClockSample, type OffsetClock, type OffsetEstimate, Periodic } from '../core/index.js';

export interface ClockSyncOptions {
  clock: OffsetClock;
  /** One round trip to the database's clock, timed by the given local clock reading. */
  sample: (localNowMs: () => number) => Promise<ClockSample>;
  /** The local clock that times the samples. */
  localNowMs: () => number;
  logger: Logger;
  /** Re-measure this often, ms. Default 60000. */
  intervalMs?: number;
  /** Refuse to schedule above this uncertainty, ms. Default 500. */
  maxUncertaintyMs?: number;
  /** Round trips per measurement. Default 5. */
  samples?: number;
}

export interface ClockSyncEvents {
  measured: [estimate: OffsetEstimate];
  error: [err: unknown];
}

export class ClockSync extends EventEmitter<ClockSyncEvents> {
  readonly maxUncertaintyMs: number;
  private readonly periodic: Periodic;
  private refusing = false;

  constructor(private readonly o: ClockSyncOptions) {
    super();
    this.maxUncertaintyMs = o.maxUncertaintyMs ?? 500;
    this.periodic = new Periodic({
      clock: o.clock,
      intervalMs: o.intervalMs ?? 60_000,
      step: async () => {
        await this.measureOnce();
        return false;
      },
      onError: (err, failures) => {
        o.logger.warn({ err, failures }, 'could not measure the database clock; keeping the last offset');
        if (this.listenerCount('error') > 0) this.emit('error', err); // logged already; unheard, it must not throw
      },
    });
  }

  async measureOnce(): Promise<OffsetEstimate> {
    const estimate = await this.o.clock.measure(() => this.o.sample(this.o.localNowMs), this.o.samples ?? 5);
    this.o.logger.debug(
      { offset_ms: Math.round(estimate.offsetMs), uncertainty_ms: Number(estimate.uncertaintyMs.toFixed(2)) },
      'database clock measured',
    );
    this.emit('measured', estimate);
    return estimate;
  }

  /**
   * Null when the clock may be used for slot and lease decisions; otherwise why not. Logs once
   * when it starts refusing and once when it recovers.
   */
  refusal(): string | null {
    const { offsetMs, uncertaintyMs } = this.o.clock.offset;
    const refuse = !(uncertaintyMs <= this.maxUncertaintyMs);
    if (refuse !== this.refusing) {
      this.refusing = refuse;
      if (refuse) {
        this.o.logger.error(
          { uncertainty_ms: uncertaintyMs, bound_ms: this.maxUncertaintyMs, offset_ms: Math.round(offsetMs) },
          'refusing to schedule: the database clock offset is too uncertain',
        );
      } else {
        this.o.logger.info(
          { uncertainty_ms: uncertaintyMs },
          'database clock trusted again; scheduling resumes',
        );
      }
    }
    return refuse
      ? `clock uncertainty ${uncertaintyMs.toFixed(1)} ms exceeds the bound of ${this.maxUncertaintyMs} ms`
      : null;
  }

  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
