/**
 * The worker's line in the node list (`tock status`): every {@link NODE_TOUCH_MS} it tells the
 * source it is alive and how busy it is, and a stop takes the line away. Where the source cannot
 * record nodes, nothing is sent. Being listed must never slow the heartbeats down, so a failure is
 * logged (first, then once a minute) and told to `onError`, never thrown.
 */
import type { Logger } from 'pino';
import type { Clock, LeaseSource } from '../core/index.js';
import { FailureLog } from './failure-log.js';

/**
 * At most this many handler names are reported in the node list (a worker with more is listed as
 * running any handler: `handlers` is left out, never cut short, so nothing it runs looks unserved).
 */
const MAX_REPORTED_HANDLERS = 100;

/** How often a worker tells the database it is alive (where the store can record it), ms. */
const NODE_TOUCH_MS = 5000;

export interface NodeReportOptions {
  source: Pick<LeaseSource, 'touchNode' | 'leaveNode'>;
  clock: Clock;
  logger: Logger;
  workerId: string;
  pool: string;
  concurrency: number;
  handlers: readonly string[];
  tenants?: readonly string[];
  /** This worker's clock offset from the database's. */
  clockState?: () => { offsetMs: number; uncertaintyMs: number };
  /** Runs held now. */
  inFlight: () => number;
  onError: (err: unknown) => void;
}

export class NodeReport {
  private touchedAt = Number.NEGATIVE_INFINITY;
  private readonly failures: FailureLog;

  constructor(private readonly o: NodeReportOptions) {
    this.failures = new FailureLog({
      clock: o.clock,
      logger: o.logger,
      message: 'could not record this worker in the node list; retrying',
      recovered: 'this worker is recorded in the node list again',
      level: 'warn',
    });
  }

  /**
   * Every few seconds, tells the source this worker is alive. Its failures are heard like the
   * loops' (a key revoked shows here within seconds, while a claim may be long-polling): logged,
   * and told to `onError` for the runtime to decide.
   */
  async touch(): Promise<void> {
    try {
      await this.send();
    } catch (err) {
      this.failures.failed(err);
      this.o.onError(err);
    }
  }

  private async send(): Promise<void> {
    const { source, clock } = this.o;
    const now = clock.nowMs();
    if (!source.touchNode || now - this.touchedAt < NODE_TOUCH_MS) return;
    this.touchedAt = now;
    await source.touchNode({
      nodeId: this.o.workerId,
      role: 'worker',
      now,
      clock: this.o.clockState?.(),
      info: {
        pid: process.pid,
        pool: this.o.pool,
        concurrency: this.o.concurrency,
        in_flight: this.o.inFlight(),
        ...(this.o.handlers.length <= MAX_REPORTED_HANDLERS ? { handlers: this.o.handlers } : {}),
        ...(this.o.tenants ? { tenants: this.o.tenants } : {}),
        live_ms: 3 * NODE_TOUCH_MS,
      },
    });
    this.failures.succeeded();
  }

  /** The worker stops: the source forgets it (a failure is logged; the line then ages out). */
  async leave(): Promise<void> {
    this.touchedAt = Number.NEGATIVE_INFINITY;
    await this.o.source.leaveNode?.({ nodeId: this.o.workerId }).catch((err: unknown) => {
      this.o.logger.warn({ err }, 'could not remove this worker from the node list');
    });
  }
}
