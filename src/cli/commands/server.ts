/** `tock server`: the API, the scheduler and the reaper, one of several nodes. */
import type { Command } from 'commander';
import { defineCommand, type OptionsFor } from '../command.js';
import { stopSignal } from '../signals.js';

type ServerOptions = OptionsFor<'server'>;

async function server(o: ServerOptions): Promise<void> {
  const [{ createLogger }, { startServer }] = await Promise.all([
    import('../../runtime/logger.js'),
    import('../../runtime/server.js'),
  ]);
  const logger = createLogger(o.logFormat, o.logLevel);
  const signal = stopSignal((m) => logger.warn(m));
  const running = await startServer({
    logger,
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    host: o.host,
    port: o.port,
    insecure: o.insecure,
    leaseMs: o.lease,
    tickMs: o.tick,
    lookaheadMs: o.lookahead,
    misfireThresholdMs: o.misfireThreshold,
    batchSize: o.tickBatch,
    shardLeaseMs: o.shardLease,
    maxClockUncertaintyMs: o.maxClockUncertainty,
    quota: { perSecond: o.apiRate, burst: o.apiBurst },
    limits: {
      requestTimeoutMs: o.requestTimeout,
      keepAliveTimeoutMs: o.keepAliveTimeout,
      maxConnections: o.maxConnections,
      maxConnectionsPerAddress: o.maxConnectionsPerAddress,
      longPollsPerKey: o.longPollsPerKey,
      longPollsPerTenant: o.longPollsPerTenant,
    },
    metricsPort: o.metricsPort,
    announce: (line) => process.stdout.write(`${line}\n`),
  });
  await signal;
  await running.stop();
  process.exit(0);
}

export function registerServer(program: Command): void {
  defineCommand(
    program,
    'server',
    'run the API, the scheduler and the reaper against DATABASE_URL (or the embedded database); run several for availability',
  ).action(server);
}
