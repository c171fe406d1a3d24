/**
 * Fair claims across tenants (issue 18): one tenant's backlog does not delay another tenant's first
 * ready run by more than the documented bound, a tenant's first ready run is claimed within
 * ceil(T / batch) claims when T tenants have ready runs. Real PostgreSQL, the store's claim; the
 * backlogs are seeded in bulk (`queueRuns`: runs and their queue rows, `job_id` set).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { job, queueRuns, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

/** A job of `tenantId` in `pool`, priority 0 (its runs' `sort_key` is their `available_at`). */
async function defineJob(tenantId: string, pool: string): Promise<string> {
  const def = job({ pool, priority: 0 });
  await upsertJob(db.store, { tenantId, job: def, now: T0 });
  return def.jobId;
}

const analyze = () => db.pool.query('ANALYZE runs, run_queue');

describe('a noisy tenant with 10,000 ready runs and a quiet tenant with one', () => {
  test("the quiet tenant's run is in the first claim made after it became available", async () => {
    const pool = uniqueId('fair-noisy');
    const noisy = uniqueId('t-noisy');
    const noisyJob = await defineJob(noisy, pool);
    // Ten thousand runs, all ready well before the quiet runs become available.
    await queueRuns(db.pool, {
      tenantId: noisy,
      jobId: noisyJob,
      pool,
      n: 10_000,
      firstMs: T0 - 600_000,
      stepMs: 10,
    });
    await analyze();
    const quiet = [uniqueId('t-quiet'), uniqueId('t-quiet')];
    const quietRuns: string[] = [];
    for (const [i, tenantId] of quiet.entries()) {
      const jobId = await defineJob(tenantId, pool);
      const run = await db.store.triggerRun({ tenantId, jobId, scheduledFor: T0 + 1000 * (i + 1), now: T0 });
      quietRuns.push(run.runId);
    }
    const claimers = ['w1', 'w2', 'w3', 'w4'];
    const claimAll = (now: number) =>
      Promise.all(claimers.map((workerId) => db.store.claimRuns({ workerId, pool, max: 10, now })));

    // Before the first quiet run is available, four claimers at a time take only noisy runs.
    for (let ms = 0; ms < 1000; ms += 250) {
      const batches = await claimAll(T0 + ms);
      for (const batch of batches) {
        expect(batch).toHaveLength(10);
        expect(batch.every((r) => r.tenantId === noisy)).toBe(true);
      }
    }
    // The first claim once it is available has it, ahead of 9,840 older noisy runs.
    const first = await db.store.claimRuns({ workerId: 'w1', pool, max: 10, now: T0 + 1000 });
    expect(first).toHaveLength(10);
    expect(first.map((r) => r.runId)).toContain(quietRuns[0]);

    // Four claimers at once when the second becomes available: exactly one claim has it.
    const batches = await claimAll(T0 + 2000);
    const having = batches.filter((b) => b.some((r) => r.runId === quietRuns[1]));
    expect(having).toHaveLength(1);
    expect(batches.flat()).toHaveLength(40);
  });
});

// The claim takes the runs in sort_key order when it finds one tenant with ready runs: it looks for
// another on both sides of the first run's tenant in tenant order, so a quiet tenant is seen whether
// its id sorts before the noisy one's or after it.
describe.each([
  ['before', 'a-quiet'],
  ['after', 'z-quiet'],
])("a quiet tenant whose id sorts %s the noisy tenant's", (_side, prefix) => {
  test('has its one ready run in the next claim, ahead of 1,000 older runs', async () => {
    const pool = uniqueId('fair-side');
    const noisy = uniqueId('m-noisy');
    await queueRuns(db.pool, {
      tenantId: noisy,
      jobId: await defineJob(noisy, pool),
      pool,
      n: 1000,
      firstMs: T0 - 600_000,
      stepMs: 10,
    });
    await analyze();
    // Ten runs of the noisy tenant claimed and completed: dead rows at the front of the queue's indexes.
    const taken = await db.store.claimRuns({ workerId: 'w', pool, max: 10, now: T0 });
    expect(taken.every((r) => r.tenantId === noisy)).toBe(true);
    await db.store.completeRuns({ leases: taken, now: T0 });
    const quiet = uniqueId(prefix);
    const { runId } = await db.store.triggerRun({
      tenantId: quiet,
      jobId: await defineJob(quiet, pool),
      scheduledFor: T0,
      now: T0,
    });
    const next = await db.store.claimRuns({ workerId: 'w', pool, max: 10, now: T0 });
    expect(next).toHaveLength(10);
    expect(next.map((r) => r.runId)).toContain(runId);
  });
});

/**
 * T tenants with 200 ready runs each; `layout` places their runs in the queue's order: `interleaved`
 * (every tenant's runs spread over the same span), or `blocks` (tenant 0's runs all before tenant
 * 1's, and so on: the later tenants' first runs are newer than the earlier tenants' whole backlogs).
 * Claims of `batch`, one after another: the claim number at which each tenant first got a run.
 */
async function firstClaimOfEachTenant(
  tenants: number,
  batch: number,
  layout: 'interleaved' | 'blocks',
): Promise<Map<string, number>> {
  const pool = uniqueId(`fair-${layout}`);
  const ids: string[] = [];
  const perTenant = 200;
  for (let i = 0; i < tenants; i++) {
    const tenantId = uniqueId(`t-${layout}`);
    ids.push(tenantId);
    const jobId = await defineJob(tenantId, pool);
    const base = T0 - 3_600_000;
    const [firstMs, stepMs] = layout === 'interleaved' ? [base + i, tenants] : [base + i * perTenant, 1];
    await queueRuns(db.pool, { tenantId, jobId, pool, n: perTenant, firstMs, stepMs });
  }
  await analyze();
  const first = new Map<string, number>();
  const claimsNeeded = Math.ceil(tenants / batch);
  for (let n = 1; n <= claimsNeeded * 4 && first.size < tenants; n++) {
    const runs = await db.store.claimRuns({ workerId: 'w', pool, max: batch, now: T0 });
    expect(runs).toHaveLength(batch);
    for (const r of runs) if (!first.has(r.tenantId)) first.set(r.tenantId, n);
  }
  for (const id of ids) if (!first.has(id)) first.set(id, Number.POSITIVE_INFINITY);
  return first;
}

describe("a tenant's first ready run is claimed within ceil(T / batch) claims when T tenants have ready runs (T ≤ 1000)", () => {
  for (const layout of ['interleaved', 'blocks'] as const) {
    test(`50 tenants with 200 ready runs each, claims of 10: every tenant within 5 claims (${layout})`, async () => {
      const first = await firstClaimOfEachTenant(50, 10, layout);
      const late = [...first].filter(([, n]) => n > 5);
      expect(late, `tenants first served after claim 5 (of ${first.size})`).toEqual([]);
    });
  }
});
