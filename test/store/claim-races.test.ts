/**
 * Two statements ending runs of one claim at once (an HTTP worker completes a claim's runs one
 * request each, concurrently): the second waits for the first's lock on the claim, and must then
 * take its run off the claim as the first left it. It decided on the list its snapshot saw (both
 * runs), so it neither shrank the claim nor deleted it: the claim kept listing a succeeded run,
 * counted as running until its lease expired.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import * as R from '../../src/store/queries/runs.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

/** Two runs of one claim. */
async function claimOfTwo() {
  const pool = uniqueId('p');
  const def = job({ pool });
  const now = db.clock.nowMs();
  await upsertJob(db.store, { tenantId: 't', job: def, now });
  for (const ms of [2000, 1000]) {
    await db.store.triggerRun({ tenantId: 't', jobId: def.jobId, scheduledFor: now - ms, now });
  }
  const runs = await db.store.claimRuns({ workerId: 'w', pool, max: 2, now, tenantId: 't' });
  expect(new Set(runs.map((r) => r.leaseToken)).size).toBe(1);
  return runs;
}

/** Waits (bounded) until a backend of this schema's pools waits on a lock. */
async function someoneWaitsOnALock(): Promise<void> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%run_claims%'",
    );
    if (rows[0].n > 0) return;
    if (Date.now() > deadline) throw new Error('no statement waited on the claim lock');
    await new Promise((r) => setTimeout(r, 5));
  }
}

for (const [name, second] of [
  ['completion', 'complete'],
  ['release', 'release'],
  ['failure', 'fail'],
] as const) {
  test(`a ${name} that waited for a completion of another run of the claim takes its run off the claim`, async () => {
    const [a, b] = await claimOfTwo();
    const now = db.clock.nowMs();
    const first = await db.newPool(1).connect();
    try {
      await first.query('BEGIN');
      const done = await first.query(R.runCompleteMany, [
        [a!.runId],
        [a!.leaseToken],
        new Date(now),
        null,
        [null],
        [null],
        null,
      ]);
      // It answers the runs it did not complete: none.
      expect(done.rows).toEqual([]);
      const other = db.newStore();
      const lease = { runId: b!.runId, leaseToken: b!.leaseToken };
      const waiting =
        second === 'complete'
          ? other.completeRuns({ leases: [lease], now })
          : second === 'release'
            ? other.releaseRuns({ leases: [lease], reason: 'test', now })
            : other.failRun({ ...lease, error: 'boom', now });
      await someoneWaitsOnALock();
      await first.query('COMMIT');
      await waiting;
    } finally {
      first.release();
    }
    expect(
      (await db.pool.query('SELECT run_ids FROM run_claims WHERE lease_token = $1', [a!.leaseToken])).rows,
    ).toEqual([]);
  });
}
