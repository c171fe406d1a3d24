/**
 * Run ids are time-ordered (UUID version 7, migration 0023): a run made later has a greater id,
 * its first 48 bits are the database's clock in ms when it was made, and the rest stays random.
 * New keys of `runs_pkey` land on its rightmost pages instead of a random leaf each.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const msOf = (id: string) => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
const dbNow = async () =>
  Number(
    (await db.pool.query('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms')).rows[0].ms,
  );

test('a run made later has a greater id, stamped with when it was made', async () => {
  const now = db.clock.nowMs();
  await upsertJob(db.store, { tenantId: 't', job: { jobId: 'j', schedule: '@every 1h', handler: 'h' }, now });
  const before = await dbNow();
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    // Slots in any order: the id follows when the run was made, not its slot.
    const run = await db.store.triggerRun({
      tenantId: 't',
      jobId: 'j',
      scheduledFor: now - ((i * 7) % 20) * 1000,
      now,
    });
    ids.push(run.runId);
  }
  const after = await dbNow();
  for (const id of ids) {
    expect(id).toMatch(V7);
    expect(msOf(id)).toBeGreaterThanOrEqual(Math.floor(before));
    expect(msOf(id)).toBeLessThanOrEqual(Math.ceil(after));
  }
  // Within one millisecond two ids are ordered at random; across milliseconds, by time.
  for (let i = 1; i < ids.length; i++)
    expect(msOf(ids[i] as string)).toBeGreaterThanOrEqual(msOf(ids[i - 1] as string));
  expect(new Set(ids.map((id) => id.slice(-12))).size).toBe(20);
});
