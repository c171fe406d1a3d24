/**
 * Deterministic jitter through the store: a herd of jobs on one slot keeps the slot as its
 * identity and becomes available spread evenly over the jitter window, never before the slot.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { jitterOffsetMs } from '../../src/core/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

test('1,000 jobs on 0 0 * * * with a 5-minute jitter: one slot, availability spread evenly over five minutes', async () => {
  const { store, pool } = db;
  const now = Date.UTC(2026, 5, 1, 23, 59, 0);
  const midnight = Date.UTC(2026, 5, 2);
  await pool.query(
    `INSERT INTO jobs (tenant_id, job_id, handler, schedule, shard_id, next_run_at, definition_hash, created_at, updated_at, jitter_seconds)
     SELECT 'herd', 'nightly-' || i, 'noop', '0 0 * * *', 0, $1, 'x', $2, $2, 300 FROM generate_series(1, 1000) i`,
    [new Date(midnight), new Date(now)],
  );
  let created = 0;
  for (;;) {
    const r = await store.tick({ now: midnight, lookaheadMs: 0, batchSize: 400 });
    created += r.created.length;
    if (!r.full) break;
  }
  expect(created).toBe(1000);
  const { rows } = await pool.query(
    `SELECT job_id, scheduled_for, available_at FROM run_states WHERE tenant_id = 'herd' ORDER BY job_id`,
  );
  expect(rows).toHaveLength(1000);
  const minute = [0, 0, 0, 0, 0];
  for (const r of rows) {
    expect((r.scheduled_for as Date).getTime()).toBe(midnight);
    const offset = (r.available_at as Date).getTime() - midnight;
    expect(offset).toBe(jitterOffsetMs('herd', r.job_id, 300));
    expect(offset).toBeGreaterThanOrEqual(0);
    expect(offset).toBeLessThan(300_000);
    minute[Math.floor(offset / 60_000)]! += 1;
  }
  // 200 expected per minute; a uniform hash stays well within ±25%.
  for (const n of minute) expect(Math.abs(n - 200)).toBeLessThan(50);

  // Nothing is claimable before its offset: at the slot itself, only offsets of 0 ms (if any).
  const early = await store.claimRuns({
    workerId: 'w',
    pool: 'default',
    max: 1000,
    now: midnight,
    tenantId: 'herd',
  });
  expect(early.every((r) => jitterOffsetMs('herd', r.jobId, 300) === 0)).toBe(true);
  const firstMinute = await store.claimRuns({
    workerId: 'w',
    pool: 'default',
    max: 1000,
    now: midnight + 60_000,
    tenantId: 'herd',
  });
  const dueInFirstMinute = rows.filter((r) => (r.available_at as Date).getTime() <= midnight + 60_000).length;
  expect(early.length + firstMinute.length).toBe(dueInFirstMinute);
});

test('jitter is part of the definition: changing it is an update and keeps next_run_at', async () => {
  const { store, clock } = db;
  const base = { jobId: 'j', schedule: '0 0 * * *', handler: 'noop' };
  const first = await upsertJob(store, { tenantId: 't', job: base, now: clock.nowMs() });
  expect(first.job.jitterSeconds).toBe(0);
  const second = await upsertJob(store, {
    tenantId: 't',
    job: { ...base, jitterSeconds: 300 },
    now: clock.nowMs() + 5000,
  });
  expect(second.change).toBe('updated');
  expect(second.job.jitterSeconds).toBe(300);
  expect(second.job.nextRunAt).toEqual(first.job.nextRunAt);
});
