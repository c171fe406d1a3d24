/**
 * Per-file database isolation: a fresh schema on the run's server, migrated, with a store on a
 * FakeClock. `setup()` returns the bundle; `teardown()` drops the schema. A file whose workers
 * must not hear other files' wake-ups (LISTEN/NOTIFY channels are per database, not per schema)
 * asks for a database of its own (`{ ownDatabase: true }`), dropped at teardown.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { inject } from 'vitest';
import { FakeClock, seededRandom } from '../../src/core/index.js';
import { createPool, migrate, PostgresStore, type PostgresStoreOptions } from '../../src/store/index.js';

export interface TestDatabase {
  url: string;
  schema: string;
  pool: pg.Pool;
  store: PostgresStore;
  clock: FakeClock;
  /** A second pool on the same schema (a second node, or a raw SQL check). */
  newPool(max?: number): pg.Pool;
  newStore(options?: PostgresStoreOptions): PostgresStore;
  teardown(): Promise<void>;
}

/** 2026-01-01T00:00:00Z: tests start their FakeClock here unless they choose otherwise. */
export const T0 = Date.UTC(2026, 0, 1);

export async function setupDatabase(
  options: PostgresStoreOptions = {},
  { ownDatabase = false }: { ownDatabase?: boolean } = {},
): Promise<TestDatabase> {
  const shared = inject('databaseUrl');
  const suffix = randomBytes(6).toString('hex');
  const schema = `t_${suffix}`;
  let url = shared;
  if (ownDatabase) {
    const server = createPool(shared, { max: 1 });
    await server.query(`CREATE DATABASE tock_t_${suffix}`);
    await server.end();
    const u = new URL(shared);
    u.pathname = `/tock_t_${suffix}`;
    url = u.toString();
  }
  const admin = createPool(url, { max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const pools: pg.Pool[] = [];
  const newPool = (max = 10) => {
    const p = createPool(url, { schema, max });
    pools.push(p);
    return p;
  };
  const pool = newPool();
  await migrate(pool);
  const clock = new FakeClock(T0);
  const newStore = (o: PostgresStoreOptions = {}) =>
    new PostgresStore(newPool(), { random: seededRandom(7), ...options, ...o });
  const store = new PostgresStore(pool, { random: seededRandom(7), ...options });
  return {
    url,
    schema,
    pool,
    store,
    clock,
    newPool,
    newStore,
    async teardown() {
      await Promise.all(pools.map((p) => p.end().catch(() => {})));
      const cleanup = createPool(ownDatabase ? shared : url, { max: 1 });
      await cleanup.query(
        ownDatabase ? `DROP DATABASE tock_t_${suffix} WITH (FORCE)` : `DROP SCHEMA ${schema} CASCADE`,
      );
      await cleanup.end();
    },
  };
}
