/** `tock worker`: pulls runs and executes handlers, from the database or through a server. */
import type { Command } from 'commander';
import { defineCommand, type OptionsFor } from '../command.js';
import { stopSignal } from '../signals.js';

type WorkerOptions = OptionsFor<'worker'>;

/** The runtime's options of a worker, as the command's options name them (all but the logger). */
export function workerSettings(o: Omit<WorkerOptions, 'logFormat' | 'logLevel'>) {
  return {
    handlersModule: o.handlers,
    configFile: o.config,
    pool: o.pool,
    concurrency: o.concurrency,
    prefetch: o.prefetch,
    claimAheadMs: o.claimAhead,
    graceMs: o.grace,
    workerId: o.workerId,
    pollMs: o.poll,
    url: o.url,
    key: o.key,
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    leaseMs: o.lease,
    agingStepMs: o.agingStep,
    tenants: o.tenant,
  };
}

async function worker(o: WorkerOptions): Promise<void> {
  const [{ createLogger }, { startWorker }] = await Promise.all([
    import('../../runtime/logger.js'),
    import('../../runtime/worker.js'),
  ]);
  const logger = createLogger(o.logFormat, o.logLevel);
  const signal = stopSignal((m) => logger.warn(m));
  const running = await startWorker({ logger, ...workerSettings(o) });
  const refused = await Promise.race([signal.then(() => null), running.refused]);
  if (refused) logger.error(refused.message);
  await running.stop();
  process.exit(refused ? 1 : 0);
}

export function registerWorker(program: Command): void {
  defineCommand(
    program,
    'worker',
    'pull runs and execute handlers: the functions of a handlers module and the built-in executors (HTTP calls, commands) of a worker config; straight from the database, or through a Tock server with --url; SIGTERM/Ctrl-C drains it',
  ).action(worker);
}
