/**
 * Backlog control at the claim (issue 18): a job's concurrency cap and overlap policy, named limits
 * (rate, burst, concurrency) and the tenant's own limit, fair claims across tenants, and slots
 * given back by every end of an attempt. Real PostgreSQL, the store's own statements.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { JobInput } from '../../src/core/index.js';
import { slotHolders } from '../../src/store/queries/gates.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { expectTockError, job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const POOL = 'default';

/** Defines a limit with SQL (the operator's API is tested with its routes). */
async function defineLimit(
  tenantId: string,
  key: string,
  l: { rate?: number; burst?: number; cap?: number },
): Promise<void> {
  await db.pool.query(
    `INSERT INTO limits (tenant_id, key, rate, burst, tokens, refilled_at, max_concurrency, created_at, updated_at)
     VALUES ($1, $2, $3, $4, COALESCE($4, 0), $5, $6, $5, $5)`,
    [tenantId, key, l.rate ?? null, l.burst ?? null, new Date(db.clock.nowMs()), l.cap ?? null],
  );
}

/** Registers a job and triggers one run per slot (ms); the run ids in slot order. */
async function jobWithRuns(tenantId: string, slots: number[], overrides: Partial<JobInput> = {}) {
  const def = job(overrides);
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  const ids: string[] = [];
  for (const scheduledFor of slots) {
    ids.push(
      (await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor, now: db.clock.nowMs() })).runId,
    );
  }
  return { jobId: def.jobId, ids };
}

const claim = (tenantId: string | undefined, max: number, now = db.clock.nowMs()) =>
  db.store.claimRuns({ workerId: 'w-backlog', pool: POOL, max, now, ...(tenantId ? { tenantId } : {}) });

async function limitRow(tenantId: string, key: string) {
  const { rows } = await db.pool.query(
    `SELECT in_use, tokens, (SELECT count(*)::int FROM (${slotHolders('ARRAY[l.gate]')}) h) AS holds
     FROM limit_states l WHERE tenant_id = $1 AND key = $2`,
    [tenantId, key],
  );
  return rows[0] as { in_use: number; tokens: number; holds: number } | undefined;
}

const past = (n: number) => Array.from({ length: n }, (_, i) => db.clock.nowMs() - (n - i) * 1000);

describe("a job's max_concurrency", () => {
  test('at most N of its runs are running; a completion frees a slot for the next claim', async () => {
    const t = uniqueId('t-cap');
    const { jobId, ids } = await jobWithRuns(t, past(5), { maxConcurrency: 2 });
    const first = await claim(t, 10);
    expect(first.map((r) => r.runId)).toEqual(ids.slice(0, 2));
    expect(await claim(t, 10)).toEqual([]);
    expect(await limitRow(t, `job:${jobId}`)).toMatchObject({ in_use: 2, holds: 2 });
    await db.store.completeRuns({ leases: [first[0]!], now: db.clock.nowMs() });
    expect((await claim(t, 10)).map((r) => r.runId)).toEqual([ids[2]]);
    expect(await limitRow(t, `job:${jobId}`)).toMatchObject({ in_use: 2, holds: 2 });
  });

  test('removing the cap removes the gate; the runs claim freely', async () => {
    const t = uniqueId('t-uncap');
    const { jobId } = await jobWithRuns(t, past(3), { maxConcurrency: 1 });
    expect(await claim(t, 10)).toHaveLength(1);
    await upsertJob(db.store, {
      tenantId: t,
      job: job({ jobId, maxConcurrency: null }),
      now: db.clock.nowMs(),
    });
    expect(await limitRow(t, `job:${jobId}`)).toBeUndefined();
    expect(await claim(t, 10)).toHaveLength(2);
  });

  test('overlap skip or queue with max_concurrency above 1 is refused, naming the field', async () => {
    const t = uniqueId('t-contra');
    const err = await expectTockError(
      upsertJob(db.store, {
        tenantId: t,
        job: job({ overlap: 'queue', maxConcurrency: 2 }),
        now: db.clock.nowMs(),
      }),
      'validation_error',
    );
    expect(err.details.field).toBe('max_concurrency');
  });
});

describe('overlap policies', () => {
  test('queue: a later slot waits until the earlier run ends, then runs', async () => {
    const t = uniqueId('t-queue');
    const now = db.clock.nowMs();
    const { ids } = await jobWithRuns(t, [now - 2000, now - 1000], { overlap: 'queue' });
    const [a] = await claim(t, 10);
    expect(a?.runId).toBe(ids[0]);
    expect(await claim(t, 10, now + 5000)).toEqual([]);
    await db.store.completeRuns({ leases: [a!], now: now + 6000 });
    expect((await claim(t, 10, now + 6000)).map((r) => r.runId)).toEqual([ids[1]]);
  });

  test('skip: a slot that arrives while the earlier run runs is skipped; one that arrives after it ended runs', async () => {
    const t = uniqueId('t-skip');
    const now = db.clock.nowMs();
    const { jobId, ids } = await jobWithRuns(t, [now - 1000, now + 2000, now + 4000, now + 9000], {
      overlap: 'skip',
    });
    const [a] = await claim(t, 10, now);
    expect(a?.runId).toBe(ids[0]);
    // The slot at +2 s arrives while A runs: dropped at the first claim that sees it.
    expect(await claim(t, 10, now + 3000)).toEqual([]);
    // A ends at +5 s; the slot at +4 s arrived while it ran: dropped though no claim saw it in time.
    await db.store.completeRuns({ leases: [a!], now: now + 5000 });
    // The slot at +9 s arrives after A ended: it runs.
    expect((await claim(t, 10, now + 9000)).map((r) => r.runId)).toEqual([ids[3]]);
    const page = await db.store.listRuns({ tenantId: t, state: 'skipped', limit: 10 });
    expect(page.items.map((r) => r.runId).sort()).toEqual([ids[1], ids[2]].sort());
    expect(page.items.every((r) => r.jobId === jobId && r.finishedAt !== null)).toBe(true);
  });

  test('skip does not drop a run that was already waiting when the earlier run started (a backlog)', async () => {
    const t = uniqueId('t-skip-backlog');
    const now = db.clock.nowMs();
    const { ids } = await jobWithRuns(t, [now - 3000, now - 2000], { overlap: 'skip' });
    const [a] = await claim(t, 10, now);
    expect(a?.runId).toBe(ids[0]);
    expect(await claim(t, 10, now + 1000)).toEqual([]);
    await db.store.completeRuns({ leases: [a!], now: now + 2000 });
    expect((await claim(t, 10, now + 2000)).map((r) => r.runId)).toEqual([ids[1]]);
  });
});

describe('named limits', () => {
  test('rate and burst: a claim takes at most the whole tokens; they refill at the rate', async () => {
    const t = uniqueId('t-rate');
    // 10/s, burst 2: the bucket binds (its one-second window of max(2, 10) = 10 starts never does here).
    await defineLimit(t, 'api', { rate: 10, burst: 2 });
    const now = db.clock.nowMs();
    await jobWithRuns(t, past(30), { limits: ['api'] });
    expect(await claim(t, 100, now)).toHaveLength(2);
    expect(await claim(t, 100, now)).toHaveLength(0);
    expect(await claim(t, 100, now + 150)).toHaveLength(1); // 1.5 tokens
    expect(await claim(t, 100, now + 250)).toHaveLength(1); // 0.5 + 1.0
    expect(await claim(t, 100, now + 60_000)).toHaveLength(2); // never more than the burst
  });

  test('rate and burst: the burst, then no more than max(burst, ceil(rate)) in any second', async () => {
    const t = uniqueId('t-window');
    await defineLimit(t, 'api', { rate: 5, burst: 5 });
    // On a 50 ms sub-window's start: the burst's sub-window is [now, now + 50).
    const now = Math.ceil(db.clock.nowMs() / 50) * 50;
    await jobWithRuns(t, past(30), { limits: ['api'] });
    expect(await claim(t, 100, now)).toHaveLength(5);
    // A second later the bucket is full again, but the burst is still within the last second.
    expect(await claim(t, 100, now + 1049)).toHaveLength(0);
    expect(await claim(t, 100, now + 1050)).toHaveLength(5);
  });

  test("a limit's concurrency spans every job that names it", async () => {
    const t = uniqueId('t-shared');
    await defineLimit(t, 'db', { cap: 3 });
    await jobWithRuns(t, past(4), { limits: ['db'] });
    await jobWithRuns(t, past(4), { limits: ['db'] });
    expect(await claim(t, 100)).toHaveLength(3);
    expect(await limitRow(t, 'db')).toMatchObject({ in_use: 3, holds: 3 });
  });

  test('a claim that skips limited runs fills its batch from the others', async () => {
    const t = uniqueId('t-fill');
    await defineLimit(t, 'slow', { rate: 1, burst: 1 });
    const now = db.clock.nowMs();
    // The limited runs come first in the queue; ten free runs after them.
    await jobWithRuns(
      t,
      past(20).map((ms) => ms - 100_000),
      { limits: ['slow'] },
    );
    const free = await jobWithRuns(t, past(10));
    const first = await claim(t, 5, now);
    expect(first).toHaveLength(5);
    const second = await claim(t, 5, now);
    expect(second).toHaveLength(5);
    expect(second.every((r) => free.ids.includes(r.runId))).toBe(true);
  });

  test("the tenant's own limit holds every run of the tenant, and no other tenant's", async () => {
    const t = uniqueId('t-tenant');
    const other = uniqueId('t-other');
    await defineLimit(t, `tenant:${t}`, { cap: 2 });
    await jobWithRuns(t, past(5));
    await jobWithRuns(other, past(5));
    expect(await claim(t, 10)).toHaveLength(2);
    expect(await claim(other, 10)).toHaveLength(5);
  });

  test('a job naming a limit its tenant has not defined is refused, nothing written', async () => {
    const t = uniqueId('t-unknown');
    await defineLimit(uniqueId('t-elsewhere'), 'api', { cap: 1 });
    const def = job({ limits: ['api'] });
    const err = await expectTockError(
      upsertJob(db.store, { tenantId: t, job: def, now: db.clock.nowMs() }),
      'validation_error',
    );
    expect(err.details.field).toBe('limits[0]');
    await expectTockError(db.store.getJob({ tenantId: t, jobId: def.jobId }), 'not_found');
  });
});

describe('slots are given back by every end of an attempt', () => {
  test('complete, fail (retry and dead), release, cancel and reap each give back the slot', async () => {
    const t = uniqueId('t-giveback');
    await defineLimit(t, 'db', { cap: 8 });
    const now = db.clock.nowMs();
    await jobWithRuns(t, past(8), { limits: ['db'], maxAttempts: 2 });
    const runs = await claim(t, 8, now);
    expect(runs).toHaveLength(8);
    expect(await limitRow(t, 'db')).toMatchObject({ in_use: 8, holds: 8 });
    const [c, f1, f2, rel, can, ...rest] = runs;
    await db.store.completeRuns({ leases: [c!], now });
    await db.store.failRun({ runId: f1!.runId, leaseToken: f1!.leaseToken, error: 'x', now });
    await db.store.failRun({
      runId: f2!.runId,
      leaseToken: f2!.leaseToken,
      error: 'x',
      permanent: true,
      now,
    });
    await db.store.releaseRuns({ leases: [rel!], now, reason: 'shutdown' });
    await db.store.cancelRun({ tenantId: t, runId: can!.runId, now });
    expect(await limitRow(t, 'db')).toMatchObject({ in_use: 3, holds: 3 });
    // The other three expire and are reaped.
    await db.store.reapExpired({ now: now + 10 * 60_000, batchSize: 100 });
    expect(rest).toHaveLength(3);
    expect(await limitRow(t, 'db')).toMatchObject({ in_use: 0, holds: 0 });
  });
});

describe('fair claims across tenants', () => {
  test("a quiet tenant's one run is in the next claim, ahead of a noisy tenant's older backlog", async () => {
    const pool = uniqueId('fair');
    const noisy = uniqueId('t-noisy');
    const quiet = uniqueId('t-quiet');
    const now = db.clock.nowMs();
    await jobWithRuns(
      noisy,
      Array.from({ length: 300 }, (_, i) => now - 600_000 + i * 10),
      { pool },
    );
    const { ids } = await jobWithRuns(quiet, [now - 1000], { pool });
    const batch = await db.store.claimRuns({ workerId: 'w', pool, max: 10, now });
    expect(batch).toHaveLength(10);
    expect(batch.map((r) => r.runId)).toContain(ids[0]);
  });
});

describe('a backfill', () => {
  test("its runs take the job's named limits: they drain at the limit's rate", async () => {
    const t = uniqueId('t-backfill');
    await defineLimit(t, 'api', { rate: 50, burst: 50 });
    const def = job({ schedule: '@every 1s', limits: ['api'] });
    const now = db.clock.nowMs();
    await upsertJob(db.store, { tenantId: t, job: def, now });
    const made = await db.store.backfillRuns({
      tenantId: t,
      jobId: def.jobId,
      from: now - 1_000_000,
      to: now - 900_000,
      now,
    });
    expect(made.created).toBe(100);
    expect(await claim(t, 1000, now)).toHaveLength(50);
    // Half a second on, the bucket holds 25 again, but 50 started within the last second.
    expect(await claim(t, 1000, now + 500)).toHaveLength(0);
    // Once the burst's 50 ms sub-window has left the last second: the bucket, full again.
    expect(await claim(t, 1000, now + 1050)).toHaveLength(50);
  });
});
