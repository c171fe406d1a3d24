/**
 * `tock dev`: everything in one process — the (embedded) database, migrations, the example jobs,
 * the tick loop, the reaper and a worker with the development handlers — logging each run as it
 * starts and ends. `stop()` drains the worker, stops the loops, then the database.
 */
import type { Logger } from 'pino';
import { formatDuration } from '../core/index.js';
import { Reaper, TickLoop } from '../scheduler/index.js';
import { PostgresStore } from '../store/index.js';
import { Worker } from '../worker/index.js';
import { databaseClock, openDatabase } from './database.js';
import { devHandlers } from './dev-handlers.js';
import { readJobsFile } from './jobs-file.js';

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
  /** Default lease, ms. */
  leaseMs: number;
  /** Pause between ticks, ms. */
  tickMs: number;
  /** Materialise slots this far ahead, ms. */
  lookaheadMs: number;
  /** Most due jobs per tick. */
  batchSize: number;
  /** Runs the worker executes at once. */
  concurrency: number;
  /** Wait between claims when idle, ms. */
  pollMs: number;
  /** Time running handlers get to finish on stop, ms. */
  graceMs: number;
  /** Refuse to tick or reap while the database clock offset is less certain than this, ms. */
  maxClockUncertaintyMs: number;
}

export const TENANT = 'default';

export async function startDev(o: DevOptions): Promise<{ stop(): Promise<void> }> {
  const { logger } = o;
  const jobs = await readJobsFile(o.jobsFile);
  const db = await openDatabase({ databaseUrl: o.databaseUrl, dataDir: o.dataDir, schema: o.schema, logger });
  try {
    const store = new PostgresStore(db.pool, { leaseMs: o.leaseMs });
    const { clock, sync } = await databaseClock((local) => store.sampleClock(local), logger, {
      maxUncertaintyMs: o.maxClockUncertaintyMs,
    });
    const refusal = () => sync.refusal();
    logger.info(
      {
        offset_ms: Math.round(clock.offset.offsetMs),
        uncertainty_ms: Math.round(clock.offset.uncertaintyMs),
      },
      'following the database clock',
    );
    for (const job of jobs) {
      const { job: saved, change } = await store.upsertJob({ tenantId: TENANT, job, now: clock.nowMs() });
      logger.info(
        { job_id: saved.jobId, schedule: saved.schedule, next_run_at: saved.nextRunAt },
        `job ${change}`,
      );
    }
    const ticks = new TickLoop({
      store,
      clock,
      logger,
      intervalMs: o.tickMs,
      lookaheadMs: o.lookaheadMs,
      batchSize: o.batchSize,
      refusal,
    });
    const reaper = new Reaper({ store, clock, logger, refusal });
    const worker = new Worker({
      store,
      clock,
      logger,
      handlers: devHandlers(clock, Math.random),
      concurrency: o.concurrency,
      pollIntervalMs: o.pollMs,
    });
    ticks.on('tick', (t) => {
      for (const r of t.created)
        logger.info({ job_id: r.jobId, slot: r.scheduledFor.toISOString() }, 'run materialised');
    });
    worker.on('run:started', (r) =>
      logger.info({ job_id: r.jobId, run_id: r.runId, attempt: r.attempt }, 'run started'),
    );
    worker.on('run:succeeded', (r) => logger.info({ job_id: r.jobId, run_id: r.runId }, 'run succeeded'));
    worker.on('run:failed', (r, f) =>
      logger.warn(
        {
          job_id: r.jobId,
          run_id: r.runId,
          attempt: r.attempt,
          next: f.state,
          error: f.error.split('\n')[0],
        },
        f.state === 'dead' ? 'run failed; dead-lettered' : 'run failed; will retry',
      ),
    );
    worker.on('run:dropped', (r, why) =>
      logger.warn({ job_id: r.jobId, run_id: r.runId }, `run dropped: ${why}`),
    );
    sync.start();
    ticks.start();
    reaper.start();
    worker.start();
    logger.info(
      {
        jobs: jobs.length,
        lease: formatDuration(o.leaseMs),
        worker: worker.workerId,
        database: db.embedded ? 'embedded' : 'DATABASE_URL',
      },
      'tock dev is running; Ctrl-C stops it',
    );
    return {
      async stop() {
        logger.info('stopping: draining the worker');
        await worker.stop(o.graceMs);
        await Promise.all([ticks.stop(), reaper.stop(), sync.stop()]);
        await db.close();
        logger.info('stopped');
      },
    };
  } catch (err) {
    await db.close();
    throw err;
  }
}
