/**
 * `migrate()` on a pool made with `createPool(url, { schema })` for a schema that does not exist
 * yet: it creates the schema (as `createPool`'s `schema` option says), once, even when several
 * nodes migrate at the same time.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, expect, inject, test } from 'vitest';
import { createPool, loadMigrations, migrate } from '../../src/store/index.js';

const url = inject('databaseUrl');
const pools: pg.Pool[] = [];
const schemas: string[] = [];

function freshSchema(): string {
  const schema = `m_${randomBytes(6).toString('hex')}`;
  schemas.push(schema);
  return schema;
}

function pool(schema: string): pg.Pool {
  const p = createPool(url, { schema, max: 2 });
  pools.push(p);
  return p;
}

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end().catch(() => {})));
  const admin = createPool(url, { max: 1 });
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  await admin.end();
});

test('migrate() creates the schema createPool(url, { schema }) names, then migrates into it', async () => {
  const schema = freshSchema();
  const p = pool(schema);
  const all = (await loadMigrations()).map((m) => m.version);
  expect(await migrate(p)).toEqual(all);
  const { rows } = await p.query(
    `SELECT to_regclass($1) IS NOT NULL AS jobs, to_regclass($2) IS NOT NULL AS runs, current_schema() AS current`,
    [`${schema}.jobs`, `${schema}.runs`],
  );
  expect(rows[0]).toEqual({ jobs: true, runs: true, current: schema });
  expect(await migrate(p)).toEqual([]);
});

test('nodes migrating a new schema at once: one creates and migrates it, the others find it current', async () => {
  const schema = freshSchema();
  const results = await Promise.all([pool(schema), pool(schema), pool(schema)].map((p) => migrate(p)));
  const all = (await loadMigrations()).map((m) => m.version);
  expect(results.filter((r) => r.length > 0)).toEqual([all]);
  expect(results.filter((r) => r.length === 0)).toHaveLength(2);
});

test('a search_path with no schema to create is refused with a message, not a SQL error', async () => {
  const p = createPool(url, { max: 1 });
  pools.push(p);
  // Queries on a client run in order: this SET precedes whatever migrate() sends.
  p.on('connect', (client) => void client.query(`SET search_path = '$user'`));
  await expect(migrate(p)).rejects.toThrow(/^no schema to migrate into: search_path is "\$user"/);
});
