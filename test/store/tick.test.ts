/**
 * The tick: materialising due slots exactly once under concurrency, bounded batches, lookahead,
 * misfire policies after an outage, one-shots, and ad-hoc triggers.
 *
 * A tick scans every tenant's due jobs, so each test here starts from empty tables and from a
 * clock instant on the 10 s grid (`t0`).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { MisfirePolicy } from '../../src/core/index.js';
import type { RunRef } from '../../src/store/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { alignUp, countRows, expectTockError, job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const TEN_S = 10_000;
let t0: number;

beforeEach(async () => {
  await db.pool.query(
    'TRUNCATE jobs, job_successes, runs, attempts, attempt_progress, run_queue, run_claims',
  );
  db.clock.set(alignUp(db.clock.nowMs() + 1, TEN_S));
  t0 = db.clock.nowMs();
});

async function runCounts(): Promise<{ total: number; distinct: number }> {
  const { rows } = await db.pool.query(
    'SELECT count(*)::int AS total, count(DISTINCT (tenant_id, job_id, scheduled_for))::int AS distinct FROM run_states',
  );
  return rows[0];
}

async function slotsOf(tenantId: string, jobId: string): Promise<number[]> {
  const { rows } = await db.pool.query(
    'SELECT scheduled_for FROM run_states WHERE tenant_id = $1 AND job_id = $2 ORDER BY scheduled_for',
    [tenantId, jobId],
  );
  return rows.map((r) => (r.scheduled_for as Date).getTime());
}

/** The misfire record of a tenant's one job: slots dropped (bigint, as text) and the last misfire. */
async function misfireRecord(
  tenantId: string,
): Promise<{ misfired_slots: string; misfired_at: Date | null }> {
  const { rows } = await db.pool.query('SELECT misfired_slots, misfired_at FROM jobs WHERE tenant_id = $1', [
    tenantId,
  ]);
  return rows[0];
}

describe('exactly once', () => {
  test('two stores ticking the same 200 due jobs at the same instant create each (job, slot) once', async () => {
    const tenantId = uniqueId('t-herd');
    const ids = Array.from({ length: 200 }, (_, i) => `herd-${String(i).padStart(3, '0')}`);
    await Promise.all(ids.map((jobId) => upsertJob(db.store, { tenantId, job: job({ jobId }), now: t0 })));
    const other = db.newStore();

    for (let round = 0; round < 3; round++) {
      const now = db.clock.nowMs();
      // Round 0: one big tick each. Later rounds: each store drains in small batches, interleaving.
      const batchSize = round === 0 ? 500 : 15;
      const drain = async (store: typeof other) => {
        const out = { jobs: 0, created: [] as RunRef[], ticks: 0 };
        for (;;) {
          const r = await store.tick({ now, lookaheadMs: 0, batchSize });
          out.jobs += r.jobs;
          out.created.push(...r.created);
          out.ticks += 1;
          if (!r.full) return out;
        }
      };
      const results = await Promise.all([drain(db.store), drain(other)]);
      const created = results.flatMap((r) => r.created);
      expect(created).toHaveLength(200);
      expect(new Set(created.map((r) => r.jobId)).size).toBe(200);
      for (const r of created) expect(r.scheduledFor).toEqual(new Date(now));
      expect(results[0]!.jobs + results[1]!.jobs).toBe(200);
      expect(await runCounts()).toEqual({ total: 200 * (round + 1), distinct: 200 * (round + 1) });
      const next = await db.pool.query('SELECT DISTINCT next_run_at FROM jobs WHERE tenant_id = $1', [
        tenantId,
      ]);
      expect(next.rows.map((r) => r.next_run_at)).toEqual([new Date(now + TEN_S)]);
      db.clock.advance(TEN_S);
    }
  });

  test('replaying a tick at the same instant creates nothing, even when next_run_at is rewound', async () => {
    const tenantId = uniqueId('t-replay');
    const ids = Array.from({ length: 20 }, (_, i) => `replay-${i}`);
    await Promise.all(ids.map((jobId) => upsertJob(db.store, { tenantId, job: job({ jobId }), now: t0 })));
    const first = await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 100 });
    expect(first.jobs).toBe(20);
    expect(first.created).toHaveLength(20);

    const again = await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 100 });
    expect(again).toEqual({ jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] });
    expect(await runCounts()).toEqual({ total: 20, distinct: 20 });

    // A scheduler that did not see the advance (next_run_at back at t0): the unique slot holds.
    await db.pool.query('UPDATE jobs SET next_run_at = $1', [new Date(t0)]);
    const stale = await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 100 });
    expect(stale.jobs).toBe(20);
    expect(stale.created).toEqual([]);
    expect(await runCounts()).toEqual({ total: 20, distinct: 20 });
    const next = await db.pool.query('SELECT DISTINCT next_run_at FROM jobs');
    expect(next.rows.map((r) => r.next_run_at)).toEqual([new Date(t0 + TEN_S)]);
  });
});

describe('bounded batches', () => {
  test('25 due jobs with batch size 10: full, full, then drained, in next_run_at order', async () => {
    const tenantId = uniqueId('t-batch');
    // Job k fires at t0 + k s; ids are in a scrambled order so id order is not time order.
    const order = Array.from({ length: 25 }, (_, k) => k + 1);
    const idOf = (k: number) => `batch-${String((k * 7) % 25).padStart(2, '0')}-${k}`;
    await Promise.all(
      order.map((k) =>
        upsertJob(db.store, {
          tenantId,
          job: job({ jobId: idOf(k), schedule: `@at ${new Date(t0 + k * 1000).toISOString()}` }),
          now: t0,
        }),
      ),
    );
    db.clock.advance(30_000);
    const now = db.clock.nowMs();

    const ticks = [];
    for (let i = 0; i < 4; i++) ticks.push(await db.store.tick({ now, lookaheadMs: 0, batchSize: 10 }));
    expect(ticks.map((t) => [t.jobs, t.created.length, t.full])).toEqual([
      [10, 10, true],
      [10, 10, true],
      [5, 5, false],
      [0, 0, false],
    ]);
    const byTick = ticks.map((t) => t.created.map((r) => r.scheduledFor.getTime()).sort((a, b) => a - b));
    expect(byTick[0]).toEqual(order.slice(0, 10).map((k) => t0 + k * 1000));
    expect(byTick[1]).toEqual(order.slice(10, 20).map((k) => t0 + k * 1000));
    expect(byTick[2]).toEqual(order.slice(20).map((k) => t0 + k * 1000));
    expect(new Set(ticks[0]!.created.map((r) => r.jobId))).toEqual(new Set(order.slice(0, 10).map(idOf)));
    expect(await runCounts()).toEqual({ total: 25, distinct: 25 });
  });

  test('a batch exactly as large as the due jobs is full; the next tick finds none', async () => {
    await Promise.all(
      ['x1', 'x2', 'x3'].map((jobId) =>
        upsertJob(db.store, { tenantId: uniqueId('t-exact'), job: job({ jobId }), now: t0 }),
      ),
    );
    const one = await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 3 });
    expect([one.jobs, one.created.length, one.full]).toEqual([3, 3, true]);
    const two = await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 3 });
    expect(two).toEqual({ jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] });
  });
});

describe('lookahead', () => {
  test('a slot 500 ms ahead is materialised with lookahead 1000, available at the slot, never claimed early', async () => {
    const tenantId = uniqueId('t-ahead');
    const slot = t0 + TEN_S;
    db.clock.set(slot - 500);
    const now = db.clock.nowMs();
    const def = job();
    const { job: registered } = await upsertJob(db.store, { tenantId, job: def, now });
    expect(registered.nextRunAt).toEqual(new Date(slot));

    const short = await db.store.tick({ now, lookaheadMs: 499, batchSize: 10 });
    expect(short).toEqual({ jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] });

    const tick = await db.store.tick({ now, lookaheadMs: 1000, batchSize: 10 });
    expect(tick.created).toHaveLength(1);
    expect(tick.created[0]).toMatchObject({ tenantId, jobId: def.jobId, scheduledFor: new Date(slot) });
    const run = await db.store.getRun({ tenantId, runId: tick.created[0]!.runId });
    expect(run.state).toBe('pending');
    expect(run.availableAt).toEqual(new Date(slot));
    expect(run.createdAt).toEqual(new Date(now));
    expect((await db.store.getJob({ tenantId, jobId: def.jobId })).nextRunAt).toEqual(new Date(slot + TEN_S));

    const claim = (at: number) =>
      db.store.claimRuns({ workerId: 'w-early', pool: 'default', max: 10, now: at, tenantId });
    expect(await claim(now)).toEqual([]);
    expect(await claim(slot - 1)).toEqual([]);
    expect((await db.store.getRun({ tenantId, runId: run.runId })).state).toBe('pending');
    const got = await claim(slot);
    expect(got.map((c) => c.runId)).toEqual([run.runId]);
    expect(got[0]!.scheduledFor).toEqual(new Date(slot));
  });

  test('lookahead materialises every slot up to the horizon, and only those', async () => {
    const tenantId = uniqueId('t-ahead2');
    const def = job({ schedule: '@every 1s' });
    await upsertJob(db.store, { tenantId, job: def, now: t0 });
    const tick = await db.store.tick({ now: t0, lookaheadMs: 3_500, batchSize: 10 });
    expect(tick.created.map((r) => r.scheduledFor.getTime()).sort((a, b) => a - b)).toEqual([
      t0,
      t0 + 1000,
      t0 + 2000,
      t0 + 3000,
    ]);
    expect((await db.store.getJob({ tenantId, jobId: def.jobId })).nextRunAt).toEqual(new Date(t0 + 4000));
  });
});

describe('misfire after a 350 s outage', () => {
  const expected: Record<MisfirePolicy, { slots: number[]; dropped: number }> = {
    skip: { slots: [], dropped: 35 },
    fire_once: { slots: [350_000], dropped: 34 },
    catch_up: { slots: [330_000, 340_000, 350_000], dropped: 32 },
  };

  test.each(['skip', 'fire_once', 'catch_up'] as const)('%s', async (misfire) => {
    const tenantId = uniqueId(`t-misfire-${misfire}`);
    const def = job({ misfire, catchUpLimit: 3 });
    const { job: registered } = await upsertJob(db.store, { tenantId, job: def, now: t0 });
    expect(registered.nextRunAt).toEqual(new Date(t0));
    const first = await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 10 });
    expect(first.created.map((r) => r.scheduledFor)).toEqual([new Date(t0)]);

    db.clock.advance(350_000);
    const now = db.clock.nowMs();
    const after = await db.store.tick({ now, lookaheadMs: 0, batchSize: 10 });
    const want = expected[misfire];
    expect(after.jobs).toBe(1);
    expect(after.created.map((r) => r.scheduledFor.getTime()).sort((a, b) => a - b)).toEqual(
      want.slots.map((s) => t0 + s),
    );
    expect(after.dropped).toBe(want.dropped);
    // Recorded on the job (migration 0025), for every server's metrics.
    expect(await misfireRecord(tenantId)).toEqual({
      misfired_slots: String(want.dropped),
      misfired_at: new Date(now),
    });
    expect(await slotsOf(tenantId, def.jobId)).toEqual([t0, ...want.slots.map((s) => t0 + s)]);
    expect((await db.store.getJob({ tenantId, jobId: def.jobId })).nextRunAt).toEqual(new Date(t0 + 360_000));

    // And the job is back on time: the next tick at the next slot fires exactly that slot.
    db.clock.advance(TEN_S);
    const next = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 0, batchSize: 10 });
    expect(next.created.map((r) => r.scheduledFor)).toEqual([new Date(t0 + 360_000)]);
    expect(next.dropped).toBe(0);
    expect(await misfireRecord(tenantId)).toEqual({
      misfired_slots: String(want.dropped),
      misfired_at: new Date(now),
    });
  });

  test('a tick less than the misfire threshold late fires every missed slot, whatever the policy', async () => {
    const tenantId = uniqueId('t-late');
    const def = job({ misfire: 'skip' });
    await upsertJob(db.store, { tenantId, job: def, now: t0 });
    db.clock.advance(30_000);
    const tick = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 0, batchSize: 10 });
    expect(tick.dropped).toBe(0);
    expect(await misfireRecord(tenantId)).toEqual({ misfired_slots: '0', misfired_at: null });
    expect(await slotsOf(tenantId, def.jobId)).toEqual([t0, t0 + 10_000, t0 + 20_000, t0 + 30_000]);
    expect((await db.store.getJob({ tenantId, jobId: def.jobId })).nextRunAt).toEqual(new Date(t0 + 40_000));
  });

  test("a job's own misfire_threshold_seconds replaces the scheduler's 60 s", async () => {
    const tenantId = uniqueId('t-threshold');
    const strict = job({ misfire: 'skip', misfireThresholdSeconds: 10 });
    const lenient = job({ misfire: 'skip', misfireThresholdSeconds: 120 });
    const plain = job({ misfire: 'skip' });
    for (const def of [strict, lenient, plain]) await upsertJob(db.store, { tenantId, job: def, now: t0 });
    const shown = await db.store.getJob({ tenantId, jobId: plain.jobId });
    expect([shown.misfireThresholdSeconds, shown.misfireAfterSeconds]).toEqual([null, 60]);
    const own = await db.store.getJob({ tenantId, jobId: strict.jobId });
    expect([own.misfireThresholdSeconds, own.misfireAfterSeconds]).toEqual([10, 10]);

    // 30 s late: behind for the 10 s job (skip drops t0..t0+30 s), on time for the other two.
    db.clock.advance(30_000);
    const tick = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 0, batchSize: 10 });
    expect(tick.dropped).toBe(4);
    expect(await slotsOf(tenantId, strict.jobId)).toEqual([]);
    expect((await db.store.getJob({ tenantId, jobId: strict.jobId })).nextRunAt).toEqual(
      new Date(t0 + 40_000),
    );
    const every = [t0, t0 + 10_000, t0 + 20_000, t0 + 30_000];
    expect(await slotsOf(tenantId, plain.jobId)).toEqual(every);
    expect(await slotsOf(tenantId, lenient.jobId)).toEqual(every);

    // 90 s late: behind for the scheduler's 60 s, still on time for the job that allows 120 s.
    db.clock.advance(90_000);
    const late = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 0, batchSize: 10 });
    expect(late.dropped).toBeGreaterThan(0);
    expect((await slotsOf(tenantId, plain.jobId)).length).toBe(4);
    expect((await slotsOf(tenantId, lenient.jobId)).length).toBe(13);
  });
});

describe('one-shot', () => {
  test('an @at job fires once at its instant, then next_run_at is null', async () => {
    const tenantId = uniqueId('t-at');
    const at = t0 + 5_000;
    const def = job({ schedule: `@at ${new Date(at).toISOString()}` });
    const { job: registered } = await upsertJob(db.store, { tenantId, job: def, now: t0 });
    expect(registered.nextRunAt).toEqual(new Date(at));

    expect((await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 10 })).created).toEqual([]);
    db.clock.set(at);
    const fired = await db.store.tick({ now: at, lookaheadMs: 0, batchSize: 10 });
    expect(fired.created.map((r) => [r.jobId, r.scheduledFor])).toEqual([[def.jobId, new Date(at)]]);
    expect((await db.store.getJob({ tenantId, jobId: def.jobId })).nextRunAt).toBeNull();

    db.clock.advance(3_600_000);
    const later = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 60_000, batchSize: 10 });
    expect(later).toEqual({ jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] });
    expect(await slotsOf(tenantId, def.jobId)).toEqual([at]);
  });
});

describe('one-shot registered late', () => {
  test('a new @at job whose instant has passed is refused, and nothing is written', async () => {
    const tenantId = uniqueId('t-at-late');
    const def = job({ schedule: `@at ${new Date(t0 - 3_600_000).toISOString()}` });
    const before = await countRows(db.pool, 'jobs');
    const err = await expectTockError(
      upsertJob(db.store, { tenantId, job: def, now: t0 }),
      'validation_error',
    );
    expect(err.message).toMatch(/in the past/);
    expect(await countRows(db.pool, 'jobs')).toBe(before);
  });

  test('re-applying a one-shot that already fired is an unchanged no-op', async () => {
    const tenantId = uniqueId('t-at-again');
    const at = t0 + 1000;
    const def = job({ schedule: `@at ${new Date(at).toISOString()}` });
    await upsertJob(db.store, { tenantId, job: def, now: t0 });
    db.clock.set(at);
    expect((await db.store.tick({ now: at, lookaheadMs: 0, batchSize: 10 })).created).toHaveLength(1);
    const again = await upsertJob(db.store, { tenantId, job: def, now: at + 60_000 });
    expect(again.change).toBe('unchanged');
    expect(again.job.nextRunAt).toBeNull();
    // Changing its payload is still allowed (same instant), and does not make it fire again.
    const changed = await upsertJob(db.store, {
      tenantId,
      job: { ...def, payload: { v: 2 } },
      now: at + 60_000,
    });
    expect(changed.change).toBe('updated');
    expect(changed.job.nextRunAt).toBeNull();
  });
});

describe('triggerRun', () => {
  test('creates a run for a slot; the same slot again is a conflict naming the run; unknown job is not_found', async () => {
    const tenantId = uniqueId('t-trigger');
    const def = job({ priority: 7, maxAttempts: 5, payload: { k: 'v' }, handler: 'h-trig' });
    await upsertJob(db.store, { tenantId, job: def, now: t0 });
    db.clock.advance(1_234);
    const now = db.clock.nowMs();
    const slot = t0 - 60_000;

    const run = await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: slot, now });
    expect(run).toMatchObject({
      tenantId,
      jobId: def.jobId,
      scheduledFor: new Date(slot),
      state: 'pending',
      attempt: 1,
      maxAttempts: 5,
      handler: 'h-trig',
      payload: { k: 'v' },
      pool: 'default',
      priority: 7,
      availableAt: new Date(slot),
      leaseOwner: null,
      leaseExpiresAt: null,
      lastError: null,
      createdAt: new Date(now),
      startedAt: null,
      finishedAt: null,
    });
    expect(run.runId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

    const before = await db.pool.query('SELECT * FROM run_states ORDER BY run_id');
    const err = await expectTockError(
      db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: slot, now: now + 5 }),
      'conflict',
    );
    expect(err.details.run_id).toBe(run.runId);
    expect((await db.pool.query('SELECT * FROM run_states ORDER BY run_id')).rows).toEqual(before.rows);

    // Default slot: now. A slot the tick already materialised is a conflict naming the tick's run.
    const adhoc = await db.store.triggerRun({ tenantId, jobId: def.jobId, now });
    expect(adhoc.scheduledFor).toEqual(new Date(now));
    const tick = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 0, batchSize: 10 });
    const ticked = tick.created.find((r) => r.scheduledFor.getTime() === t0)!;
    expect(ticked).toBeDefined();
    const dup = await expectTockError(
      db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: t0, now }),
      'conflict',
    );
    expect(dup.details.run_id).toBe(ticked.runId);

    const count = await countRows(db.pool, 'run_states');
    await expectTockError(db.store.triggerRun({ tenantId, jobId: 'no-such-job', now }), 'not_found');
    await expectTockError(
      db.store.triggerRun({ tenantId: uniqueId('t-nobody'), jobId: def.jobId, now }),
      'not_found',
    );
    await expectTockError(
      db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: Number.NaN, now }),
      'validation_error',
    );
    expect(await countRows(db.pool, 'run_states')).toBe(count);
  });
});

describe('parked jobs', () => {
  test('a stored schedule that can no longer be evaluated parks the job and says so', async () => {
    const tenantId = uniqueId('t-parked');
    const def = job({ schedule: '0 3 * * *', timezone: 'Europe/Berlin' });
    await upsertJob(db.store, { tenantId, job: def, now: t0 });
    // As if the runtime that reads it lacks this zone: write a name no runtime knows.
    await db.pool.query(`UPDATE jobs SET timezone = 'Nowhere/Gone', next_run_at = $2 WHERE tenant_id = $1`, [
      tenantId,
      new Date(t0),
    ]);
    const result = await db.store.tick({ now: t0, lookaheadMs: 0, batchSize: 10 });
    expect(result.created).toEqual([]);
    expect(result.parked).toHaveLength(1);
    expect(result.parked[0]).toMatchObject({ tenantId, jobId: def.jobId });
    expect(result.parked[0]!.reason).toMatch(/Nowhere\/Gone/);
    expect((await db.store.getJob({ tenantId, jobId: def.jobId })).nextRunAt).toBeNull();
  });
});
