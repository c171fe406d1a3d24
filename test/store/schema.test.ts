/**
 * The committed schema description (migrations/schema.txt) must match what the migrations build.
 * A migration that changes the schema without the description changing fails here; refresh it
 * with `UPDATE_SCHEMA=1 npx vitest run test/store/schema.test.ts` and review the diff.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';

const FILE = path.resolve(import.meta.dirname, '../../migrations/schema.txt');

async function describeSchema(pool: pg.Pool, schema: string): Promise<string> {
  const out: string[] = [];
  const columns = await pool.query(
    `SELECT table_name, column_name, data_type, is_nullable, column_default
     FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
    [schema],
  );
  let table = '';
  for (const c of columns.rows) {
    if (c.table_name !== table) {
      table = c.table_name;
      out.push(`table ${table}`);
    }
    const nullable = c.is_nullable === 'YES' ? '' : ' not null';
    const def = c.column_default ? ` default ${c.column_default}` : '';
    out.push(`  ${c.column_name} ${c.data_type}${nullable}${def}`);
  }
  const constraints = await pool.query(
    `SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def
     FROM pg_constraint WHERE connamespace = $1::regnamespace ORDER BY 1, 2`,
    [schema],
  );
  for (const c of constraints.rows) out.push(`constraint ${c.tbl}.${c.conname}: ${c.def}`);
  const indexes = await pool.query(
    `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`,
    [schema],
  );
  for (const i of indexes.rows) out.push(`index ${i.indexname}: ${i.indexdef}`);
  const options = await pool.query(
    `SELECT relname, reloptions FROM pg_class
     WHERE relnamespace = $1::regnamespace AND relkind = 'r' AND reloptions IS NOT NULL ORDER BY relname`,
    [schema],
  );
  for (const o of options.rows) out.push(`storage ${o.relname}: ${o.reloptions.join(', ')}`);
  return `${out.join('\n').replaceAll(`${schema}.`, '')}\n`;
}

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

test('the migrations build exactly the committed schema', async () => {
  const actual = await describeSchema(db.pool, db.schema);
  if (process.env.UPDATE_SCHEMA === '1') writeFileSync(FILE, actual);
  expect(existsSync(FILE), 'migrations/schema.txt is missing').toBe(true);
  expect(actual).toBe(readFileSync(FILE, 'utf8'));
});
