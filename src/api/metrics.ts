/**
 * Prometheus metrics (prom-client), one registry per process. The API records request durations;
 * the runtime feeds scheduler and worker events in through the methods below. Bounded whatever
 * the traffic: at most MAX_POOL_LABELS values of the `pool` label (later pools are counted under
 * `pool="other"`), at most MAX_LIMIT_SERIES
 * limits with limit gauges, one series per table of Tock's (a fixed list) for the table gauges,
 * at most `topJobs` (DEFAULT_TOP_JOBS, 20) jobs in each per-job top N (`job-metrics.ts`), and the
 * run, limit, table and per-job gauges are a sample the `RunGaugeSampler` reads at most once per
 * METRICS_SAMPLE_MS, however often `/metrics` is scraped.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Clock } from '../core/index.js';
import {
  EXACT_COUNT_BELOW,
  HELD_SCAN,
  type LimitGauge,
  type Store,
  type TableStats,
} from '../store/index.js';
import { type JobGaugeOptions, JobGauges } from './job-metrics.js';

/**
 * The run gauges (`tock_runs`, `tock_ready_runs`, `tock_unserved_runs`), the limit gauges
 * (`tock_limit_*`) and the table gauges (`tock_table_*`) are read from the database at most this
 * often, ms.
 */
export const METRICS_SAMPLE_MS = 15_000;
/** At most this many values of the `pool` label; the pools seen after them share `pool="other"`. */
export const MAX_POOL_LABELS = 100;
/** The `pool` label of every pool past MAX_POOL_LABELS. */
export const OTHER_POOL_LABEL = 'other';
/**
 * At most this many limits (the first by gate, `<tenant>/<key>`, jobs' own caps included) have
 * `tock_limit_*` series in a sample; the count of all is `tock_limits`. Every limit is in the API
 * (`GET /v1/limits`).
 */
export const MAX_LIMIT_SERIES = 1000;

/**
 * How long a run waited to start, ms: from when it became due, the later of its `available_at` (its
 * slot plus jitter, or the end of a retry's backoff) and its creation, to its start. A run created
 * with a slot already in the past (a trigger for a past instant, a catch-up slot, a backfill) was not
 * waiting for the scheduler before it existed, so that time is not scheduling delay; a replay is
 * available from the replay on. Without a creation time (a run claimed over HTTP that the server
 * did not read it for), from `available_at`.
 */
export function schedulingDelayMs(run: { availableAt: Date; createdAt?: Date }, startMs: number): number {
  const dueMs = Math.max(run.availableAt.getTime(), run.createdAt?.getTime() ?? Number.NEGATIVE_INFINITY);
  return Math.max(0, startMs - dueMs);
}

export class Metrics {
  readonly registry = new Registry();
  readonly schedulingDelay = new Histogram({
    name: 'tock_scheduling_delay_seconds',
    help: 'Start of a run minus when it became due: the later of its available_at and its creation (a run triggered or materialised for a past slot counts from its creation), by pool',
    labelNames: ['pool'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly runsByState = new Gauge({
    name: 'tock_runs',
    help: `Runs by state (a sample at most ${METRICS_SAMPLE_MS / 1000} s old; above ${EXACT_COUNT_BELOW.toLocaleString('en')} runs, succeeded is the table's estimated rows less the other states)`,
    labelNames: ['state'],
    registers: [this.registry],
  });
  readonly readyDepth = new Gauge({
    name: 'tock_ready_runs',
    help: `Claimable pending runs by priority class (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['priority_class'],
    registers: [this.registry],
  });
  readonly unservedRuns = new Gauge({
    name: 'tock_unserved_runs',
    help: `Claimable runs that no live worker serves: none has their pool, handler and tenant (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    registers: [this.registry],
  });
  readonly limits = new Gauge({
    name: 'tock_limits',
    help: `Limits sampled (named, tenants' and jobs' own); at most ${MAX_LIMIT_SERIES} have tock_limit_* series (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    registers: [this.registry],
  });
  readonly limitTokens = new Gauge({
    name: 'tock_limit_tokens',
    help: `Tokens a claim could take from a limit at the sample's instant: its bucket refilled, but no more than its one-second window has left (max(burst, ceil(rate)) starts a second); only limits with a rate (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['tenant', 'key'],
    registers: [this.registry],
  });
  readonly limitSlotsInUse = new Gauge({
    name: 'tock_limit_slots_in_use',
    help: `Concurrency slots of a limit held by running runs (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['tenant', 'key'],
    registers: [this.registry],
  });
  readonly limitMaxConcurrency = new Gauge({
    name: 'tock_limit_max_concurrency',
    help: `A limit's concurrency cap; only limits with one (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['tenant', 'key'],
    registers: [this.registry],
  });
  readonly limitHeldRuns = new Gauge({
    name: 'tock_limit_held_runs',
    help: `Claimable-by-time runs a limit holds back while it is exhausted (no whole token, or every slot in use); 0 while it is not; counted among the tenant's ${HELD_SCAN.toLocaleString('en')} longest-due queued runs at most (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['tenant', 'key'],
    registers: [this.registry],
  });
  readonly tableDeadTuples = new Gauge({
    name: 'tock_table_dead_tuples',
    help: `Dead row versions of one of Tock's tables that no vacuum has reclaimed yet, the server's estimate (pg_stat_user_tables.n_dead_tup; a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['table'],
    registers: [this.registry],
  });
  readonly tableLiveTuples = new Gauge({
    name: 'tock_table_live_tuples',
    help: `Live rows of one of Tock's tables, the server's estimate (pg_stat_user_tables.n_live_tup; a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['table'],
    registers: [this.registry],
  });
  readonly tableHotUpdateRatio = new Gauge({
    name: 'tock_table_hot_update_ratio',
    help: `Share of a table's row updates that were HOT (no index written), 0 to 1, since the server's statistics were reset; no series while the table has had no update (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['table'],
    registers: [this.registry],
  });
  readonly tableBytes = new Gauge({
    name: 'tock_table_bytes',
    help: `Size of one of Tock's tables with its indexes and TOAST, bytes (pg_total_relation_size; a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['table'],
    registers: [this.registry],
  });
  readonly tableLastAutovacuum = new Gauge({
    name: 'tock_table_last_autovacuum_timestamp_seconds',
    help: `When the autovacuum last vacuumed one of Tock's tables (Unix seconds); no series while it has not since the server's statistics were reset (a sample at most ${METRICS_SAMPLE_MS / 1000} s old)`,
    labelNames: ['table'],
    registers: [this.registry],
  });
  readonly claims = new Counter({
    name: 'tock_claims_total',
    help: 'Runs claimed',
    labelNames: ['pool'],
    registers: [this.registry],
  });
  readonly leaseReclaims = new Counter({
    name: 'tock_lease_reclaims_total',
    help: 'Runs whose lease expired and the reaper took back',
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: 'tock_retries_total',
    help: 'Failed attempts requeued for another attempt',
    registers: [this.registry],
  });
  readonly deadLetters = new Counter({
    name: 'tock_dead_letters_total',
    help: 'Runs dead-lettered',
    registers: [this.registry],
  });
  readonly runsPruned = new Counter({
    name: 'tock_runs_pruned_total',
    help: 'Finished runs deleted past their retention, by the state they ended in',
    labelNames: ['state'],
    registers: [this.registry],
  });
  readonly notificationDeliveries = new Counter({
    name: 'tock_notification_deliveries_total',
    help: 'Attempts to deliver a webhook notification, by outcome: delivered (2xx), retry (to be tried again), failed (given up)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly tickDuration = new Histogram({
    name: 'tock_tick_duration_seconds',
    help: 'Duration of one scheduler tick',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly tickBatch = new Histogram({
    name: 'tock_tick_batch_size',
    help: 'Due jobs handled by one tick',
    buckets: [0, 1, 10, 100, 1000, 10000],
    registers: [this.registry],
  });
  readonly backlog = new Gauge({
    name: 'tock_scheduler_backlog_jobs',
    help: "Jobs due on this node's shards whose runs are not materialised yet (a herd draining)",
    registers: [this.registry],
  });
  readonly shardsOwned = new Gauge({
    name: 'tock_shards_owned',
    help: 'Shard leases this scheduler node holds',
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: 'tock_http_request_duration_seconds',
    help: 'API request duration by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30],
    registers: [this.registry],
  });

  /** The per-job top N gauges from run history (`job-metrics.ts`). */
  readonly jobs: JobGauges;

  /** The pools that have a label of their own (at most MAX_POOL_LABELS). */
  private readonly poolLabels = new Set<string>();

  constructor(
    options: {
      processMetrics?: boolean;
      /** The per-job top N gauges: how many jobs, over which window (defaults in `job-metrics.ts`). */
      jobGauges?: JobGaugeOptions;
    } = {},
  ) {
    this.jobs = new JobGauges(this.registry, options.jobGauges);
    // prom-client's default metrics are named process_* and nodejs_* already: `tock_` makes them
    // tock_process_cpu_seconds_total, not tock_process_process_cpu_seconds_total.
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'tock_' });
  }

  /** A run started (or, over HTTP, was handed to its worker) at `startMs`: counts it and its scheduling delay. */
  runStarted(run: { pool: string; availableAt: Date; createdAt?: Date }, startMs: number): void {
    const label = this.poolLabel(run.pool);
    this.claims.inc({ pool: label });
    this.schedulingDelay.observe({ pool: label }, schedulingDelayMs(run, startMs) / 1000);
  }

  /** A new sample of the limits (at most MAX_LIMIT_SERIES, of `total`): the limits gone lose their series. */
  setLimits(sample: readonly LimitGauge[], total: number): void {
    for (const g of [this.limitTokens, this.limitSlotsInUse, this.limitMaxConcurrency, this.limitHeldRuns])
      g.reset();
    this.limits.set(total);
    for (const l of sample) {
      const labels = { tenant: l.tenantId, key: l.key };
      if (l.tokens !== null) this.limitTokens.set(labels, l.tokens);
      if (l.maxConcurrency !== null) this.limitMaxConcurrency.set(labels, l.maxConcurrency);
      this.limitSlotsInUse.set(labels, l.inUse);
      this.limitHeldRuns.set(labels, l.heldRuns);
    }
  }

  /**
   * A new sample of Tock's tables: a table missing from it (dropped) loses its series. The HOT ratio
   * of a table with no update is no number (0/0): it has no series rather than a NaN, or a 0 that
   * would read as "every update wrote its indexes".
   */
  setTableStats(sample: readonly TableStats[]): void {
    for (const g of [
      this.tableDeadTuples,
      this.tableLiveTuples,
      this.tableHotUpdateRatio,
      this.tableBytes,
      this.tableLastAutovacuum,
    ])
      g.reset();
    for (const t of sample) {
      const labels = { table: t.table };
      this.tableDeadTuples.set(labels, t.deadTuples);
      this.tableLiveTuples.set(labels, t.liveTuples);
      this.tableBytes.set(labels, t.bytes);
      if (t.updates > 0) this.tableHotUpdateRatio.set(labels, Math.min(1, t.hotUpdates / t.updates));
      if (t.lastAutovacuumAt !== null)
        this.tableLastAutovacuum.set(labels, t.lastAutovacuumAt.getTime() / 1000);
    }
  }

  /** `pool` itself while fewer than MAX_POOL_LABELS pools have a label, else `other`. */
  poolLabel(pool: string): string {
    if (this.poolLabels.has(pool)) return pool;
    if (this.poolLabels.size >= MAX_POOL_LABELS) return OTHER_POOL_LABEL;
    this.poolLabels.add(pool);
    return pool;
  }
}

/**
 * Fills the run, limit, table and per-job gauges from the database: one sample (runs by state,
 * ready runs by priority, unserved runs, the limits, Tock's tables, the recent window's jobs, the
 * jobs whose last success is oldest) at most every \`intervalMs\`, started by a
 * scrape that finds the last one older. Scrapes meanwhile get the gauges as they are; the database
 * sees one read per interval whatever the scrape rate, even while failing. A scrape that starts a
 * sample, or comes while one is read, waits for it at most \`waitMs\` once there is an earlier
 * sample to show (the first is always waited for): on a large history a sample takes tens of ms,
 * and the scrape then answers the previous sample rather than wait.
 */
export class RunGaugeSampler {
  private lastStartMs = Number.NEGATIVE_INFINITY;
  private inFlight: Promise<void> | null = null;
  /** A sample has been read: a scrape may show it instead of waiting for the next. */
  private sampled = false;

  constructor(
    private readonly o: {
      store: Pick<
        Store,
        | 'sampleRunCounts'
        | 'readyDepth'
        | 'unservedRuns'
        | 'limitGauges'
        | 'tableStats'
        | 'recentJobDelays'
        | 'recentMisfires'
        | 'jobLastSuccesses'
      >;
      clock: Clock;
      metrics: Metrics;
      /** Default METRICS_SAMPLE_MS. */
      intervalMs?: number;
      /** Longest wait of a scrape for a sample being read, once an earlier one exists, ms. Default 25. */
      waitMs?: number;
    },
  ) {}

  /**
   * Reads a new sample if the last is older than the interval, and waits for the read in flight
   * (at most \`waitMs\` when an earlier sample exists); rejects if that read fails within the wait.
   */
  refresh(): Promise<void> {
    const read = this.inFlight ?? this.start();
    if (read === null) return Promise.resolve();
    if (!this.sampled) return read;
    const waited = new AbortController();
    return Promise.race([read, this.o.clock.sleep(this.o.waitMs ?? 25, waited.signal)]).finally(() =>
      waited.abort(),
    );
  }

  /** Starts a read when the last started an interval ago; null when it is not due. */
  private start(): Promise<void> | null {
    const now = this.o.clock.nowMs();
    if (now - this.lastStartMs < (this.o.intervalMs ?? METRICS_SAMPLE_MS)) return null;
    this.lastStartMs = now;
    const read = this.read(now).finally(() => {
      this.inFlight = null;
    });
    // A scrape that stopped waiting does not hear a failure: it showed the last sample.
    read.catch(() => {});
    this.inFlight = read;
    return read;
  }

  private async read(now: number): Promise<void> {
    const { store, metrics } = this.o;
    const { windowMs, topJobs } = metrics.jobs;
    const recent = { now, windowMs, limit: topJobs };
    const [counts, ready, unserved, limits, tables, jobs, misfires, successes] = await Promise.all([
      store.sampleRunCounts(),
      store.readyDepth({ now }),
      store.unservedRuns({ now, limit: 1 }),
      store.limitGauges({ now, limit: MAX_LIMIT_SERIES }),
      store.tableStats(),
      store.recentJobDelays(recent),
      store.recentMisfires(recent),
      store.jobLastSuccesses({ now, limit: topJobs }),
    ]);
    metrics.jobs.set(jobs, misfires, successes);
    metrics.setLimits(limits.limits, limits.total);
    metrics.setTableStats(tables);
    metrics.unservedRuns.set(unserved.runs);
    for (const [state, n] of Object.entries(counts.counts)) metrics.runsByState.set({ state }, n);
    metrics.readyDepth.reset();
    const byClass = new Map<number, number>();
    for (const q of ready) byClass.set(q.priority, (byClass.get(q.priority) ?? 0) + q.ready);
    for (const [priority, n] of byClass) metrics.readyDepth.set({ priority_class: String(priority) }, n);
    this.sampled = true;
  }
}
