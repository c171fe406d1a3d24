/**
 * The long-running parts a `tock` process can run, wired together: the API (listening), the
 * scheduler loops (tick, reaper, clock sync, idempotency pruning) and the metrics they feed.
 * `tock server` runs the API and the scheduler (`startServices`); `tock dev` adds an in-process
 * worker; `createTock()` (tock.ts) runs either part on its own (`createScheduler`, `startApi`).
 */

import type pg from 'pg';
import type { Logger } from 'pino';
import {
  type App,
  buildApp,
  type HttpLimits,
  listenForRuns,
  type Metrics,
  RunGaugeSampler,
  RunWakeups,
} from '../api/index.js';
import { type Clock, OffsetClock, Periodic, REMOTE_WORKER_FORGET_MS } from '../core/index.js';
import { type ClockSync, Notifier, Pruner, Reaper, ShardManager, TickLoop } from '../scheduler/index.js';
import { type PostgresStore, pendingMigrations } from '../store/index.js';
import { startMetricsListener } from './metrics-listener.js';

export interface ServicesOptions {
  store: PostgresStore;
  pool: pg.Pool;
  clock: OffsetClock;
  sync: ClockSync;
  logger: Logger;
  metrics: Metrics;
  api: {
    host: string;
    port: number;
    auth: 'keys' | 'open';
    quota?: { perSecond: number; burst: number };
    workerQuota?: { perSecond: number; burst: number };
    /** Timeouts, connection and long-poll caps. Default `DEFAULT_HTTP_LIMITS`. */
    limits?: Partial<HttpLimits>;
  };
  /** A port on 127.0.0.1 serving `GET /metrics` without a key (0: a free one). Default: none. */
  metricsPort?: number;
  tick: { intervalMs: number; lookaheadMs: number; batchSize: number };
  /** This scheduler node's shard leases. */
  shards: { leaseMs: number; nodeId: string };
  /** The pruner's pause between passes, ms (`--prune-interval`). Default 60000. */
  prune?: { intervalMs: number };
  /**
   * Webhook notifications: the URL prefixes they may send to (`--notify-allow`), checked by the API
   * when one is written and by the notifier before each attempt. Default none: none can be written.
   */
  notify?: { allow: readonly string[] };
}

/** The scheduler's part of `ServicesOptions`: any clock, kept on the database's by `sync` if given. */
export interface SchedulerOptions
  extends Pick<ServicesOptions, 'store' | 'logger' | 'metrics' | 'tick' | 'shards' | 'prune' | 'notify'> {
  clock: Clock;
  /** Keeps `clock` on the database's and says when not to trust it; null: the caller's clock is trusted. */
  sync: ClockSync | null;
  /** The API's URL, recorded with this node for `tock status`. Default: none (''). */
  url?: () => string;
}

/** The scheduler loops of one node: built stopped; `start()` takes its first shards, then ticks. */
export interface Scheduler {
  ticks: TickLoop;
  reaper: Reaper;
  shards: ShardManager;
  pruner: Pruner;
  notifier: Notifier;
  start(): Promise<void>;
  /** Stops the loops, then gives the shards back so the other nodes take them at once. */
  stop(): Promise<void>;
}

/** The API's part of `ServicesOptions`. */
export type ApiOptions = Pick<
  ServicesOptions,
  'store' | 'pool' | 'logger' | 'metrics' | 'api' | 'metricsPort' | 'notify'
> & {
  clock: Clock;
};

/** The API, listening, with the LISTEN that wakes its long-polls and the optional metrics listener. */
export interface RunningApi {
  app: App;
  url: string;
  metricsUrl: string | null;
  stop(): Promise<void>;
}

export interface Services {
  app: App;
  url: string;
  /** The metrics listener's URL, when `metricsPort` was given. */
  metricsUrl: string | null;
  ticks: TickLoop;
  reaper: Reaper;
  shards: ShardManager;
  stop(): Promise<void>;
}

const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** A listen that failed, said as the option to change: "port 8080 on 127.0.0.1 is in use (--port)". */
function listenError(err: unknown, host: string, port: number, option: string): Error {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === 'EADDRINUSE')
    return new Error(
      `port ${port} on ${host} is in use by another process: stop it, or give another ${option}`,
    );
  if (code === 'EACCES')
    return new Error(`port ${port} on ${host} may not be opened by this user: give another ${option}`);
  if (code === 'EADDRNOTAVAIL')
    return new Error(`${host} is not an address of this machine: give another --host`);
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * The backlog of this node's shards (jobs already due whose runs are not materialised yet), every
 * 5 s; the same pass forgets nodes long silent.
 */
function measureBacklog(
  o: SchedulerOptions,
  shards: ShardManager,
  report: (backlog: number) => void,
): Periodic {
  const { store, clock, logger, metrics } = o;
  return new Periodic({
    clock,
    intervalMs: 5000,
    step: async () => {
      const owned = shards.owned();
      const perShard =
        owned.length > 0
          ? await store.dueBacklog({ now: clock.nowMs(), shards: owned })
          : new Map<number, number>();
      const backlog = [...perShard.values()].reduce((a, b) => a + b, 0);
      report(backlog);
      metrics.backlog.set(backlog);
      // Cluster nodes silent for an hour are long dead (their shards were taken), remote workers
      // silent for five of their liveness windows are gone: drop them from the list.
      await store.pruneNodes({
        before: clock.nowMs() - 3_600_000,
        remoteBefore: clock.nowMs() - REMOTE_WORKER_FORGET_MS,
      });
      return false;
    },
    onError: (err) => logger.warn({ err }, 'could not measure the backlog; retrying'),
  });
}

/** Idempotency keys older than a day are deleted, 5000 at a time, every 10 minutes. */
function pruneIdempotency({ store, clock, logger }: SchedulerOptions): Periodic {
  return new Periodic({
    clock,
    intervalMs: 10 * 60_000,
    step: async () =>
      (await store.pruneIdempotency({ now: clock.nowMs(), ttlMs: IDEMPOTENCY_TTL_MS, batchSize: 5000 })) ===
      5000,
    onError: (err) => logger.warn({ err }, 'could not prune idempotency keys; retrying'),
  });
}

/** The webhook notifier, counting each attempt by outcome. */
function createNotifier({ store, clock, logger, metrics, notify, sync }: SchedulerOptions): Notifier {
  const refusal = () => sync?.refusal() ?? null;
  const notifier = new Notifier({ store, clock, logger, refusal, allow: notify?.allow ?? [] });
  notifier.on('delivery', (d) =>
    metrics.notificationDeliveries.inc({ outcome: d.state === 'pending' ? 'retry' : d.state }),
  );
  return notifier;
}

/**
 * The tick loop, reaper, shard leases, backlog measure, idempotency pruning, run pruner
 * (retention) and notifier (webhooks) of one scheduler node, with the metrics they feed.
 */
export function createScheduler(o: SchedulerOptions): Scheduler {
  const { store, clock, logger, metrics, sync } = o;
  const refusal = () => sync?.refusal() ?? null;
  let backlog = 0;
  const shards: ShardManager = new ShardManager({
    store,
    clock,
    logger,
    refusal,
    nodeId: o.shards.nodeId,
    leaseMs: o.shards.leaseMs,
    clockState:
      clock instanceof OffsetClock
        ? () => ({ offsetMs: clock.offset.offsetMs, uncertaintyMs: clock.offset.uncertaintyMs })
        : undefined,
    info: (): Record<string, unknown> => ({
      pid: process.pid,
      url: o.url?.() ?? '',
      backlog,
      live_ms: o.shards.leaseMs,
    }),
  });
  const ticks = new TickLoop({ store, clock, logger, refusal, ...o.tick, fence: () => shards.fence() });
  shards.on('step', (s) => metrics.shardsOwned.set(s.owned.length));
  const backlogLoop = measureBacklog(o, shards, (n) => {
    backlog = n;
  });
  const reaper = new Reaper({ store, clock, logger, refusal });
  ticks.on('tick', (t) => {
    if (t.fencedOut.length > 0) shards.forget(t.fencedOut);
    metrics.tickBatch.observe(t.jobs);
    metrics.tickDuration.observe(t.durationMs / 1000);
  });
  reaper.on('reap', (r) => {
    metrics.leaseReclaims.inc(r.requeued.length + r.dead.length);
    metrics.retries.inc(r.requeued.length);
    metrics.deadLetters.inc(r.dead.length);
  });
  const pruning = pruneIdempotency(o);
  const pruner = new Pruner({
    store,
    clock,
    logger,
    refusal,
    owner: o.shards.nodeId,
    intervalMs: o.prune?.intervalMs,
  });
  pruner.on('batch', (b) => {
    for (const [state, n] of Object.entries(b.byState)) if (n) metrics.runsPruned.inc({ state }, n);
  });
  const notifier = createNotifier(o);
  return {
    ticks,
    reaper,
    shards,
    pruner,
    notifier,
    async start() {
      sync?.start();
      // The first shard step before the first tick: a node ticks only shards it holds.
      await shards
        .stepOnce()
        .catch((err: unknown) => logger.warn({ err }, 'first shard step failed; retrying'));
      shards.start();
      backlogLoop.start();
      ticks.start();
      reaper.start();
      pruning.start();
      pruner.start();
      notifier.start();
    },
    async stop() {
      await Promise.all([ticks, reaper, pruning, pruner, notifier, backlogLoop].map((loop) => loop.stop()));
      // After the last tick: give the shards back so the other nodes take them at once.
      await shards.stop();
      await sync?.stop();
    },
  };
}

/** Builds the API and listens; on a failure, nothing it opened is left open. */
export async function startApi(o: ApiOptions): Promise<RunningApi> {
  const { store, clock, logger, metrics } = o;
  // One LISTEN per process wakes every waiting long-poll of the API.
  const wakeups = new RunWakeups(clock);
  const stopListening = await listenForRuns((w, l) => store.listen(w, l), wakeups, logger);
  const runGauges = new RunGaugeSampler({ store, clock, metrics });
  let app: Awaited<ReturnType<typeof buildApp>> | null = null;
  let metricsListener: Awaited<ReturnType<typeof startMetricsListener>> | null = null;
  let url: string;
  try {
    app = await buildApp({
      store,
      clock,
      logger,
      metrics,
      runGauges,
      auth: o.api.auth,
      quota: o.api.quota,
      workerQuota: o.api.workerQuota,
      limits: o.api.limits,
      notificationAllow: o.notify?.allow,
      wakeups,
      readiness: async () => {
        const pending = await pendingMigrations(o.pool);
        return { database: true, migrations: pending.length === 0 };
      },
    });
    url = await app.listen({ host: o.api.host, port: o.api.port }).catch((err: unknown) => {
      throw listenError(err, o.api.host, o.api.port, '--port');
    });
    if (o.metricsPort !== undefined) {
      metricsListener = await startMetricsListener({
        metrics,
        sampler: runGauges,
        port: o.metricsPort,
        logger,
      }).catch((err: unknown) => {
        throw listenError(err, '127.0.0.1', o.metricsPort ?? 0, '--metrics-port');
      });
    }
  } catch (err) {
    // Nothing may keep a connection of the pool (the LISTEN) or a socket open, or the caller's
    // `db.close()` would wait for it forever and the process would hang instead of exiting.
    await app?.close().catch(() => {});
    await stopListening().catch(() => {});
    throw err;
  }
  const listening = app;
  return {
    app: listening,
    url,
    metricsUrl: metricsListener?.url ?? null,
    async stop() {
      await Promise.all([listening.close(), metricsListener?.close()]);
      await stopListening();
    },
  };
}

export async function startServices(o: ServicesOptions): Promise<Services> {
  let url = '';
  const scheduler = createScheduler({ ...o, url: () => url });
  const api = await startApi(o);
  url = api.url;
  await scheduler.start();
  return {
    app: api.app,
    url,
    metricsUrl: api.metricsUrl,
    ticks: scheduler.ticks,
    reaper: scheduler.reaper,
    shards: scheduler.shards,
    async stop() {
      await api.stop();
      await scheduler.stop();
    },
  };
}
