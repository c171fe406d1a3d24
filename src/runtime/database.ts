/**
 * Opens the database a command runs on: the server `DATABASE_URL` names, or the embedded one under
 * the data directory. Migrates it, and measures this node's offset to the database's clock.
 */

import type pg from 'pg';
import type { Logger } from 'pino';
import { type ClockSample, OffsetClock, SystemClock } from '../core/index.js';
import { ClockSync } from '../scheduler/index.js';
import { createPool, type EmbeddedDatabase, migrate, startEmbedded } from '../store/index.js';

export interface OpenOptions {
  /** PostgreSQL connection string; unset: embedded PostgreSQL under `dataDir`. */
  databaseUrl?: string;
  /** Embedded data directory. Default `./.tock`. */
  dataDir?: string;
  logger: Logger;
  /** Pool size. Default 20. */
  poolSize?: number;
  /** Schema to use (created if missing). Default: the server's search_path. */
  schema?: string;
  /** See `PoolOptions.idleInTransactionMs`. */
  idleInTransactionMs?: number;
  /**
   * Embedded only: refuse a data directory another tock process runs ("data directory … in use by
   * pid N") instead of sharing its server. `tock dev`, `server` and `worker` set it. Default false.
   */
  exclusive?: boolean;
}

export interface OpenDatabase {
  url: string;
  pool: pg.Pool;
  embedded: EmbeddedDatabase | null;
  /**
   * Which database this is, for people and without the password: `embedded PostgreSQL in <dir>`
   * (and whose, when shared), or `<host>:<port>/<database>` with the schema.
   */
  where: string;
  close(): Promise<void>;
}

/** `host:port/database` of a connection string, never its credentials; the string itself if unparsable. */
export function describeUrl(url: string, schema?: string): string {
  let text: string;
  try {
    const u = new URL(url);
    text = `${u.hostname || 'localhost'}:${u.port || '5432'}${u.pathname || '/'}`;
  } catch {
    text = 'DATABASE_URL';
  }
  return schema ? `${text} (schema ${schema})` : text;
}

export async function openDatabase(o: OpenOptions): Promise<OpenDatabase> {
  let embedded: EmbeddedDatabase | null = null;
  let url = o.databaseUrl;
  if (!url) {
    o.logger.info({ data_dir: o.dataDir ?? '.tock' }, 'starting embedded PostgreSQL');
    embedded = await startEmbedded({
      dataDir: o.dataDir,
      exclusive: o.exclusive,
      onLog: (line) => o.logger.trace({ postgres: line }),
      onNotice: (line) => o.logger.warn(line),
    });
    url = embedded.url;
    o.logger.info(
      embedded.sharedWith === null
        ? { port: embedded.port }
        : { port: embedded.port, owner_pid: embedded.sharedWith },
      embedded.sharedWith === null ? 'embedded PostgreSQL is up' : 'using the running embedded PostgreSQL',
    );
  }
  const where = embedded
    ? `embedded PostgreSQL in ${embedded.dataDir}${embedded.sharedWith === null ? '' : ` (run by tock process ${embedded.sharedWith})`}${o.schema ? ` (schema ${o.schema})` : ''}`
    : describeUrl(url, o.schema);
  try {
    // createPool refuses a schema that is not a plain name; migrate() creates it if it is new.
    const pool = createPool(url, {
      max: o.poolSize ?? 20,
      schema: o.schema,
      idleInTransactionMs: o.idleInTransactionMs,
    });
    const applied = await migrate(pool);
    if (applied.length > 0) o.logger.info({ versions: applied }, 'migrations applied');
    return {
      url,
      pool,
      embedded,
      where,
      async close() {
        await pool.end().catch(() => {});
        if (embedded) await embedded.stop();
      },
    };
  } catch (err) {
    if (embedded) await embedded.stop();
    throw err;
  }
}

/**
 * A clock that follows the database's: measured now (several round-trip-corrected samples), then
 * re-measured every `intervalMs` by the returned `ClockSync`, whose `refusal()` the scheduler
 * consults before each tick and reap.
 */
export async function databaseClock(
  sample: (local: () => number) => Promise<ClockSample>,
  logger: Logger,
  options: { intervalMs?: number; maxUncertaintyMs?: number } = {},
): Promise<{ clock: OffsetClock; sync: ClockSync }> {
  const local = new SystemClock();
  const clock = new OffsetClock(local);
  const sync = new ClockSync({ clock, sample, localNowMs: () => local.nowMs(), logger, ...options });
  await sync.measureOnce();
  return { clock, sync };
}
