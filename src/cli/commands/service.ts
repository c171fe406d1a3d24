/** What `tock dev` and `tock server` share: the scheduler's settings, and running until a stop signal. */
import type { Logger } from 'pino';
import { stopSignal } from '../signals.js';

/** The scheduler options both commands take, as the runtime names them. */
export function schedulerSettings(o: {
  databaseUrl?: string;
  dataDir: string;
  schema?: string;
  lease: number;
  tick: number;
  lookahead: number;
  misfireThreshold: number;
  agingStep: number;
  tickBatch: number;
  shardLease: number;
  pruneInterval: number;
  pruneArchive?: string;
  notifyAllow: string[];
  maxClockUncertainty: number;
}) {
  return {
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    leaseMs: o.lease,
    tickMs: o.tick,
    lookaheadMs: o.lookahead,
    misfireThresholdMs: o.misfireThreshold,
    agingStepMs: o.agingStep,
    batchSize: o.tickBatch,
    shardLeaseMs: o.shardLease,
    pruneIntervalMs: o.pruneInterval,
    pruneArchiveDir: o.pruneArchive,
    notifyAllow: o.notifyAllow,
    maxClockUncertaintyMs: o.maxClockUncertainty,
  };
}

/**
 * Starts a long-running service with a logger of the command's format and level, then stops it on
 * SIGINT or SIGTERM (a second one exits at once) and exits 0.
 */
export async function runUntilStopped(
  o: { logFormat: 'pretty' | 'json'; logLevel: string },
  start: (logger: Logger, announce: (line: string) => void) => Promise<{ stop(): Promise<void> }>,
): Promise<void> {
  const { createLogger } = await import('../../runtime/logger.js');
  const logger = createLogger(o.logFormat, o.logLevel);
  const signal = stopSignal((m) => logger.warn(m));
  const running = await start(logger, (line) => process.stdout.write(`${line}\n`));
  await signal;
  await running.stop();
  process.exit(0);
}
