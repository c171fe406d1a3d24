/**
 * The run gauges' counts (`sampleRunCounts`) against PostgreSQL: on a large table they do not read
 * every run (pending from the queue, running from the claims, the parked states from their partial
 * index, succeeded as the estimated rows less the rest), and they agree with the exact count
 * (`countRuns`) once the table's statistics are current.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { runCountSample } from '../../src/store/queries/run-reads.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { endedRun, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

test('agree with the exact count; above the threshold, without a scan of runs', async () => {
  const now = db.clock.nowMs();
  const pool = 'counted';
  await upsertJob(db.store, {
    tenantId: 'a',
    job: { jobId: 'j', schedule: '@every 1h', handler: 'h', pool },
    now,
  });
  await upsertJob(db.store, { tenantId: 'b', job: { jobId: 'k', schedule: '@every 1h', handler: 'h' }, now });
  let slot = now - 100_000;
  const ended = async (
    tenantId: string,
    jobId: string,
    state: 'succeeded' | 'dead' | 'cancelled' | 'skipped' | null,
  ) => {
    slot += 1000;
    return endedRun(db, { tenantId, jobId, slot, state, finishedAt: slot });
  };
  for (let i = 0; i < 8; i++) await ended('a', 'j', null);
  for (let i = 0; i < 6; i++) await ended('b', 'k', 'succeeded');
  for (const state of ['dead', 'dead', 'cancelled', 'skipped', 'succeeded'] as const)
    await ended('a', 'j', state);
  const claimed = await db.store.claimRuns({ workerId: 'w', pool, max: 3, now });
  expect(claimed).toHaveLength(3);
  await db.pool.query('ANALYZE runs');

  const exact = await db.store.countRuns({});
  expect(exact).toEqual({ pending: 5, running: 3, succeeded: 7, dead: 2, cancelled: 1, skipped: 1 });
  expect(await db.store.sampleRunCounts()).toEqual({ counts: exact, estimated: false });
  expect(await db.store.sampleRunCounts({ exactBelow: 0 })).toEqual({ counts: exact, estimated: true });

  // The estimate's statement can read runs through the parked runs' partial index alone (on a
  // table this small the planner prefers a scan: scans are priced out to see the choice).
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL enable_seqscan = off');
    const { rows } = await client.query(`EXPLAIN ${runCountSample}`);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).not.toMatch(/Seq Scan on runs/);
    expect(plan).toMatch(/runs_parked/);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
});
