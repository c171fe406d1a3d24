/**
 * Creating an API key straight in the database, without a server: how the first key of a tenant
 * is made (`tock keys create --tenant`). It refuses to invent a database: without a connection
 * string, the embedded one must already exist under the data directory, because a key written to
 * a database no server reads is a key that answers 401.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { type Clock, type Role, SystemClock } from '../core/index.js';
import { type ApiKey, PostgresStore } from '../store/index.js';
import { openDatabase } from './database.js';

export interface CreateKeyOnDatabaseOptions {
  tenantId: string;
  role: Role;
  /** A label shown in key listings. Default: none. */
  name?: string;
  /** PostgreSQL connection string; unset: the embedded PostgreSQL under `dataDir`, which must exist. */
  databaseUrl?: string;
  /** Embedded data directory. Default `./.tock`. */
  dataDir?: string;
  /** Schema of Tock's tables. Default: the server's search_path. */
  schema?: string;
  logger: Logger;
  /** Stamps the key's creation. Default: the system clock. */
  clock?: Clock;
}

export interface KeyOnDatabase {
  key: ApiKey;
  /** The secret, shown once: only its hash is stored. */
  secret: string;
  /** Which database holds the key, for people (see `OpenDatabase.where`). */
  where: string;
}

/** Creates a key in `tenantId`, migrating the database first if it is behind. */
export async function createKeyOnDatabase(o: CreateKeyOnDatabaseOptions): Promise<KeyOnDatabase> {
  const dataDir = path.resolve(o.dataDir ?? '.tock');
  if (!o.databaseUrl && !existsSync(path.join(dataDir, 'pg', 'PG_VERSION')))
    throw new Error(
      `no database to write the key to: ${dataDir} holds no embedded database. Set DATABASE_URL (--database-url) to your server's database, or --data-dir (TOCK_DATA_DIR) to the data directory of your tock dev or tock server`,
    );
  const db = await openDatabase({
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    logger: o.logger,
    poolSize: 2,
  });
  try {
    const store = new PostgresStore(db.pool);
    const now = (o.clock ?? new SystemClock()).nowMs();
    const { key, secret } = await store.createApiKey({
      tenantId: o.tenantId,
      role: o.role,
      name: o.name,
      now,
    });
    return { key, secret, where: db.where };
  } finally {
    await db.close();
  }
}
