/**
 * `tock worker`: a process that pulls runs and executes handlers — the functions a handlers module
 * exports and the built-in executors (HTTP calls, commands) of a worker configuration file. It
 * reaches runs in one of two ways: straight from the database (`DATABASE_URL` or the embedded one;
 * time follows the database's clock), or through a Tock server's HTTP API (`--url`, `--key`), which
 * needs no database credentials on the worker's machine. Either way it logs each run as it starts
 * and ends, and `stop()` drains: no new claims, running handlers get the grace period, the rest are
 * aborted and their leases released for another worker.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import {
  HttpLeaseSource,
  type JobBody,
  TockApiError,
  TockClient,
  TockConnectionError,
} from '../client/index.js';
import {
  type Clock,
  formatDuration,
  type JobInput,
  jobInputToApi,
  type LeaseSource,
  OffsetClock,
  SystemClock,
  ValidationError,
  type ValidJob,
  validateJobs,
} from '../core/index.js';
import type { ClockSync } from '../scheduler/index.js';
import { PostgresStore } from '../store/index.js';
import { type Handler, Worker } from '../worker/index.js';
import { databaseClock, type OpenDatabase, openDatabase } from './database.js';
import { loadHandlers } from './handlers-module.js';

export interface WorkerRuntimeOptions {
  logger: Logger;
  /**
   * A JS module of handlers by name (its default export or its `handlers` export) and of jobs
   * defined in code (`defineJob`), which the worker upserts before it starts
   * (`runtime/handlers-module.ts` lists what it may export).
   */
  handlersModule?: string;
  /** A YAML worker configuration: the allow-list and the built-in executors. */
  configFile?: string;
  /** Resolves `handlersModule` and `configFile`. Default `process.cwd()`. */
  cwd?: string;
  /** Pool to claim from. */
  pool: string;
  /** Runs executed at once. */
  concurrency: number;
  /** Runs held claimed beyond `concurrency`: `auto` or 0–1000 (Worker `prefetch`). Default `auto`. */
  prefetch?: number | 'auto';
  /** Claim runs this long before they are due, ms (Worker `claimAheadMs`). Default 250. */
  claimAheadMs?: number;
  /** Time running handlers get to finish on stop, ms. */
  graceMs: number;
  /** Unique per process start. Default `worker-<host>-<pid>-<random>`. */
  workerId?: string;
  /** Wait between claims when idle, ms (a remote claim long-polls the server first). */
  pollMs: number;
  /** A Tock server to work through instead of the database. */
  url?: string;
  /** API key (role `worker`) for `url`. */
  key?: string;
  /** Database (when no `url`): a server, else the embedded one under `dataDir`. */
  databaseUrl?: string;
  dataDir?: string;
  schema?: string;
  /** Lease of a run whose job sets none, ms (direct connection only: a server applies its own). */
  leaseMs: number;
  /**
   * Priority ageing step of the retries it writes, ms (`PostgresStore` `agingStepMs`, 1 s to 1 day;
   * direct connection only: a server applies its own). Default 60 s.
   */
  agingStepMs?: number;
  /**
   * Claim only these tenants' runs (direct connection only: over `url` the key's tenant decides).
   * Default: every tenant's.
   */
  tenants?: readonly string[];
}

export interface RunningWorker {
  worker: Worker;
  /**
   * Resolves (never rejects) when the server refuses this worker's key while it runs (revoked, or
   * its role changed): a configuration error to exit on, not a failure to retry. Through `--url` only.
   */
  refused: Promise<Error>;
  stop(): Promise<void>;
}

/**
 * A server's answer that retrying cannot change: the key is wrong (401), lacks the role (403), or
 * the URL is not a Tock server's (another 4xx). Connection errors, timeouts, 408, 429 and 5xx are
 * worth retrying.
 */
export function refusedByServer(err: unknown): err is TockApiError {
  return (
    err instanceof TockApiError &&
    err.status >= 400 &&
    err.status < 500 &&
    err.status !== 408 &&
    err.status !== 429
  );
}

/** One line for a refused key: what the server said and what to check. */
function refusal(url: string, err: TockApiError): Error {
  const hint =
    err.status === 401 || err.status === 403
      ? ': check --key (TOCK_KEY): it needs the worker role in the tenant whose runs to work'
      : `: check --url (TOCK_URL) names a Tock server`;
  return new Error(`${url} refused this worker: ${err.status} ${err.code}: ${err.message}${hint}`);
}

/** `<role>-<host>-<pid>-<random>`: unique per process start, and says where the node runs. */
export function defaultNodeId(role: string): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._:-]/g, '-')
      .slice(0, 100) || 'host';
  return `${role}-${host}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** `worker-<host>-<pid>-<random>`. */
export const defaultWorkerId = (): string => defaultNodeId('worker');

/** One log line as each run starts and one as it ends, with how long it took. */
export function logRuns(worker: Worker, logger: Logger, clock: Clock): void {
  const started = new Map<string, number>();
  const took = (runId: string) => {
    const at = started.get(runId);
    started.delete(runId);
    return at === undefined ? undefined : Math.max(0, Math.round(clock.nowMs() - at));
  };
  worker.on('run:started', (r) => {
    started.set(r.runId, clock.nowMs());
    logger.info(
      {
        tenant_id: r.tenantId,
        job_id: r.jobId,
        run_id: r.runId,
        handler: r.handler,
        attempt: r.attempt,
        slot: r.scheduledFor.toISOString(),
      },
      'run started',
    );
  });
  worker.on('run:succeeded', (r) =>
    logger.info(
      { tenant_id: r.tenantId, job_id: r.jobId, run_id: r.runId, duration_ms: took(r.runId) },
      'run succeeded',
    ),
  );
  worker.on('run:failed', (r, f) =>
    logger.warn(
      {
        tenant_id: r.tenantId,
        job_id: r.jobId,
        run_id: r.runId,
        attempt: r.attempt,
        next: f.state,
        duration_ms: took(r.runId),
        error: f.error.split('\n')[0],
      },
      f.state === 'dead' ? 'run failed; dead-lettered' : 'run failed; will retry',
    ),
  );
  worker.on('run:dropped', (r, why) => {
    took(r.runId);
    logger.warn({ tenant_id: r.tenantId, job_id: r.jobId, run_id: r.runId }, `run dropped: ${why}`);
  });
  // The worker logs its own failures (claims, heartbeats) and retries them; without a listener an
  // 'error' event would throw.
  worker.on('error', () => {});
}

export async function startWorker(o: WorkerRuntimeOptions): Promise<RunningWorker> {
  const { logger } = o;
  refuseConflictingOptions(o);
  // Handlers first: a bad configuration fails before anything connects.
  const { handlers, jobs } = await loadHandlers(o);
  const defined = { inputs: jobs, valid: jobs.length > 0 ? validateJobs(jobs) : [] };
  const tenantId = definitionTenant(o, jobs.length);
  const workerId = o.workerId ?? defaultWorkerId();
  const connection = o.url ? await connectToServer(o, o.url, workerId) : await connectToDatabase(o);
  const { clock, sync, db } = connection;
  let worker: Worker;
  try {
    if (jobs.length > 0) await upsertDefinitions(o, connection, defined, tenantId);
    worker = createWorker(o, connection, handlers, workerId);
  } catch (err) {
    await sync?.stop();
    await db?.close();
    throw err;
  }
  logRuns(worker, logger, clock);
  const refused = watchForRefusal(worker, o.url);
  worker.start();
  logger.info(
    {
      worker: worker.workerId,
      pool: worker.pool,
      concurrency: worker.concurrency,
      handlers: Object.keys(handlers),
      tenants: o.url ? "the key's" : (worker.tenants ?? 'all'),
      via: o.url ?? db?.where,
      grace: formatDuration(o.graceMs),
    },
    'tock worker is running; SIGTERM or Ctrl-C drains it',
  );
  return {
    worker,
    refused,
    async stop() {
      logger.info({ in_flight: worker.inFlight }, 'stopping: no new claims, draining running handlers');
      await worker.stop(o.graceMs);
      await sync?.stop();
      await db?.close();
      logger.info('stopped');
    },
  };
}

/** Where a worker's runs and its time come from, and what it closes when it stops. */
interface WorkerConnection {
  store: LeaseSource;
  /** The database's store, to upsert the module's jobs (direct connection only). */
  pg: PostgresStore | null;
  clock: Clock;
  /** The database it opened (direct connection only). */
  db: OpenDatabase | null;
  /** Keeps `clock` on the database's (direct connection only). */
  sync: ClockSync | null;
}

/** A worker reaches runs through a server or through the database, never both. */
function refuseConflictingOptions(o: WorkerRuntimeOptions): void {
  if (o.url && (o.databaseUrl || o.schema))
    throw new ValidationError(
      'choose one connection: --url (a Tock server) or --database-url/--schema (the database), not both',
    );
  if (o.url && o.tenants)
    throw new ValidationError(
      "--tenant is for a worker on the database; through --url the key's tenant decides whose runs it works",
    );
}

/** Runs through a Tock server's HTTP API, on the worker's own clock. */
async function connectToServer(
  o: WorkerRuntimeOptions,
  url: string,
  workerId: string,
): Promise<WorkerConnection> {
  // The worker's own clock: the store converts the server's lease expiries to it.
  const clock = new SystemClock();
  const remote = new HttpLeaseSource({ url, key: o.key, clock, workerId });
  // A wrong key is a configuration error: say so once and exit, rather than retry it forever. A
  // server not up yet is not: the claim loop retries it.
  await remote.checkAccess().catch((err: unknown) => {
    if (refusedByServer(err)) throw refusal(url, err);
    o.logger.warn(
      { error: err instanceof Error ? err.message : String(err) },
      err instanceof TockConnectionError
        ? 'the server is not reachable yet; the worker keeps trying'
        : 'the server could not check this worker yet; the worker keeps trying',
    );
  });
  return { store: remote, pg: null, clock, db: null, sync: null };
}

/** Runs straight from the database, on the database's clock (kept measured from now on). */
async function connectToDatabase(o: WorkerRuntimeOptions): Promise<WorkerConnection> {
  const db = await openDatabase({
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    logger: o.logger,
    exclusive: true,
    // Claims, heartbeats, completions and failures: a few at a time, never one per handler.
    poolSize: Math.min(o.concurrency, 16) + 4,
  });
  try {
    const pg = new PostgresStore(db.pool, { leaseMs: o.leaseMs, agingStepMs: o.agingStepMs });
    const { clock, sync } = await databaseClock((local) => pg.sampleClock(local), o.logger);
    sync.start();
    return { store: pg, pg, clock, db, sync };
  } catch (err) {
    await db.close();
    throw err;
  }
}

function createWorker(
  o: WorkerRuntimeOptions,
  { store, clock }: WorkerConnection,
  handlers: Record<string, Handler>,
  workerId: string,
): Worker {
  return new Worker({
    store,
    clock,
    logger: o.logger,
    handlers,
    pool: o.pool,
    concurrency: o.concurrency,
    prefetch: o.prefetch,
    claimAheadMs: o.claimAheadMs,
    workerId,
    pollIntervalMs: o.pollMs,
    tenants: o.tenants,
    clockState:
      clock instanceof OffsetClock
        ? () => ({ offsetMs: clock.offset.offsetMs, uncertaintyMs: clock.offset.uncertaintyMs })
        : undefined,
  });
}

/** Resolves when the server behind `url` refuses the worker's key while it runs; never without `url`. */
function watchForRefusal(worker: Worker, url: string | undefined): Promise<Error> {
  return new Promise<Error>((resolve) => {
    if (url) worker.on('error', (err) => refusedByServer(err) && resolve(refusal(url, err)));
  });
}

/**
 * The tenant a worker on the database upserts its module's jobs in: its one `--tenant`, else
 * `default`. Through `--url` the key's tenant decides (null here).
 */
function definitionTenant(o: WorkerRuntimeOptions, jobs: number): string | null {
  if (o.url || jobs === 0) return null;
  if (!o.tenants || o.tenants.length === 0) return 'default';
  if (o.tenants.length === 1) return o.tenants[0] as string;
  throw new ValidationError(
    `the handlers module defines jobs, which are upserted in one tenant: give one --tenant, not ${o.tenants.length}`,
  );
}

/**
 * How long a worker through a server keeps trying to upsert its module's jobs while the server
 * cannot be reached (or answers 5xx or 429), ms: a worker started before its server waits for it,
 * as its claims would, but not forever.
 */
export const UPSERT_RETRY_MS = 120_000;

/** `send`, sent again with backoff (250 ms doubling to 5 s) while the server is unreachable, up to UPSERT_RETRY_MS. */
async function whileUnreachable<T>(
  o: WorkerRuntimeOptions,
  clock: Clock,
  send: () => Promise<T>,
): Promise<T> {
  const started = clock.nowMs();
  for (let attempt = 0; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      const transient =
        err instanceof TockConnectionError ||
        (err instanceof TockApiError && (err.status >= 500 || err.status === 429));
      if (!transient || clock.nowMs() - started >= UPSERT_RETRY_MS) throw err;
      o.logger.warn(
        { error: err instanceof Error ? err.message : String(err) },
        'could not upsert the jobs of the handlers module yet; retrying',
      );
      await clock.sleep(Math.min(5000, 250 * 2 ** attempt));
    }
  }
}

/**
 * Upserts the handlers module's jobs before the worker claims: on the database, or through the
 * server (`PUT /v1/jobs`, all or nothing), which needs a key that may define jobs (role `admin`).
 */
async function upsertDefinitions(
  o: WorkerRuntimeOptions,
  connection: WorkerConnection,
  jobs: { inputs: readonly JobInput[]; valid: readonly ValidJob[] },
  tenantId: string | null,
): Promise<void> {
  if (connection.pg && tenantId !== null) {
    const { changes } = await connection.pg.upsertJobs({
      tenantId,
      jobs: jobs.valid,
      now: connection.clock.nowMs(),
    });
    o.logger.info(
      { jobs: changes.map((c) => `${c.jobId}: ${c.change}`) },
      'jobs of the handlers module upserted',
    );
    return;
  }
  const client = new TockClient({ url: o.url as string, key: o.key });
  try {
    const answer = await whileUnreachable(o, connection.clock, () =>
      client.putJobs(jobs.inputs.map((j) => jobInputToApi(j) as unknown as JobBody & { job_id: string })),
    );
    o.logger.info(
      { jobs: answer.jobs.map((c) => `${c.job_id}: ${c.change}`) },
      'jobs of the handlers module upserted',
    );
  } catch (err) {
    if (err instanceof TockApiError && (err.status === 401 || err.status === 403))
      throw new Error(
        `${o.url} refused to upsert the jobs the handlers module defines: ${err.status} ${err.code}: ${err.message}: a worker key may only work runs; give --key (TOCK_KEY) an admin key, or upsert the jobs elsewhere and export handlers by name`,
      );
    throw err;
  }
}
