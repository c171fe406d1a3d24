/**
 * Range backfill and a trigger's own payload in the store: the runs of a range's slots (queued,
 * keyed as triggers are, one per slot whatever state an earlier run is in), the counts, the
 * bounds, tenant isolation, a job deleted between the read and the write, and bad input that
 * writes nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_BACKFILL_SLOTS } from '../../src/core/index.js';
import { PostgresStore } from '../../src/store/index.js';
import { jobGet } from '../../src/store/queries/jobs.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { countRows, expectTockError, job, pauseAfter, uniqueId, upsertJob } from '../setup/factories.js';

const MIN = 60_000;
const AGING_STEP_MS = 60_000;

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

async function tables() {
  const runs = await db.pool.query('SELECT * FROM run_states ORDER BY run_id');
  const queue = await db.pool.query('SELECT * FROM run_queue ORDER BY run_id');
  return { runs: runs.rows, queue: queue.rows };
}

/** A tenant with one job (every minute, priority 3, payload {n: 1}) as of T0. */
async function minutely(extra: Record<string, unknown> = {}) {
  const tenantId = uniqueId('t-bf');
  const def = job({ schedule: '@every 1m', priority: 3, payload: { n: 1 }, pool: tenantId, ...extra });
  await upsertJob(db.store, { tenantId, job: def, now: T0 });
  return { tenantId, jobId: def.jobId };
}

describe('backfillRuns', () => {
  test("creates the run of every slot in [from, to), queued at its slot, keyed as a trigger's", async () => {
    const j = await minutely();
    const from = T0 - 60 * MIN;
    const result = await db.store.backfillRuns({ ...j, from, to: T0, now: T0 });
    expect(result).toEqual({
      created: 60,
      existing: 0,
      firstSlot: new Date(from),
      lastSlot: new Date(T0 - MIN),
    });
    const { rows } = await db.pool.query(
      `SELECT r.scheduled_for, r.available_at, r.sort_key, r.payload, r.priority, r.state, r.created_at,
         q.sort_key AS queued_key
       FROM runs r LEFT JOIN run_queue q USING (run_id)
       WHERE r.tenant_id = $1 AND r.job_id = $2 ORDER BY r.scheduled_for`,
      [j.tenantId, j.jobId],
    );
    expect(rows).toHaveLength(60);
    rows.forEach((r, i) => {
      const slot = from + i * MIN;
      expect(r).toEqual({
        scheduled_for: new Date(slot),
        available_at: new Date(slot),
        sort_key: new Date(slot - 3 * AGING_STEP_MS),
        payload: { n: 1 },
        priority: 3,
        state: 'pending',
        created_at: new Date(T0),
        queued_key: new Date(slot - 3 * AGING_STEP_MS),
      });
    });
    // Claimed oldest slot first.
    const claimed = await db.store.claimRuns({ workerId: 'w', pool: j.tenantId, max: 2, now: T0 });
    expect(claimed.map((r) => r.scheduledFor)).toEqual([new Date(from), new Date(from + MIN)]);
  });

  test('again: creates nothing and counts every slot as existing, whatever state its run is in', async () => {
    const j = await minutely();
    const range = { ...j, from: T0 - 10 * MIN, to: T0, now: T0 };
    expect((await db.store.backfillRuns(range)).created).toBe(10);
    // One run claimed, one cancelled by hand: still their slots' runs.
    await db.store.claimRuns({ workerId: 'w', pool: j.tenantId, max: 1, now: T0 });
    await db.pool.query(
      `WITH q AS (DELETE FROM run_queue WHERE run_id = (SELECT run_id FROM runs WHERE tenant_id = $1
         AND scheduled_for = $2) RETURNING run_id)
       UPDATE runs SET state = 'cancelled', parked = 'cancelled' FROM q WHERE runs.run_id = q.run_id`,
      [j.tenantId, new Date(T0 - MIN)],
    );
    const before = await tables();
    expect(await db.store.backfillRuns(range)).toEqual({
      created: 0,
      existing: 10,
      firstSlot: new Date(T0 - 10 * MIN),
      lastSlot: new Date(T0 - MIN),
    });
    expect(await tables()).toEqual(before);
  });

  test('an overlapping range creates only the slots that have no run', async () => {
    const j = await minutely();
    await db.store.backfillRuns({ ...j, from: T0 - 10 * MIN, to: T0, now: T0 });
    const result = await db.store.backfillRuns({ ...j, from: T0 - 15 * MIN, to: T0 - 5 * MIN, now: T0 });
    expect(result).toEqual({
      created: 5,
      existing: 5,
      firstSlot: new Date(T0 - 15 * MIN),
      lastSlot: new Date(T0 - 6 * MIN),
    });
    expect(await countRows(db.pool, 'runs', 'tenant_id = $1', [j.tenantId])).toBe(15);
    expect(await countRows(db.pool, 'run_queue', 'tenant_id = $1', [j.tenantId])).toBe(15);
  });

  test('a range without a slot creates nothing; a one-shot has its instant only', async () => {
    const j = await minutely();
    const empty = await db.store.backfillRuns({ ...j, from: T0, to: T0, now: T0 });
    expect(empty).toEqual({ created: 0, existing: 0, firstSlot: null, lastSlot: null });
    const at = T0 + 90 * MIN;
    const once = await minutely({ schedule: `@at ${new Date(at).toISOString()}` });
    const before = await tables();
    const outside = await db.store.backfillRuns({ ...once, from: T0, to: at, now: T0 });
    expect(outside).toEqual({ created: 0, existing: 0, firstSlot: null, lastSlot: null });
    expect(await tables()).toEqual(before);
    const inside = await db.store.backfillRuns({ ...once, from: T0, to: at + 1, now: T0 });
    expect(inside).toEqual({ created: 1, existing: 0, firstSlot: new Date(at), lastSlot: new Date(at) });
  });

  test(`${MAX_BACKFILL_SLOTS} slots in one statement; one more, a reversed range or a bad instant writes nothing`, async () => {
    const j = await minutely();
    const from = T0 - MAX_BACKFILL_SLOTS * MIN;
    const before = await tables();
    const over = await expectTockError(
      db.store.backfillRuns({ ...j, from: from - MIN, to: T0, now: T0 }),
      'validation_error',
    );
    expect(over.details.field).toBe('to');
    const reversed = await expectTockError(
      db.store.backfillRuns({ ...j, from: T0, to: T0 - 1, now: T0 }),
      'validation_error',
    );
    expect(reversed.details.field).toBe('from');
    const bad = await expectTockError(
      db.store.backfillRuns({ ...j, from: Number.NaN, to: T0, now: T0 }),
      'validation_error',
    );
    expect(bad.details.field).toBe('from');
    expect(await tables()).toEqual(before);
    const all = await db.store.backfillRuns({ ...j, from, to: T0, now: T0 });
    expect(all.created).toBe(MAX_BACKFILL_SLOTS);
    expect(await countRows(db.pool, 'run_queue', 'tenant_id = $1', [j.tenantId])).toBe(MAX_BACKFILL_SLOTS);
  });

  test("another tenant's job, or none, is not found and nothing is written", async () => {
    const j = await minutely();
    const before = await tables();
    const range = { from: T0 - 10 * MIN, to: T0, now: T0 };
    await expectTockError(
      db.store.backfillRuns({ ...range, tenantId: uniqueId('other'), jobId: j.jobId }),
      'not_found',
    );
    await expectTockError(
      db.store.backfillRuns({ ...range, tenantId: j.tenantId, jobId: 'ghost' }),
      'not_found',
    );
    expect(await tables()).toEqual(before);
  });

  test('a job deleted between its read and the insert is not found, and no run is left behind', async () => {
    const j = await minutely();
    const pool = db.newPool(2);
    const store = new PostgresStore(
      pauseAfter(
        pool,
        (sql) => sql === jobGet,
        async () => {
          await db.store.deleteJob({ ...j, now: T0 });
        },
      ),
    );
    await expectTockError(store.backfillRuns({ ...j, from: T0 - 10 * MIN, to: T0, now: T0 }), 'not_found');
    expect(await countRows(db.pool, 'runs', 'tenant_id = $1', [j.tenantId])).toBe(0);
  });
});

describe('triggerRun with a payload', () => {
  test("the given payload is the run's, the job's stays; null and a string are payloads too", async () => {
    const j = await minutely();
    const own = await db.store.triggerRun({ ...j, scheduledFor: T0, payload: { n: 2, list: [1] }, now: T0 });
    expect(own.payload).toEqual({ n: 2, list: [1] });
    expect((await db.store.getRun({ tenantId: j.tenantId, runId: own.runId })).payload).toEqual({
      n: 2,
      list: [1],
    });
    expect((await db.store.getJob(j)).payload).toEqual({ n: 1 });
    const none = await db.store.triggerRun({ ...j, scheduledFor: T0 + 1, payload: null, now: T0 });
    expect(none.payload).toBeNull();
    const text = await db.store.triggerRun({ ...j, scheduledFor: T0 + 2, payload: 'hello', now: T0 });
    expect(text.payload).toBe('hello');
    const plain = await db.store.triggerRun({ ...j, scheduledFor: T0 + 3, now: T0 });
    expect(plain.payload).toEqual({ n: 1 });
    const claimed = await db.store.claimRuns({ workerId: 'w', pool: j.tenantId, max: 4, now: T0 + 10 });
    expect(claimed.map((r) => r.payload)).toEqual([{ n: 2, list: [1] }, null, 'hello', { n: 1 }]);
  });

  test('a payload a job could not have is refused, naming where, and nothing is written', async () => {
    const j = await minutely();
    const before = await tables();
    const cases: [unknown, string][] = [
      ['x'.repeat(64 * 1024), 'payload'],
      [{ a: 'x\u0000' }, 'payload.a'],
      [{ a: [1, Number.POSITIVE_INFINITY] }, 'payload.a[1]'],
      [{ f: () => 1, big: 10n }, 'payload'],
    ];
    for (const [payload, field] of cases) {
      const err = await expectTockError(
        db.store.triggerRun({ ...j, scheduledFor: T0, payload, now: T0 }),
        'validation_error',
      );
      expect(err.details.field).toBe(field);
    }
    expect(await tables()).toEqual(before);
    // The largest accepted: 64 KiB serialised (the quotes count).
    const largest = 'x'.repeat(64 * 1024 - 2);
    expect((await db.store.triggerRun({ ...j, scheduledFor: T0, payload: largest, now: T0 })).payload).toBe(
      largest,
    );
  });
});
