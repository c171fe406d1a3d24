/**
 * `tock server`: the API, the scheduler (tick, reaper) and clock sync against DATABASE_URL (or
 * the embedded database); run several for availability. It refuses to start without API keys
 * unless told `--insecure`.
 */
import type { Logger } from 'pino';
import { type HttpLimits, type JobGaugeOptions, Metrics } from '../api/index.js';
import { JsonlArchive, PostgresStore } from '../store/index.js';
import { databaseClock, openDatabase } from './database.js';
import { startServices } from './services.js';
import { defaultNodeId } from './worker.js';

export interface ServerOptions {
  logger: Logger;
  databaseUrl?: string;
  dataDir?: string;
  schema?: string;
  host: string;
  port: number;
  insecure: boolean;
  leaseMs: number;
  tickMs: number;
  lookaheadMs: number;
  /** Misfire threshold of jobs that set none, ms (`PostgresStore` `misfireThresholdMs`). Default 60 s. */
  misfireThresholdMs?: number;
  /** Priority ageing step, ms (`PostgresStore` `agingStepMs`, 1 s to 1 day). Default 60 s. */
  agingStepMs?: number;
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
  maxClockUncertaintyMs: number;
  quota: { perSecond: number; burst: number };
  /** The bucket of the tenant's lease requests (workers'), apart from `quota`. */
  workerQuota?: { perSecond: number; burst: number };
  /** Timeouts, connection and long-poll caps of the API. Default `DEFAULT_HTTP_LIMITS`. */
  limits?: Partial<HttpLimits>;
  /** A port on 127.0.0.1 serving `GET /metrics` without a key. Default: none. */
  metricsPort?: number;
  /** The per-job top N gauges: how many jobs, over which window. Default `DEFAULT_TOP_JOBS` over `DEFAULT_JOB_WINDOW_MS`. */
  metricsJobs?: JobGaugeOptions;
  announce: (line: string) => void;
}

export async function startServer(o: ServerOptions): Promise<{ url: string; stop(): Promise<void> }> {
  const { logger } = o;
  // Before the database: a directory that cannot be written to is refused with nothing started.
  const archive = o.pruneArchiveDir === undefined ? undefined : await JsonlArchive.open(o.pruneArchiveDir);
  const db = await openDatabase({
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    logger,
    exclusive: true,
    // A node frozen inside a tick must not keep its jobs locked much past its shard leases.
    idleInTransactionMs: o.shardLeaseMs,
  });
  try {
    const store = new PostgresStore(db.pool, {
      leaseMs: o.leaseMs,
      misfireThresholdMs: o.misfireThresholdMs,
      agingStepMs: o.agingStepMs,
      archive,
    });
    if (!o.insecure && !(await store.hasApiKeys())) {
      throw new Error(
        'no API keys exist: create one with `tock keys create --tenant <tenant> --role admin`, or start with --insecure to serve without keys',
      );
    }
    const { clock, sync } = await databaseClock((local) => store.sampleClock(local), logger, {
      maxUncertaintyMs: o.maxClockUncertaintyMs,
    });
    const services = await startServices({
      store,
      pool: db.pool,
      clock,
      sync,
      logger,
      metrics: new Metrics({ jobGauges: o.metricsJobs }),
      api: {
        host: o.host,
        port: o.port,
        auth: o.insecure ? 'open' : 'keys',
        quota: o.quota,
        workerQuota: o.workerQuota,
        limits: o.limits,
      },
      tick: { intervalMs: o.tickMs, lookaheadMs: o.lookaheadMs, batchSize: o.batchSize },
      shards: { leaseMs: o.shardLeaseMs, nodeId: defaultNodeId('scheduler') },
      prune: o.pruneIntervalMs === undefined ? undefined : { intervalMs: o.pruneIntervalMs },
      notify: { allow: o.notifyAllow ?? [] },
      metricsPort: o.metricsPort,
    });
    if (o.insecure)
      logger.warn(
        { url: services.url },
        '--insecure: the API runs without keys; every caller is a cluster-admin of tenant "default"',
      );
    o.announce(`tock listening on ${services.url}`);
    if (services.metricsUrl)
      logger.info({ url: `${services.metricsUrl}/metrics` }, 'metrics listening (loopback, no key)');
    return {
      url: services.url,
      async stop() {
        logger.info('stopping');
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
