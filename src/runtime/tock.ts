/**
 * `createTock()`: Tock inside an application's own process — the scheduler loops, a worker running
 * the application's handlers, and (if asked) the HTTP API — on one database. It composes the same
 * pieces as `tock dev` and `tock server` (`openDatabase`, `databaseClock`, `createScheduler`,
 * `startApi`, `logRuns`) and adds the job operations an application needs, validating their input
 * here, at the edge, before the store writes anything.
 *
 * Lifecycle: `start()` opens (and migrates) the database, then starts the parts; `stop()` drains
 * the worker (running handlers get `graceMs`), stops the API and the loops, then closes what
 * `start()` opened — never a pool the application passed in.
 */
import type pg from 'pg';
import pino, { type Logger } from 'pino';
import { Metrics } from '../api/index.js';
import {
  type Clock,
  checkAgingStep,
  DEFAULT_AGING_STEP_MS,
  type JobInput,
  OffsetClock,
  ValidationError,
  validateId,
  validateJobs,
} from '../core/index.js';
import type { ClockSync } from '../scheduler/index.js';
import { JsonlArchive, migrate, PostgresStore, type Run, type UpsertChange } from '../store/index.js';
import { type Handler, type JobDefinition, servingDefinitions, Worker } from '../worker/index.js';
import { databaseClock, type OpenDatabase, openDatabase } from './database.js';
import { isLoopback } from './dev.js';
import { createScheduler, type RunningApi, type Scheduler, startApi } from './services.js';
import { defaultNodeId, logRuns } from './worker.js';

/** Where Tock keeps its tables. */
export type TockDatabase =
  /** A PostgreSQL connection string. */
  | string
  | {
      /** A PostgreSQL connection string; unset: embedded PostgreSQL under `dataDir`. */
      url?: string;
      /** Embedded PostgreSQL's data directory (when no `url`). Default `./.tock`. */
      dataDir?: string;
      /** Schema for Tock's tables, created if missing. Default: the server's search_path. */
      schema?: string;
      /** Connections in Tock's pool. Default 20. */
      poolSize?: number;
    }
  /** A pool of yours (its search_path decides the schema): Tock migrates it and never ends it. */
  | { pool: pg.Pool };

/** The scheduler's settings; each default is `tock server`'s. */
export interface TockSchedulerOptions {
  /** Pause between ticks, ms. Default 500. */
  tickMs?: number;
  /** Materialise runs this far before their slot, ms. Default 1000. */
  lookaheadMs?: number;
  /** Most due jobs per tick. Default 1000. */
  batchSize?: number;
  /** This node's leases on its shards of the job space, ms. Default 10000. */
  shardLeaseMs?: number;
  /** Refuse to tick or reap while the database clock is less certain than this, ms. Default 500. */
  maxClockUncertaintyMs?: number;
  /** Pause between passes of the pruner (retention), ms. Default 60000. */
  pruneIntervalMs?: number;
  /**
   * A directory the pruned runs are written to before they are deleted, as JSON Lines files per
   * UTC day of their slots (`--prune-archive`; made if missing). Default: none.
   */
  pruneArchiveDir?: string;
}

/** The in-process worker's settings (see `WorkerOptions`). */
export interface TockWorkerOptions {
  /** Pool to claim from. Default `default`. */
  pool?: string;
  /** Most runs executing at once. Default 10. */
  concurrency?: number;
  /**
   * Runs held claimed beyond `concurrency`: `auto` (about 100 ms of the worker's recent pace) or a
   * fixed number from 0 to 1000 (Worker `prefetch`). Default `auto`.
   */
  prefetch?: number | 'auto';
  /** Claim runs this long before they are due, ms. Default 250. */
  claimAheadMs?: number;
  /** Wait between claims when idle, ms. Default 1000. */
  pollIntervalMs?: number;
  /** Time running handlers get to finish on `stop()`, ms. Default 10000. */
  graceMs?: number;
}

export interface TockOptions {
  /** The database. */
  database: TockDatabase;
  /** Handlers by name, run by this process's worker. Default none (then no worker runs). */
  handlers?: Record<string, Handler>;
  /**
   * Jobs defined in code (`defineJob`): upserted by `start()` (an upsert, so starting again with the
   * same definitions changes nothing) and their handlers served beside `handlers` (a name in both
   * is a `ValidationError`). Default none.
   */
  jobs?: readonly JobDefinition[];
  /** Run the scheduler (tick loop, reaper, shard leases): `false` to leave it to other nodes. Default `true`. */
  scheduler?: boolean | TockSchedulerOptions;
  /** Run a worker for `handlers`: `false` not to. Default `true` when `handlers` has any. */
  worker?: boolean | TockWorkerOptions;
  /**
   * Serve the HTTP API (`/v1`, `/healthz`, `/metrics`) on this port (0: a free one; see `url`).
   * Default: no API.
   */
  api?: {
    port: number;
    /** Address to bind. Default `127.0.0.1`. */
    host?: string;
    /** `keys`: every request needs an API key; `open`: none (loopback only, as `tock dev`). Default `keys`. */
    auth?: 'keys' | 'open';
  };
  /** URL prefixes webhook notifications may go to (`http://127.0.0.1:`), for the API and the notifier. Default none. */
  notifyAllow?: readonly string[];
  /** Time for every part. Default: the database's clock, followed by measuring the offset to it. */
  clock?: Clock;
  /** Default: a silent pino logger. */
  logger?: Logger;
  /** Tenant of the job operations. Default `default`. */
  tenantId?: string;
  /** Lease of a run whose job sets none, ms. Default 30000. */
  leaseMs?: number;
  /**
   * Priority ageing step, ms: each step a run waits adds one to its priority, so a run of priority
   * p is claimed before any run of priority q that became available more than (q − p) steps after
   * it. 1000 (1 s) to 86400000 (1 day). Every node on the database (`tock server --aging-step`,
   * `tock worker --aging-step`, other `createTock`s) must use the same. Default 60000.
   */
  agingStepMs?: number;
}

/** What `upsertJobs` did to one job. */
export interface JobChange {
  jobId: string;
  change: UpsertChange;
}

/** Tock running in this process: made by `createTock`, started by `start()`. */
export interface Tock {
  /** Opens and migrates the database, then starts the scheduler, the API and the worker. */
  start(): Promise<void>;
  /** Drains the worker, stops the API and the loops, closes the database Tock opened. Idempotent. */
  stop(): Promise<void>;
  /** The API's URL once started with `api`; otherwise null. */
  readonly url: string | null;
  /** The worker once started (its events: `run:succeeded`, `run:failed`, …); otherwise null. */
  readonly worker: Worker | null;
  /**
   * Creates or updates up to 1000 jobs at once; an upsert, so registering the same definitions
   * again changes nothing. Validates every job first: one bad job refuses all (`ValidationError`
   * naming `jobs[i]`) and nothing is written.
   */
  upsertJobs(jobs: readonly JobInput[]): Promise<JobChange[]>;
  /**
   * A run of the job now (or for `scheduledFor`), whatever its schedule, with `payload` in place of
   * the job's when given (any JSON value, at most 64 KiB; default the job's). `ConflictError` if that
   * slot has one.
   */
  trigger(jobId: string, options?: { scheduledFor?: Date; payload?: unknown }): Promise<Run>;
}

/** What `start()` opened, for the job operations and `stop()`. */
interface Running {
  store: PostgresStore;
  clock: Clock;
  db: OpenDatabase | null;
  sync?: ClockSync;
  scheduler?: Scheduler | null;
  api?: RunningApi;
  worker?: Worker;
}

/** The parts as asked for, defaults applied; refuses a contradiction before anything starts. */
function resolveParts(o: TockOptions) {
  for (const name of Object.keys(o.handlers ?? {})) validateId(name, `handler name "${name}"`);
  const { jobs, handlers } = servingDefinitions(o.jobs ?? [], o.handlers);
  const hasHandlers = Object.keys(handlers).length > 0;
  if (o.worker && !hasHandlers)
    throw new ValidationError('a worker needs handlers: give `handlers` or `jobs`');
  // Without keys anyone who reaches the port is a cluster-admin: as `tock dev`, loopback only.
  const host = o.api?.host ?? '127.0.0.1';
  if (o.api?.auth === 'open' && !isLoopback(host))
    throw new ValidationError(
      `an API without keys (auth 'open') binds to loopback only; host ${host} is not`,
      {
        field: 'api.host',
      },
    );
  return {
    handlers,
    jobs: jobs.length > 0 ? validateJobs(jobs) : [],
    scheduler: o.scheduler === false ? null : o.scheduler === true ? {} : (o.scheduler ?? {}),
    worker: o.worker === false || !hasHandlers ? null : o.worker === true ? {} : (o.worker ?? {}),
    tenantId: validateId(o.tenantId ?? 'default', 'tenantId'),
    agingStepMs: checkAgingStep(o.agingStepMs ?? DEFAULT_AGING_STEP_MS),
  };
}

/** Opens the database `o.database` names (or adopts the given pool) and migrates it. */
async function open(
  o: TockOptions,
  logger: Logger,
  idleInTransactionMs?: number,
): Promise<{ pool: pg.Pool; db: OpenDatabase | null }> {
  const d = o.database;
  if (typeof d === 'object' && 'pool' in d) {
    await migrate(d.pool);
    return { pool: d.pool, db: null };
  }
  const given = typeof d === 'string' ? { url: d } : d;
  const db = await openDatabase({
    databaseUrl: given.url,
    dataDir: given.dataDir,
    schema: given.schema,
    poolSize: given.poolSize,
    logger,
    idleInTransactionMs,
  });
  return { pool: db.pool, db };
}

/** Builds Tock from `options`; nothing connects until `start()`. */
export function createTock(options: TockOptions): Tock {
  return new LocalTock(options);
}

/** `Tock` in this process: the parts of `options`, each set on `running` once it runs. */
class LocalTock implements Tock {
  private readonly parts: ReturnType<typeof resolveParts>;
  private readonly logger: Logger;
  private running: Running | null = null;
  private starting: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;

  constructor(private readonly options: TockOptions) {
    this.parts = resolveParts(options);
    this.logger = options.logger ?? pino({ level: 'silent' });
  }

  get url(): string | null {
    return this.running?.api?.url ?? null;
  }

  get worker(): Worker | null {
    return this.running?.worker ?? null;
  }

  start(): Promise<void> {
    if (this.stopping) return Promise.reject(new Error('Tock was stopped: create another'));
    this.starting ??= this.startAll();
    return this.starting;
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.starting?.catch(() => {});
      if (this.running) await this.stopParts(this.running);
    })();
    return this.stopping;
  }

  async upsertJobs(jobs: readonly JobInput[]): Promise<JobChange[]> {
    const checked = validateJobs(jobs);
    const r = this.started();
    const { changes } = await r.store.upsertJobs({
      tenantId: this.parts.tenantId,
      jobs: checked,
      now: r.clock.nowMs(),
    });
    return changes;
  }

  async trigger(jobId: string, o: { scheduledFor?: Date; payload?: unknown } = {}): Promise<Run> {
    validateId(jobId, 'job_id');
    const at = o.scheduledFor;
    if (at !== undefined && !(at instanceof Date && Number.isFinite(at.getTime())))
      throw new ValidationError('scheduledFor must be a valid Date', { field: 'scheduled_for' });
    const r = this.started();
    return r.store.triggerRun({
      tenantId: this.parts.tenantId,
      jobId,
      scheduledFor: at?.getTime(),
      payload: o.payload,
      now: r.clock.nowMs(),
    });
  }

  private started(): Running {
    if (!this.running || this.stopping) throw new Error('Tock is not running: call start() first');
    return this.running;
  }

  /** Opens the database, follows its clock (unless given one), then starts the parts. */
  private async startAll(): Promise<void> {
    const { options, logger, parts } = this;
    const shardLeaseMs = parts.scheduler?.shardLeaseMs ?? 10_000;
    const dir = parts.scheduler?.pruneArchiveDir;
    const archive = dir === undefined ? undefined : await JsonlArchive.open(dir);
    const { pool, db } = await open(options, logger, parts.scheduler ? shardLeaseMs : undefined);
    const store = new PostgresStore(pool, {
      leaseMs: options.leaseMs,
      agingStepMs: parts.agingStepMs,
      archive,
    });
    const r: Running = { store, clock: options.clock ?? new OffsetClock(), db };
    try {
      if (!options.clock) {
        const measured = await databaseClock((local) => store.sampleClock(local), logger, {
          maxUncertaintyMs: parts.scheduler?.maxClockUncertaintyMs,
        });
        r.clock = measured.clock;
        r.sync = measured.sync;
      }
      if (parts.jobs.length > 0)
        await store.upsertJobs({ tenantId: parts.tenantId, jobs: parts.jobs, now: r.clock.nowMs() });
      await this.startParts(r, pool, shardLeaseMs);
    } catch (err) {
      await this.stopParts(r).catch(() => {});
      throw err;
    }
    this.running = r;
  }

  /** The scheduler's loops, the API, then the worker; each is set on `r` once it runs. */
  private async startParts(r: Running, pool: pg.Pool, shardLeaseMs: number): Promise<void> {
    const { store, clock } = r;
    const { options, logger } = this;
    const sync = r.sync ?? null;
    const metrics = new Metrics();
    let url = '';
    const s = this.parts.scheduler;
    const notify = { allow: options.notifyAllow ?? [] };
    const scheduler = s
      ? createScheduler({
          store,
          clock,
          sync,
          logger,
          metrics,
          tick: {
            intervalMs: s.tickMs ?? 500,
            lookaheadMs: s.lookaheadMs ?? 1000,
            batchSize: s.batchSize ?? 1000,
          },
          shards: { leaseMs: shardLeaseMs, nodeId: defaultNodeId('scheduler') },
          prune: s.pruneIntervalMs === undefined ? undefined : { intervalMs: s.pruneIntervalMs },
          notify,
          url: () => url,
        })
      : null;
    if (options.api) {
      const a = options.api;
      const api = { host: a.host ?? '127.0.0.1', port: a.port, auth: a.auth ?? ('keys' as const) };
      r.api = await startApi({ store, pool, clock, logger, metrics, api, notify });
      url = r.api.url;
    }
    // Without the scheduler, `sync` still keeps the worker on the database's clock.
    if (scheduler) await scheduler.start();
    else sync?.start();
    r.scheduler = scheduler;
    if (this.parts.worker) r.worker = this.startWorker(r, this.parts.worker, metrics);
  }

  /** A worker for the handlers, logging each run (as `tock worker` does) and feeding the API's metrics. */
  private startWorker({ store, clock }: Running, w: TockWorkerOptions, metrics: Metrics): Worker {
    const { logger } = this;
    const worker = new Worker({
      store,
      clock,
      logger,
      handlers: this.parts.handlers,
      pool: w.pool,
      concurrency: w.concurrency,
      prefetch: w.prefetch,
      claimAheadMs: w.claimAheadMs,
      pollIntervalMs: w.pollIntervalMs,
      clockState:
        clock instanceof OffsetClock
          ? () => ({ offsetMs: clock.offset.offsetMs, uncertaintyMs: clock.offset.uncertaintyMs })
          : undefined,
    });
    logRuns(worker, logger, clock);
    worker.on('run:started', (run) => metrics.runStarted(run, clock.nowMs()));
    worker.on('run:failed', (_r, f) => (f.state === 'dead' ? metrics.deadLetters : metrics.retries).inc());
    worker.start();
    return worker;
  }

  /** Stops what runs, in the reverse order of `startParts`; each step even if one before failed. */
  private async stopParts(r: Running): Promise<void> {
    const errors: unknown[] = [];
    const step = async (f: () => Promise<unknown> | undefined) => {
      await Promise.resolve()
        .then(f)
        .catch((err: unknown) => errors.push(err));
    };
    await step(() => r.worker?.stop(this.parts.worker?.graceMs ?? 10_000));
    await step(() => r.api?.stop());
    await step(() => (r.scheduler ? r.scheduler.stop() : r.sync?.stop()));
    await step(() => r.db?.close());
    if (errors.length > 0) throw errors[0];
  }
}
