/**
 * A limit's one-second window (issue 18's pacing): besides its token bucket, a limit with a rate
 * lets at most max(burst, ⌈rate⌉) runs start in any second of the claims' instants. A bucket alone
 * lets any span of d seconds take burst + rate × d, so a second right after the burst could take
 * twice the rate.
 *
 * Eight claimers, each on its own connection, claim at once through the store at instants the test
 * chooses (rounds 37 ms apart, off the 50 ms grain), from a backlog on one limit of 50/s, burst 50;
 * checked afterwards on the record of claim instants: no window of one second holds more than 50,
 * and the pacing keeps up with the rate. Then the grain: a burst is counted until its 50 ms
 * sub-window has wholly left the last second (1 s + 50 ms at most), and what the API and the idle
 * claimers' wake-up answer meanwhile.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { PostgresStore } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { job, queueLimitedRuns, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
const stores: PostgresStore[] = [];
beforeAll(async () => {
  db = await setupDatabase();
  for (let i = 0; i < 8; i++) stores.push(db.newStore());
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await db.teardown();
});

const RATE = 50;
const BURST = 50;

/** A tenant with a limit `api` (50/s, burst 50) and `n` ready runs of a job naming it, in `pool`. */
async function backlog(n: number): Promise<{ tenantId: string; pool: string }> {
  const tenantId = uniqueId('t-window');
  const pool = uniqueId('pool-window');
  await db.store.putLimit({ tenantId, key: 'api', limit: { rate: RATE, burst: BURST }, now: T0 - 60_000 });
  const def = job({ pool, handler: 'call-api', limits: ['api'] });
  await upsertJob(db.store, { tenantId, job: def, now: T0 - 60_000 });
  await queueLimitedRuns(db.pool, { tenantId, jobId: def.jobId, pool, n, at: T0 });
  return { tenantId, pool };
}

/** The most of the sorted instants `at` in any window [at[i], at[i] + ms). */
function mostInWindow(at: readonly number[], ms: number): { most: number; from: number } {
  let most = 0;
  let from = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (j < at.length && at[j]! < at[i]! + ms) j++;
    if (j - i > most) {
      most = j - i;
      from = at[i]!;
    }
  }
  return { most, from };
}

test('eight concurrent claimers never start more than max(burst, ceil(rate)) in any second of claim instants', async () => {
  const { pool } = await backlog(600);
  const STEP_MS = 37;
  const ROUNDS = 150; // 5.55 s
  const claimedAt: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const now = T0 + round * STEP_MS;
    const answers = await Promise.all(
      stores.map((store, i) => store.claimRuns({ workerId: `w-${i}`, pool, max: 7, now })),
    );
    for (const runs of answers) for (const _ of runs) claimedAt.push(now);
  }
  claimedAt.sort((a, b) => a - b);
  const { most, from } = mostInWindow(claimedAt, 1000);
  expect(most, `claims in [+${from - T0}, +${from - T0 + 1000}) ms`).toBeLessThanOrEqual(BURST);
  // Paced, not starved: the burst, then about the rate (a second plus at most a grain per batch).
  const lastMs = (ROUNDS - 1) * STEP_MS;
  expect(claimedAt.length).toBeGreaterThanOrEqual(BURST + Math.floor(((lastMs - 1050) * RATE) / 1050));
});

test('a burst counts until its 50 ms sub-window has left the last second; the API and the wake-up say so', async () => {
  const { tenantId, pool } = await backlog(200);
  const claim = (ms: number, max = 100) =>
    stores[0]!.claimRuns({ workerId: 'w-burst', pool, max, now: T0 + ms });
  // The burst at +10 ms: sub-window [T0, T0 + 50).
  expect(await claim(10)).toHaveLength(BURST);
  // At +500 ms the bucket has 24.5 tokens again, but the window is full: no room.
  const limit = await db.store.getLimit({ tenantId, key: 'api', now: T0 + 500 });
  expect(limit.tokens).toBe(0);
  expect(await claim(500)).toEqual([]);
  // An idle claimer that found nothing at +500 wakes when the burst's sub-window leaves the window.
  expect(await db.store.nextAvailableAt({ pool, now: T0 + 500 })).toEqual(new Date(T0 + 1050));
  // Still counted at +1049 ms (the sub-window [T0, T0 + 50) meets (T0 + 49, T0 + 1049]), gone at +1050.
  expect(await claim(1049)).toEqual([]);
  expect((await db.store.getLimit({ tenantId, key: 'api', now: T0 + 1050 })).tokens).toBe(BURST);
  expect(await claim(1050, 30)).toHaveLength(30);
  // 30 in the window now; the bucket has 20 left (50 − 30, then refilling): room 20 at once, and the
  // window caps what the refill would add until +2100.
  expect((await db.store.getLimit({ tenantId, key: 'api', now: T0 + 1050 })).tokens).toBe(20);
  expect(await claim(1500)).toHaveLength(20);
  expect(await claim(2099)).toEqual([]);
  expect(await claim(2100)).toHaveLength(30);
  // The row keeps at most the live sub-windows.
  const { rows } = await db.pool.query(
    `SELECT recent_at, recent_n FROM limits WHERE tenant_id = $1 AND key = 'api'`,
    [tenantId],
  );
  expect(rows[0].recent_at.map(Number)).toEqual([(T0 + 1500) / 50, (T0 + 2100) / 50]);
  expect(rows[0].recent_n).toEqual([20, 30]);
});

test('a replaced limit keeps its window; a new one starts with none', async () => {
  const { tenantId, pool } = await backlog(100);
  expect(await stores[0]!.claimRuns({ workerId: 'w-put', pool, max: 100, now: T0 + 10 })).toHaveLength(BURST);
  // Raised to 80/s, burst 80, at +100: 50 started this second count against the new cap of 80.
  const { limit } = await db.store.putLimit({
    tenantId,
    key: 'api',
    limit: { rate: 80, burst: 80 },
    now: T0 + 100,
  });
  expect(limit.tokens).toBe(4.5); // the bucket: 0 + 50/s × 0.09 s, under the window's room of 30
  expect((await db.store.getLimit({ tenantId, key: 'api', now: T0 + 1000 })).tokens).toBe(30);
  const other = await db.store.putLimit({ tenantId, key: 'other', limit: { rate: 1, burst: 3 }, now: T0 });
  expect(other.limit.tokens).toBe(3);
  const { rows } = await db.pool.query(
    `SELECT recent_at, recent_n FROM limits WHERE tenant_id = $1 AND key = 'other'`,
    [tenantId],
  );
  expect(rows[0]).toEqual({ recent_at: null, recent_n: null });
});
