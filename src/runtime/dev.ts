/**
 * `tock dev`: everything in one process — the (embedded) database, migrations, the example jobs,
 * the tick loop, the reaper and a worker with the development handlers — logging each run as it
 * starts and ends. `stop()` drains the worker, stops the loops, then the database.
 */
import type { Logger } from 'pino';
import { Metrics } from '../api/index.js';
import { type Clock, formatDuration, type JobInput, type OffsetClock, validateJob } from '../core/index.js';
import type { ClockSync, TickLoop } from '../scheduler/index.js';
import { JsonlArchive, PostgresStore } from '../store/index.js';
import { type Handler, Worker } from '../worker/index.js';
import { databaseClock, type OpenDatabase, openDatabase } from './database.js';
import { devHandlers } from './dev-handlers.js';
import { loadHandlers } from './handlers-module.js';
import { readJobsFile } from './jobs-file.js';
import { startServices } from './services.js';
import { defaultNodeId, logRuns } from './worker.js';

export interface DevOptions {
  logger: Logger;
  /** Server to use instead of the embedded database. */
  databaseUrl?: string;
  /** Embedded data directory. Default `./.tock`. */
  dataDir?: string;
  /** Schema for Tock's tables. Default: the server's search_path. */
  schema?: string;
  /** Jobs registered at start (YAML or JSON). */
  jobsFile: string;
  /** A handlers module for the worker, as `tock worker --handlers` takes. */
  handlersModule?: string;
  /** A worker configuration (allow-list, HTTP and command executors), as `tock worker --config`. */
  configFile?: string;
  /** Default lease, ms. */
  leaseMs: number;
  /** Pause between ticks, ms. */
  tickMs: number;
  /** Materialise slots this far ahead, ms. */
  lookaheadMs: number;
  /** Misfire threshold of jobs that set none, ms (`PostgresStore` `misfireThresholdMs`). Default 60 s. */
  misfireThresholdMs?: number;
  /** Priority ageing step, ms (`PostgresStore` `agingStepMs`, 1 s to 1 day). Default 60 s. */
  agingStepMs?: number;
  /** Most due jobs per tick. */
  batchSize: number;
  /** This scheduler node's shard leases, ms. */
  shardLeaseMs: number;
  /** Pause between pruner passes, ms. Default 60000. */
  pruneIntervalMs?: number;
  /**
   * A directory the pruned runs are written to before they are deleted, as JSON Lines files per
   * UTC day of their slots (`--prune-archive`; made if missing). Default: none.
   */
  pruneArchiveDir?: string;
  /** URL prefixes webhook notifications may send to (`--notify-allow`). Default none. */
  notifyAllow?: readonly string[];
  /** Runs the worker executes at once. */
  concurrency: number;
  /** Runs held claimed beyond `concurrency`: `auto` or 0–1000 (Worker `prefetch`). Default `auto`. */
  prefetch?: number | 'auto';
  /** Claim runs this long before they are due, ms (Worker `claimAheadMs`). Default 250. */
  claimAheadMs?: number;
  /** Wait between claims when idle, ms. */
  pollMs: number;
  /** Time running handlers get to finish on stop, ms. */
  graceMs: number;
  /** Refuse to tick or reap while the database clock offset is less certain than this, ms. */
  maxClockUncertaintyMs: number;
  /** API address: loopback only. */
  host: string;
  /** API port; 0 picks a free one. */
  port: number;
  /** Prints the one `tock listening on …` line. */
  announce: (line: string) => void;
}

export const TENANT = 'default';

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export async function startDev(o: DevOptions): Promise<{ url: string; stop(): Promise<void> }> {
  const { logger } = o;
  refuseUnlessLoopback(o.host);
  const fileJobs = await readJobsFile(o.jobsFile);
  // Your handlers and executors, loaded before anything starts so a bad file changes nothing; a
  // name they share with a development handler replaces it. The jobs your module defines in code
  // are registered after the jobs file's.
  const own = o.handlersModule || o.configFile ? await loadHandlers(o) : { handlers: {}, jobs: [] };
  const jobs = [...fileJobs, ...own.jobs];
  const archive = o.pruneArchiveDir === undefined ? undefined : await JsonlArchive.open(o.pruneArchiveDir);
  const db = await openDevDatabase(o);
  try {
    const store = new PostgresStore(db.pool, {
      leaseMs: o.leaseMs,
      misfireThresholdMs: o.misfireThresholdMs,
      agingStepMs: o.agingStepMs,
      archive,
    });
    const { clock, sync } = await followDatabaseClock(store, o);
    await registerJobs(store, clock, jobs, logger);
    const metrics = new Metrics();
    const services = await startServices({
      store,
      pool: db.pool,
      clock,
      sync,
      logger,
      metrics,
      api: { host: o.host, port: o.port, auth: 'open' },
      tick: { intervalMs: o.tickMs, lookaheadMs: o.lookaheadMs, batchSize: o.batchSize },
      shards: { leaseMs: o.shardLeaseMs, nodeId: defaultNodeId('scheduler') },
      prune: o.pruneIntervalMs === undefined ? undefined : { intervalMs: o.pruneIntervalMs },
      notify: { allow: o.notifyAllow ?? [] },
    });
    const handlers = devAndOwnHandlers(clock, own.handlers, logger);
    const worker = createDevWorker(o, store, clock, handlers);
    logMaterialisedRuns(services.ticks, logger);
    // The same run lines as `tock worker` (with `duration_ms`), and the metrics the API serves.
    logRuns(worker, logger, clock);
    countRuns(worker, metrics, clock);
    worker.start();
    announceDev(o, { url: services.url, jobs: jobs.length, worker, handlers, database: db.where });
    return {
      url: services.url,
      async stop() {
        logger.info('stopping: draining the worker');
        await worker.stop(o.graceMs);
        await services.stop();
        await db.close();
        logger.info('stopped');
      },
    };
  } catch (err) {
    await db.close();
    throw err;
  }
}

function refuseUnlessLoopback(host: string): void {
  if (!isLoopback(host)) {
    throw new Error(
      `tock dev serves its API without keys, so it binds to loopback only; --host ${host} is not (use tock server)`,
    );
  }
}

function openDevDatabase(o: DevOptions): Promise<OpenDatabase> {
  return openDatabase({
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    logger: o.logger,
    exclusive: true,
    idleInTransactionMs: o.shardLeaseMs,
  });
}

/** Measures the database clock once (the scheduler keeps it measured) and logs where it stands. */
async function followDatabaseClock(
  store: PostgresStore,
  o: DevOptions,
): Promise<{ clock: OffsetClock; sync: ClockSync }> {
  const measured = await databaseClock((local) => store.sampleClock(local), o.logger, {
    maxUncertaintyMs: o.maxClockUncertaintyMs,
  });
  const { clock } = measured;
  o.logger.info(
    {
      offset_ms: Math.round(clock.offset.offsetMs),
      uncertainty_ms: Math.round(clock.offset.uncertaintyMs),
    },
    'following the database clock',
  );
  return measured;
}

/** Registers the jobs file's jobs one by one, logging whether each was created, updated or unchanged. */
async function registerJobs(
  store: PostgresStore,
  clock: Clock,
  jobs: readonly JobInput[],
  logger: Logger,
): Promise<void> {
  for (const job of jobs) {
    const { changes } = await store.upsertJobs({
      tenantId: TENANT,
      jobs: [validateJob(job)],
      now: clock.nowMs(),
      withJobs: true,
    });
    const { job: saved, change } = changes[0]!;
    logger.info(
      { job_id: saved.jobId, schedule: saved.schedule, next_run_at: saved.nextRunAt },
      `job ${change}`,
    );
  }
}

/** The development handlers, then yours: a name in both is yours, and the log says so. */
function devAndOwnHandlers(
  clock: Clock,
  own: Record<string, Handler>,
  logger: Logger,
): Record<string, Handler> {
  const builtIn = devHandlers(clock, Math.random);
  for (const name of Object.keys(own)) {
    if (Object.hasOwn(builtIn, name))
      logger.info({ handler: name }, 'your handler replaces the built-in one');
  }
  return { ...builtIn, ...own };
}

function createDevWorker(
  o: DevOptions,
  store: PostgresStore,
  clock: OffsetClock,
  handlers: Record<string, Handler>,
): Worker {
  return new Worker({
    store,
    clock,
    logger: o.logger,
    handlers,
    clockState: () => ({ offsetMs: clock.offset.offsetMs, uncertaintyMs: clock.offset.uncertaintyMs }),
    concurrency: o.concurrency,
    prefetch: o.prefetch,
    claimAheadMs: o.claimAheadMs,
    pollIntervalMs: o.pollMs,
  });
}

function logMaterialisedRuns(ticks: TickLoop, logger: Logger): void {
  ticks.on('tick', (t) => {
    for (const r of t.created)
      logger.info({ job_id: r.jobId, slot: r.scheduledFor.toISOString() }, 'run materialised');
  });
}

/** The in-process worker's runs, counted in the metrics the API serves. */
function countRuns(worker: Worker, metrics: Metrics, clock: Clock): void {
  worker.on('run:started', (r) => metrics.runStarted(r, clock.nowMs()));
  worker.on('run:failed', (_r, f) => (f.state === 'dead' ? metrics.deadLetters : metrics.retries).inc());
}

/** The warning that the API is open, the summary line, then the one `tock listening on …` line. */
function announceDev(
  o: DevOptions,
  running: { url: string; jobs: number; worker: Worker; handlers: Record<string, Handler>; database: string },
): void {
  o.logger.warn(
    { url: running.url },
    'the API runs without keys (tock dev, loopback only): anyone on this machine may use it',
  );
  o.logger.info(
    {
      jobs: running.jobs,
      lease: formatDuration(o.leaseMs),
      worker: running.worker.workerId,
      handlers: Object.keys(running.handlers),
      database: running.database,
    },
    'tock dev is running; Ctrl-C stops it',
  );
  o.announce(`tock listening on ${running.url}`);
}
