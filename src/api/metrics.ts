/**
 * Prometheus metrics (prom-client), one registry per process. The API records request durations;
 * the runtime feeds scheduler and worker events in through the methods below.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  readonly schedulingDelay = new Histogram({
    name: 'tock_scheduling_delay_seconds',
    help: 'Start of a run minus the time it became available (available_at), by pool',
    labelNames: ['pool'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly runsByState = new Gauge({
    name: 'tock_runs',
    help: 'Runs by state (sampled at scrape time)',
    labelNames: ['state'],
    registers: [this.registry],
  });
  readonly readyDepth = new Gauge({
    name: 'tock_ready_runs',
    help: 'Claimable pending runs by priority class (sampled at scrape time)',
    labelNames: ['priority_class'],
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

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false)
      collectDefaultMetrics({ register: this.registry, prefix: 'tock_process_' });
  }

  /** A run started (claimed) at `startMs`; it had been claimable since `availableAtMs`. */
  runStarted(pool: string, availableAtMs: number, startMs: number): void {
    this.claims.inc({ pool });
    this.schedulingDelay.observe({ pool }, Math.max(0, startMs - availableAtMs) / 1000);
  }
}
