/**
 * Remote workers in the node list. A worker that claims and renews over HTTP appears in `nodes`
 * (and `tock status`) as a row of its tenant (`<tenant>/<worker_id>`), at most
 * MAX_REMOTE_WORKERS_PER_TENANT per tenant. Its claims and heartbeats touch its row in the
 * background, at most once per TOUCH_EVERY_MS: `seen` spares the database a write per request,
 * keyed by the tenant-scoped id and bounded (cleared when full: at worst a write more).
 */
import {
  type Clock,
  MAX_REMOTE_WORKERS_PER_TENANT,
  REMOTE_WORKER_LIVE_MS,
  remoteNodeId,
} from '../core/index.js';
import type { Store } from '../store/index.js';

/** A remote worker's row is rewritten at most this often, ms. */
export const TOUCH_EVERY_MS = 5000;
/** The most workers `seen` remembers (over every tenant) before it starts over. */
export const MAX_WORKERS_SEEN = 10_000;

/** What a worker reports of itself (merged into its row's `info`). */
export interface WorkerReport {
  pool?: string;
  handlers?: string[];
  concurrency?: number;
  in_flight?: number;
}

export class RemoteWorkers {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly o: {
      store: Pick<Store, 'touchRemoteWorker' | 'leaveRemoteWorker'>;
      clock: Clock;
      logger: { warn(o: object, m: string): void };
    },
  ) {}

  /** Writes a remote worker's row (what it reported merged into `info`) and notes it as seen at `t`. */
  record(
    workerId: string,
    tenantId: string,
    t: number,
    report: WorkerReport,
    clockState?: { offsetMs: number; uncertaintyMs: number },
  ): Promise<unknown> {
    const seenKey = remoteNodeId(tenantId, workerId);
    if (this.seen.size >= MAX_WORKERS_SEEN) this.seen.clear();
    this.seen.set(seenKey, t);
    const info: Record<string, unknown> = { via: 'http', live_ms: REMOTE_WORKER_LIVE_MS };
    for (const field of ['pool', 'handlers', 'concurrency', 'in_flight'] as const)
      if (report[field] !== undefined) info[field] = report[field];
    return this.o.store.touchRemoteWorker({
      tenantId,
      workerId,
      now: t,
      info,
      clock: clockState,
      cap: MAX_REMOTE_WORKERS_PER_TENANT,
    });
  }

  /** A claim or heartbeat: the worker's row is written at most once per TOUCH_EVERY_MS, in the background. */
  touch(workerId: string, tenantId: string, pool?: string, handlers?: string[]): void {
    const t = this.o.clock.nowMs();
    if (t - (this.seen.get(remoteNodeId(tenantId, workerId)) ?? Number.NEGATIVE_INFINITY) < TOUCH_EVERY_MS)
      return;
    this.record(workerId, tenantId, t, { pool, handlers }).catch((err: unknown) =>
      this.o.logger.warn({ err }, 'could not record a remote worker in the node list'),
    );
  }

  /** A worker leaving on purpose: its row goes (and it is forgotten, so that a return writes it again). */
  async leave(workerId: string, tenantId: string): Promise<void> {
    this.seen.delete(remoteNodeId(tenantId, workerId));
    await this.o.store.leaveRemoteWorker({ tenantId, workerId });
  }
}
