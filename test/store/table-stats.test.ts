/**
 * Issue 21, item 3: `Store.tableStats` reads Tock's own tables, those of the pool's schema alone.
 * Every test file migrates Tock into a schema of its own on the same database, so the other
 * schemas' copies of the same tables are there to be wrongly read; another application's table in
 * Tock's schema must not be read either. And the list of Tock's tables follows the migrations.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { TOCK_TABLES } from '../../src/store/queries/table-stats.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';

let db: TestDatabase;
let other: TestDatabase;
beforeAll(async () => {
  [db, other] = await Promise.all([setupDatabase(), setupDatabase()]);
});
afterAll(async () => {
  await Promise.all([db?.teardown(), other?.teardown()]);
});

test('TOCK_TABLES is every table the migrations create', async () => {
  const { rows } = await db.pool.query(
    `SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p') ORDER BY relname`,
    [db.schema],
  );
  expect(rows.map((r) => r.relname)).toEqual([...TOCK_TABLES].sort());
});

test("one row per Tock table of the pool's schema: not another schema's copy, not another application's table", async () => {
  await db.pool.query('CREATE TABLE other_app (id int PRIMARY KEY)');
  const stats = await db.store.tableStats();
  expect(stats.map((s) => s.table)).toEqual([...TOCK_TABLES].sort());
  // Sizes are this schema's: a table another schema's copy of holds rows is no larger here.
  await other.pool.query(`INSERT INTO api_keys (key_id, tenant_id, role, secret_hash, created_at)
    SELECT gen_random_uuid()::text, 'x', 'admin', md5(i::text), now() FROM generate_series(1, 2000) i`);
  const after = await db.store.tableStats();
  const keys = (s: typeof stats) => s.find((t) => t.table === 'api_keys')?.bytes;
  expect(keys(after)).toBe(keys(stats));
  for (const s of after) {
    expect(s.bytes).toBeGreaterThan(0);
    expect(s.hotUpdates).toBeLessThanOrEqual(s.updates);
  }
});
