/**
 * Schema migrations: the numbered `.sql` files in `migrations/`, applied in order, forward only,
 * in one transaction under an advisory lock, so several nodes starting at once migrate exactly once
 * and a failed migration leaves the schema as it was.
 */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { inTransaction, PLAIN_SCHEMA } from './db.js';

/** The repository's `migrations/` folder, from `src/store` and from `dist/store` alike. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

const FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const out: Migration[] = [];
  for (const file of files) {
    const m = FILE.exec(file);
    if (!m) throw new Error(`migration file "${file}" is not named NNNN_name.sql`);
    const version = Number(m[1]);
    if (out.length > 0 && out[out.length - 1]!.version === version) {
      throw new Error(`two migrations share version ${version}`);
    }
    out.push({ version, name: m[2]!, sql: await readFile(`${dir}/${file}`, 'utf8') });
  }
  return out;
}

/**
 * The schema the migrations go into, and whether it must be created first: the current schema, or,
 * when the `search_path` names none that exists (a pool made with `createPool(url, { schema })`
 * for a new schema), the first name on the path.
 */
async function targetSchema(client: pg.PoolClient): Promise<{ schema: string; create: boolean }> {
  const { rows } = await client.query<{ current: string | null; path: string }>(
    `SELECT current_schema() AS current, current_setting('search_path') AS path`,
  );
  const row = rows[0]!;
  if (row.current !== null) return { schema: row.current, create: false };
  const first =
    row.path
      .split(',')[0]
      ?.trim()
      .replace(/^"(.*)"$/, '$1') ?? '';
  if (!PLAIN_SCHEMA.test(first))
    throw new Error(
      `no schema to migrate into: search_path is ${row.path}; pass a schema (createPool(url, { schema }) or --schema) or create one`,
    );
  return { schema: first, create: true };
}

/**
 * Applies every pending migration; returns the versions applied (empty when already current).
 * Creates the schema the pool's `search_path` names first if it does not exist yet.
 */
export async function migrate(pool: pg.Pool, dir = MIGRATIONS_DIR): Promise<number[]> {
  const migrations = await loadMigrations(dir);
  return inTransaction(pool, async (client) => {
    const target = await targetSchema(client);
    // Keyed by schema, so isolated test schemas on one server do not serialise each other. Taken
    // before the schema is created, so two nodes creating it at once do not collide.
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('tock.migrate.' || $1::text))`, [
      target.schema,
    ]);
    if (target.create)
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${client.escapeIdentifier(target.schema)}`);
    await client.query(`CREATE TABLE IF NOT EXISTS tock_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`);
    const { rows } = await client.query<{ version: number }>('SELECT version FROM tock_migrations');
    const done = new Set(rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO tock_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}

/**
 * The versions in each migrations folder `pendingMigrations` has read, read once per process: the
 * files do not change while it runs, and readiness checks ask often. A failed read is not kept.
 */
const knownVersions = new Map<string, Promise<number[]>>();

function versionsIn(dir: string): Promise<number[]> {
  let versions = knownVersions.get(dir);
  if (!versions) {
    versions = loadMigrations(dir).then((ms) => ms.map((m) => m.version));
    knownVersions.set(dir, versions);
    versions.catch(() => knownVersions.delete(dir));
  }
  return versions;
}

/**
 * Versions known to this build but not applied to the database (empty: current). The folder is
 * read once per process (per folder); the database is asked each time.
 */
export async function pendingMigrations(pool: pg.Pool, dir = MIGRATIONS_DIR): Promise<number[]> {
  const versions = await versionsIn(dir);
  const exists = await pool.query(`SELECT to_regclass('tock_migrations') IS NOT NULL AS present`);
  if (!exists.rows[0]?.present) return [...versions];
  const { rows } = await pool.query<{ version: number }>('SELECT version FROM tock_migrations');
  const done = new Set(rows.map((r) => r.version));
  return versions.filter((v) => !done.has(v));
}
