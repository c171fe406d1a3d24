/**
 * How the end of an attempt gives concurrency slots back (migration 0015): it adds them to the
 * limit's release totals without locking the limit row, so completions never queue behind the
 * claims that hold it; the slots count as free at once for every reader (`limit_states`, the
 * store's limit reads) and the next claim through the limit folds them into `in_use`. A job's gate
 * with overlap `skip` is still written at once. Real PostgreSQL, the store's own statements.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { JobInput } from '../../src/core/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const past = (n: number) => Array.from({ length: n }, (_, i) => db.clock.nowMs() - (n - i) * 1000);

async function jobWithRuns(tenantId: string, n: number, overrides: Partial<JobInput> = {}) {
  const def = job(overrides);
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  for (const scheduledFor of past(n))
    await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor, now: db.clock.nowMs() });
  return def.jobId;
}

const claim = (tenantId: string, max: number) =>
  db.store.claimRuns({ workerId: 'w-releases', pool: 'default', max, now: db.clock.nowMs(), tenantId });

/** The limit row as stored (`raw`) and as it stands (`limit_states`). */
async function slots(tenantId: string, key: string) {
  const { rows } = await db.pool.query(
    `SELECT l.in_use AS raw, s.in_use AS now, l.released
     FROM limits l JOIN limit_states s ON s.gate = l.gate WHERE l.tenant_id = $1 AND l.key = $2`,
    [tenantId, key],
  );
  return rows[0] as { raw: number; now: number; released: string };
}

describe('releases', () => {
  test('a completion does not wait for a transaction that holds the limit row', async () => {
    const t = uniqueId('t-nolock');
    await db.store.putLimit({ tenantId: t, key: 'db', limit: { maxConcurrency: 5 }, now: db.clock.nowMs() });
    await jobWithRuns(t, 3, { limits: ['db'] });
    const runs = await claim(t, 3);
    expect(runs).toHaveLength(3);

    // Another session holds the limit row, as a claim does until it commits.
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT * FROM limits WHERE tenant_id = $1 AND key = 'db' FOR NO KEY UPDATE`, [t]);
      const done = db.store.completeRuns({ leases: runs, now: db.clock.nowMs() });
      const waited = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 3000).unref());
      const outcome = await Promise.race([done.then((r) => r.completed.length), waited]);
      expect(outcome).toBe(3);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    // Free for every reader at once; the row itself is not written until a claim folds.
    expect(await slots(t, 'db')).toMatchObject({ raw: 3, now: 0 });
    expect((await db.store.getLimit({ tenantId: t, key: 'db', now: db.clock.nowMs() })).inUse).toBe(0);
  });

  test('the next claim through the limit folds the releases, once, and has their slots', async () => {
    const t = uniqueId('t-fold');
    await db.store.putLimit({ tenantId: t, key: 'db', limit: { maxConcurrency: 2 }, now: db.clock.nowMs() });
    await jobWithRuns(t, 6, { limits: ['db'] });
    const first = await claim(t, 10);
    expect(first).toHaveLength(2);
    await db.store.completeRuns({ leases: first, now: db.clock.nowMs() });
    expect(await slots(t, 'db')).toMatchObject({ raw: 2, now: 0, released: '0' });

    const second = await claim(t, 10);
    expect(second).toHaveLength(2);
    expect(await slots(t, 'db')).toMatchObject({ raw: 2, now: 2, released: '2' });
    // A claim with nothing new to fold changes nothing: the limit is full.
    expect(await claim(t, 10)).toHaveLength(0);
    expect(await slots(t, 'db')).toMatchObject({ raw: 2, now: 2, released: '2' });

    await db.store.completeRuns({ leases: [second[0]!], now: db.clock.nowMs() });
    await db.store.failRun({
      runId: second[1]!.runId,
      leaseToken: second[1]!.leaseToken,
      error: 'x',
      permanent: true,
      now: db.clock.nowMs(),
    });
    expect(await slots(t, 'db')).toMatchObject({ raw: 2, now: 0, released: '2' });
    expect(await claim(t, 10)).toHaveLength(2);
    expect(await slots(t, 'db')).toMatchObject({ raw: 2, now: 2, released: '4' });
  });

  test('a limit made again does not take the releases of the runs its old row counted', async () => {
    const t = uniqueId('t-again');
    const now = db.clock.nowMs();
    await db.store.putLimit({ tenantId: t, key: 'db', limit: { maxConcurrency: 3 }, now });
    const jobId = await jobWithRuns(t, 3, { limits: ['db'] });
    const runs = await claim(t, 3);
    expect(runs).toHaveLength(3);
    // Two end under the old row; the limit goes (no job lists it any more) and comes back.
    await db.store.completeRuns({ leases: runs.slice(0, 2), now });
    await upsertJob(db.store, { tenantId: t, job: { ...job({ jobId }), limits: [] }, now });
    await db.store.deleteLimit({ tenantId: t, key: 'db' });
    const again = await db.store.putLimit({ tenantId: t, key: 'db', limit: { maxConcurrency: 3 }, now });
    // It counts the one run still holding a slot, and none of the old row's releases.
    expect(again.limit.inUse).toBe(1);
    await db.store.completeRuns({ leases: runs.slice(2), now });
    expect(await slots(t, 'db')).toMatchObject({ now: 0 });
  });

  test("a job's skip gate is written at once, with when its slot was freed", async () => {
    const t = uniqueId('t-skipgate');
    const jobId = await jobWithRuns(t, 1, { overlap: 'skip' });
    const [run] = await claim(t, 1);
    expect(run).toBeDefined();
    await db.store.completeRuns({ leases: [run!], now: db.clock.nowMs() });
    const { rows } = await db.pool.query(
      `SELECT in_use, freed_at FROM limits WHERE tenant_id = $1 AND key = $2`,
      [t, `job:${jobId}`],
    );
    expect(rows[0]).toEqual({ in_use: 0, freed_at: new Date(db.clock.nowMs()) });
    const totals = await db.pool.query(
      'SELECT count(*)::int AS n FROM limit_releases r JOIN limits l ON l.id = r.limit_id WHERE l.tenant_id = $1',
      [t],
    );
    expect(totals.rows[0].n).toBe(0);
  });
});
