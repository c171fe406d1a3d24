/** `tock dev`: everything in one process, for a laptop. */
import type { Command } from 'commander';
import { defineCommand, type OptionsFor } from '../command.js';
import { stopSignal } from '../signals.js';

type DevOptions = OptionsFor<'dev'>;

async function dev(o: DevOptions): Promise<void> {
  const [{ createLogger }, { startDev }] = await Promise.all([
    import('../../runtime/logger.js'),
    import('../../runtime/dev.js'),
  ]);
  const logger = createLogger(o.logFormat, o.logLevel);
  const signal = stopSignal((m) => logger.warn(m));
  const running = await startDev({
    logger,
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    jobsFile: o.jobs,
    handlersModule: o.handlers,
    configFile: o.config,
    leaseMs: o.lease,
    tickMs: o.tick,
    lookaheadMs: o.lookahead,
    misfireThresholdMs: o.misfireThreshold,
    batchSize: o.tickBatch,
    shardLeaseMs: o.shardLease,
    concurrency: o.concurrency,
    prefetch: o.prefetch,
    claimAheadMs: o.claimAhead,
    pollMs: o.poll,
    graceMs: o.grace,
    maxClockUncertaintyMs: o.maxClockUncertainty,
    host: o.host,
    port: o.port,
    announce: (line) => process.stdout.write(`${line}\n`),
  });
  await signal;
  await running.stop();
  process.exit(0);
}

export function registerDev(program: Command): void {
  defineCommand(
    program,
    'dev',
    'run everything in one process on the embedded database (or DATABASE_URL): migrations, the example jobs, the API on loopback without keys, scheduler, reaper and a worker; logs every run; Ctrl-C stops cleanly',
  ).action(dev);
}
