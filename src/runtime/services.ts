/**
 * The long-running parts a `tock` process can run, wired together: the API (listening), the
 * scheduler loops (tick, reaper, clock sync, idempotency pruning) and the metrics they feed.
 * `tock server` runs the API and the scheduler; `tock dev` adds an in-process worker.
 */

import type pg from 'pg';
import type { Logger } from 'pino';
import { type App, buildApp, type Metrics } from '../api/index.js';
import { type OffsetClock, Periodic } from '../core/index.js';
import { type ClockSync, Reaper, TickLoop } from '../scheduler/index.js';
import { type PostgresStore, pendingMigrations } from '../store/index.js';

export interface ServicesOptions {
  store: PostgresStore;
  pool: pg.Pool;
  clock: OffsetClock;
  sync: ClockSync;
  logger: Logger;
  metrics: Metrics;
  api: { host: string; port: number; auth: 'keys' | 'open'; quota?: { perSecond: number; burst: number } };
  tick: { intervalMs: number; lookaheadMs: number; batchSize: number };
}

export interface Services {
  app: App;
  url: string;
  ticks: TickLoop;
  reaper: Reaper;
  stop(): Promise<void>;
}

const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

export async function startServices(o: ServicesOptions): Promise<Services> {
  const { store, clock, logger, metrics } = o;
  const refusal = () => o.sync.refusal();
  const ticks = new TickLoop({ store, clock, logger, refusal, ...o.tick });
  const reaper = new Reaper({ store, clock, logger, refusal });
  ticks.on('tick', (t) => {
    metrics.tickBatch.observe(t.jobs);
    metrics.tickDuration.observe(t.durationMs / 1000);
  });
  reaper.on('reap', (r) => {
    metrics.leaseReclaims.inc(r.requeued.length + r.dead.length);
    metrics.retries.inc(r.requeued.length);
    metrics.deadLetters.inc(r.dead.length);
  });
  const pruning = new Periodic({
    clock,
    intervalMs: 10 * 60_000,
    step: async () =>
      (await store.pruneIdempotency({ now: clock.nowMs(), ttlMs: IDEMPOTENCY_TTL_MS, batchSize: 5000 })) ===
      5000,
    onError: (err) => logger.warn({ err }, 'could not prune idempotency keys; retrying'),
  });
  const app = await buildApp({
    store,
    clock,
    logger,
    metrics,
    auth: o.api.auth,
    quota: o.api.quota,
    readiness: async () => {
      const pending = await pendingMigrations(o.pool);
      return { database: true, migrations: pending.length === 0 };
    },
  });
  const url = await app.listen({ host: o.api.host, port: o.api.port });
  o.sync.start();
  ticks.start();
  reaper.start();
  pruning.start();
  return {
    app,
    url,
    ticks,
    reaper,
    async stop() {
      await app.close();
      await Promise.all([ticks.stop(), reaper.stop(), pruning.stop(), o.sync.stop()]);
    },
  };
}
