/**
 * The reaper: requeues runs whose lease expired (a worker died or froze), with the next attempt
 * and a backoff, or dead-letters them when their attempts are spent. Its write is guarded by the
 * token it read, so a run completed or re-claimed in between stays as it is, and concurrent
 * reapers on several nodes are harmless.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, Periodic } from '../core/index.js';
import type { ReapResult, Store } from '../store/index.js';

export interface ReaperOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Consulted before each pass: a reason not to trust the clock skips the pass (see ClockSync). */
  refusal?: () => string | null;
  /** Pause between passes, ms. Default 1000. */
  intervalMs?: number;
  /** Most runs one pass handles. Default 500. */
  batchSize?: number;
}

export interface ReaperEvents {
  reap: [result: ReapResult & { now: number }];
  error: [err: unknown];
}

export class Reaper extends EventEmitter<ReaperEvents> {
  private readonly periodic: Periodic;
  private readonly batchSize: number;

  constructor(private readonly o: ReaperOptions) {
    super();
    this.batchSize = o.batchSize ?? 500;
    this.periodic = new Periodic({
      clock: o.clock,
      intervalMs: o.intervalMs ?? 1000,
      step: async () => {
        if (o.refusal?.()) return false;
        const r = await this.reapOnce();
        return r.requeued.length + r.dead.length >= this.batchSize;
      },
      onError: (err, failures) => {
        o.logger.error({ err, failures }, 'reaper failed; retrying with backoff');
        if (this.listenerCount('error') > 0) this.emit('error', err); // logged already; unheard, it must not throw
      },
    });
  }

  async reapOnce(): Promise<ReapResult> {
    const now = this.o.clock.nowMs();
    const result = await this.o.store.reapExpired({ now, batchSize: this.batchSize });
    for (const r of result.requeued) {
      this.o.logger.warn(
        { run_id: r.runId, job_id: r.jobId, attempt: r.attempt },
        'lease expired; run requeued',
      );
    }
    for (const r of result.dead) {
      this.o.logger.warn(
        { run_id: r.runId, job_id: r.jobId },
        'lease expired on the last attempt; run dead-lettered',
      );
    }
    this.emit('reap', { ...result, now });
    return result;
  }

  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
