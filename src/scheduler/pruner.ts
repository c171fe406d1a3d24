/**
 * The pruner: deletes finished runs past their retention (core/retention.ts), with their attempts
 * and reports, one bounded batch at a time. One node at a time prunes: each batch first takes or
 * renews the maintenance lease `prune`, and a node that does not hold it waits for its next pass.
 * (Two pruners at once would do no harm, only double work: every delete checks the row it locks.)
 *
 * A pass goes through the tenants that have runs; for each, through its runs up to `now −` its
 * shortest retention, in batches of `batchSize` runs looked at, resuming from the last one each
 * time. It starts from the tenant's oldest run once every `fullPassMs` (and on a node's first pass),
 * otherwise where the tenant's last pass settled: before the first run it kept that expires within
 * `fullPassMs` (a run that ended after its slot, a retry or a long run, is still inside its
 * retention when its slot passes the horizon), else after the last run it read. Runs kept longer
 * (a longer retention for their state, pending) are not read again every minute, only by the next
 * pass from the oldest run. After a batch it pauses three times as long as the batch took (at least
 * `pauseMs`), so that pruning takes at most a quarter of the database's time on one connection,
 * even while it catches up on months of history; between passes it waits `intervalMs`. A pass is
 * skipped while the clock is not trusted: a clock running ahead would delete runs still inside
 * their retention.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, Periodic, type RetentionState } from '../core/index.js';
import type { PruneCursor, Store } from '../store/index.js';

export type PrunerStore = Pick<
  Store,
  'tenantsWithRuns' | 'shortestRetention' | 'pruneBatch' | 'takeMaintenanceLease' | 'releaseMaintenanceLease'
>;

export interface PrunerOptions {
  store: PrunerStore;
  clock: Clock;
  logger: Logger;
  /** This node: the lease's owner. Unique per process start. */
  owner: string;
  /** Consulted before each batch: a reason not to trust the clock skips it. */
  refusal?: () => string | null;
  /** Pause between passes, ms. Default 60000. */
  intervalMs?: number;
  /** Runs one batch looks at. Default 2000. */
  batchSize?: number;
  /** Shortest pause between batches, ms. Default 50. */
  pauseMs?: number;
  /**
   * How often a tenant's pass starts from its oldest run, ms. In between, a pass starts where the
   * tenant's last one ended: it reads only the runs that came within reach since. Default 3600000.
   */
  fullPassMs?: number;
}

export interface PruneBatchEvent {
  tenantId: string;
  scanned: number;
  byState: Partial<Record<RetentionState, number>>;
}

export interface PrunerEvents {
  batch: [batch: PruneBatchEvent];
  /** A pass went through every tenant; `deleted` runs in all. */
  pass: [pass: { deleted: number; tenants: number; durationMs: number }];
  error: [err: unknown];
}

/** The maintenance lease's name. */
export const PRUNE_LEASE = 'prune';
/** Tenants read per page. */
const TENANT_PAGE = 100;

interface Pass {
  startedAt: number;
  /** Tenants read and not yet pruned. */
  queue: string[];
  /** The last tenant read; null before the first page. */
  after: string | null;
  /** Every tenant has been read. */
  listed: boolean;
  tenants: number;
  deleted: number;
  /**
   * The tenant being pruned: its horizon, where its next batch starts, where its next pass will
   * start (\`resume\`, fixed once a kept run that expires soon was met: \`held\`), and when its last
   * pass from the oldest run started.
   */
  current: {
    tenantId: string;
    horizon: number;
    after: PruneCursor | null;
    resume: PruneCursor | null;
    held: boolean;
    fullAt: number;
  } | null;
}

export class Pruner extends EventEmitter<PrunerEvents> {
  private readonly periodic: Periodic;
  private readonly batchSize: number;
  private readonly pauseMs: number;
  private readonly intervalMs: number;
  private readonly leaseMs: number;
  private pass: Pass | null = null;
  private readonly fullPassMs: number;
  /** Per tenant, where its last pass ended and when its last pass from the oldest run started. */
  private readonly ended = new Map<string, { last: PruneCursor | null; fullAt: number }>();

  constructor(private readonly o: PrunerOptions) {
    super();
    this.batchSize = o.batchSize ?? 2000;
    this.pauseMs = o.pauseMs ?? 50;
    this.intervalMs = o.intervalMs ?? 60_000;
    this.fullPassMs = o.fullPassMs ?? 3_600_000;
    // Held across the wait between passes, so the pruning node stays the same one.
    this.leaseMs = Math.max(30_000, 3 * this.intervalMs);
    this.periodic = new Periodic({
      clock: o.clock,
      intervalMs: this.intervalMs,
      step: () => this.step(),
      onError: (err, failures) => {
        o.logger.error({ err, failures }, 'pruning failed; retrying with backoff');
        if (this.listenerCount('error') > 0) this.emit('error', err);
      },
    });
  }

  /** One batch; the pause before the next (a number), or nothing when the pass is over or not ours. */
  private async step(): Promise<number | undefined> {
    const refusal = this.o.refusal?.();
    if (refusal) return undefined;
    const { store, clock, owner } = this.o;
    const started = clock.nowMs();
    if (
      !(await store.takeMaintenanceLease({ name: PRUNE_LEASE, owner, now: started, leaseMs: this.leaseMs }))
    ) {
      this.pass = null;
      return undefined;
    }
    this.pass ??= {
      startedAt: started,
      queue: [],
      after: null,
      listed: false,
      tenants: 0,
      deleted: 0,
      current: null,
    };
    const pass = this.pass;
    const more = await this.batch(pass, started);
    if (!more) {
      this.pass = null;
      const durationMs = clock.nowMs() - pass.startedAt;
      if (pass.deleted > 0)
        this.o.logger.info(
          { deleted: pass.deleted, tenants: pass.tenants, duration_ms: durationMs },
          'pruned runs',
        );
      this.emit('pass', { deleted: pass.deleted, tenants: pass.tenants, durationMs });
      return undefined;
    }
    return Math.max(this.pauseMs, 3 * (clock.nowMs() - started));
  }

  /** Prunes one batch of the pass; whether the pass has more. */
  private async batch(pass: Pass, now: number): Promise<boolean> {
    const current = pass.current ?? (await this.nextTenant(pass, now));
    if (current === null) return false;
    pass.current = current;
    const r = await this.o.store.pruneBatch({
      tenantId: current.tenantId,
      now,
      horizon: current.horizon,
      after: current.after,
      limit: this.batchSize,
      dryRun: false,
      soonMs: this.fullPassMs,
    });
    for (const n of Object.values(r.byState)) pass.deleted += n ?? 0;
    this.emit('batch', { tenantId: current.tenantId, scanned: r.scanned, byState: r.byState });
    // The next pass starts after the runs this one settled: before the first it kept that expires
    // within the hour (one that ended after its slot), after every run read when there is none.
    if (!current.held) {
      if (r.soon) {
        current.resume = r.settled ?? current.resume;
        current.held = true;
      } else if (r.last !== null) current.resume = r.last;
    }
    if (r.next === null) {
      this.ended.set(current.tenantId, { last: current.resume, fullAt: current.fullAt });
      pass.current = null;
    } else current.after = r.next;
    return pass.current !== null || pass.queue.length > 0 || !pass.listed;
  }

  /** The next tenant of the pass with anything that can expire, or null when there is none. */
  private async nextTenant(pass: Pass, now: number): Promise<Pass['current']> {
    for (;;) {
      if (pass.queue.length === 0) {
        if (pass.listed) return null;
        const page = await this.o.store.tenantsWithRuns({ after: pass.after, limit: TENANT_PAGE });
        pass.queue.push(...page);
        pass.after = page.at(-1) ?? pass.after;
        pass.listed = page.length < TENANT_PAGE;
        continue;
      }
      const tenantId = pass.queue.shift() as string;
      pass.tenants += 1;
      const shortest = await this.o.store.shortestRetention({ tenantId });
      if (shortest === null) continue;
      // From where its last pass ended, unless a pass from the oldest run is due: runs read and
      // kept before (a longer retention, still pending) are read again only then.
      const ended = this.ended.get(tenantId);
      const full = ended === undefined || now - ended.fullAt >= this.fullPassMs;
      const after = full ? null : ended.last;
      return {
        tenantId,
        horizon: now - shortest,
        after,
        resume: after,
        held: false,
        fullAt: full ? now : ended.fullAt,
      };
    }
  }

  start(): void {
    this.periodic.start();
  }

  /** Stops after the batch in flight and gives the lease back, so another node prunes at once. */
  async stop(): Promise<void> {
    await this.periodic.stop();
    await this.o.store
      .releaseMaintenanceLease({ name: PRUNE_LEASE, owner: this.o.owner })
      .catch((err: unknown) => this.o.logger.warn({ err }, 'could not give the prune lease back'));
  }
}
