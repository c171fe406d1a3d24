/**
 * Failure handling: exponential backoff (jitter pinned to zero), dead-lettering, the reaper's
 * requeue and its guards, replay of dead runs, and release without spending an attempt.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PostgresStore } from '../../src/store/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import {
  attemptRows,
  expectTockError,
  job,
  pauseAfter,
  runRow,
  uniqueId,
  upsertJob,
} from '../setup/factories.js';

let db: TestDatabase;
/** A store whose backoff jitter is always zero: delays are exactly `min(cap, base^attempt)` seconds. */
let store: PostgresStore;
beforeAll(async () => {
  db = await setupDatabase();
  store = db.newStore({ random: () => 0 });
});
afterAll(() => db.teardown());

const LEASE_MS = 30_000;

/** One job in a fresh tenant and one pending run for the slot just before now. */
async function oneRun(overrides: Parameters<typeof job>[0] = {}) {
  const tenantId = uniqueId('t-retry');
  const def = job(overrides);
  await upsertJob(store, { tenantId, job: def, now: db.clock.nowMs() });
  const now = db.clock.nowMs();
  const run = await store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: now - 1_000, now });
  return { tenantId, jobId: def.jobId, runId: run.runId };
}

const claimOne = async (tenantId: string, now = db.clock.nowMs(), workerId = 'w-1') => {
  const got = await store.claimRuns({ workerId, pool: 'default', max: 10, now, tenantId });
  expect(got.length).toBeLessThanOrEqual(1);
  return got[0];
};

describe('backoff', () => {
  test('base 2: retry after 2 s, then 4 s, then dead at max_attempts 3 with the last error kept', async () => {
    const { tenantId, runId } = await oneRun({ backoffBaseSeconds: 2, maxAttempts: 3 });

    const c1 = await claimOne(tenantId);
    const f1 = db.clock.nowMs();
    const r1 = await store.failRun({ runId, leaseToken: c1!.leaseToken, error: 'e1', now: f1 });
    expect(r1).toEqual({ state: 'pending', attempt: 2, availableAt: new Date(f1 + 2_000) });
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'pending',
      attempt: 2,
      available_at: new Date(f1 + 2_000),
      last_error: 'e1',
      lease_expires_at: null,
      finished_at: null,
    });
    expect(await claimOne(tenantId, f1 + 1_999)).toBeUndefined();
    db.clock.set(f1 + 2_000);
    const c2 = await claimOne(tenantId);
    expect(c2!.attempt).toBe(2);

    db.clock.advance(500);
    const f2 = db.clock.nowMs();
    const r2 = await store.failRun({ runId, leaseToken: c2!.leaseToken, error: 'e2', now: f2 });
    expect(r2).toEqual({ state: 'pending', attempt: 3, availableAt: new Date(f2 + 4_000) });
    expect(await claimOne(tenantId, f2 + 3_999)).toBeUndefined();
    db.clock.set(f2 + 4_000);
    const c3 = await claimOne(tenantId);
    expect(c3!.attempt).toBe(3);

    db.clock.advance(250);
    const f3 = db.clock.nowMs();
    const r3 = await store.failRun({ runId, leaseToken: c3!.leaseToken, error: 'e3', now: f3 });
    expect(r3).toEqual({ state: 'dead', attempt: 3, availableAt: null });
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'dead',
      attempt: 3,
      finished_at: new Date(f3),
      last_error: 'e3',
      lease_expires_at: null,
    });
    expect(await claimOne(tenantId, f3 + 3_600_000)).toBeUndefined();
    const outcomes = (await attemptRows(db.pool, runId)).map((a) => [a.attempt, a.outcome, a.error]);
    expect(outcomes).toEqual([
      [1, 'failed', 'e1'],
      [2, 'failed', 'e2'],
      [3, 'failed', 'e3'],
    ]);
  });

  test('base 3 with a 5 s cap: 3 s, then capped at 5 s', async () => {
    const { tenantId, runId } = await oneRun({ backoffBaseSeconds: 3, backoffCapSeconds: 5, maxAttempts: 5 });
    const c1 = await claimOne(tenantId);
    const f1 = db.clock.nowMs();
    expect(
      (await store.failRun({ runId, leaseToken: c1!.leaseToken, error: 'x', now: f1 })).availableAt,
    ).toEqual(new Date(f1 + 3_000));
    db.clock.set(f1 + 3_000);
    const c2 = await claimOne(tenantId);
    const f2 = db.clock.nowMs();
    expect(
      (await store.failRun({ runId, leaseToken: c2!.leaseToken, error: 'x', now: f2 })).availableAt,
    ).toEqual(new Date(f2 + 5_000));
  });

  test('retryAfterMs overrides the backoff', async () => {
    const { tenantId, runId } = await oneRun();
    const c1 = await claimOne(tenantId);
    const now = db.clock.nowMs();
    const r = await store.failRun({
      runId,
      leaseToken: c1!.leaseToken,
      error: 'rate limited',
      retryAfterMs: 45_000,
      now,
    });
    expect(r).toEqual({ state: 'pending', attempt: 2, availableAt: new Date(now + 45_000) });
  });

  test('with the default jitter the delay is between half and all of the nominal delay', async () => {
    const { tenantId, runId } = await oneRun({ backoffBaseSeconds: 10 });
    const c1 = await db.store.claimRuns({
      workerId: 'w',
      pool: 'default',
      max: 1,
      now: db.clock.nowMs(),
      tenantId,
    });
    const now = db.clock.nowMs();
    const r = await db.store.failRun({ runId, leaseToken: c1[0]!.leaseToken, error: 'x', now });
    const delay = r.availableAt!.getTime() - now;
    expect(delay).toBeGreaterThanOrEqual(5_000);
    expect(delay).toBeLessThanOrEqual(10_000);
  });

  test('a permanent failure dead-letters at once on attempt 1', async () => {
    const { tenantId, runId } = await oneRun({ maxAttempts: 5 });
    const c = await claimOne(tenantId);
    const now = db.clock.nowMs();
    const r = await store.failRun({
      runId,
      leaseToken: c!.leaseToken,
      error: 'bad args',
      permanent: true,
      now,
    });
    expect(r).toEqual({ state: 'dead', attempt: 1, availableAt: null });
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'dead',
      attempt: 1,
      finished_at: new Date(now),
      last_error: 'bad args',
    });
    expect(await claimOne(tenantId, now + 3_600_000)).toBeUndefined();
  });
});

describe('the reaper', () => {
  test('an expired lease is requeued with attempt + 1 and backoff; at max_attempts it is dead-lettered', async () => {
    const { tenantId, jobId, runId } = await oneRun({ maxAttempts: 2, backoffBaseSeconds: 2 });
    const start = db.clock.nowMs();
    const c1 = await claimOne(tenantId, start, 'w-lost');

    db.clock.set(start + LEASE_MS + 1);
    const now = db.clock.nowMs();
    const reaped = await store.reapExpired({ now, batchSize: 1000 });
    expect(reaped.requeued.filter((r) => r.tenantId === tenantId)).toEqual([
      { runId, tenantId, jobId, scheduledFor: new Date(start - 1_000), attempt: 2 },
    ]);
    expect(reaped.dead.filter((r) => r.tenantId === tenantId)).toEqual([]);
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'pending',
      attempt: 2,
      available_at: new Date(now + 2_000),
      last_error: 'lease expired',
      lease_expires_at: null,
      finished_at: null,
    });
    const [a1] = await attemptRows(db.pool, runId);
    const row = await db.pool.query('SELECT attempt FROM attempts WHERE lease_token = $1', [c1!.leaseToken]);
    expect(row.rows).toEqual([{ attempt: 1 }]);
    expect(a1).toMatchObject({
      attempt: 1,
      worker_id: 'w-lost',
      outcome: 'lease_expired',
      finished_at: new Date(now),
    });

    expect(await claimOne(tenantId, now + 1_999)).toBeUndefined();
    db.clock.set(now + 2_000);
    const c2 = await claimOne(tenantId);
    expect(c2!.attempt).toBe(2);

    db.clock.advance(LEASE_MS + 1);
    const later = db.clock.nowMs();
    const again = await store.reapExpired({ now: later, batchSize: 1000 });
    expect(again.dead.filter((r) => r.tenantId === tenantId)).toEqual([
      { runId, tenantId, jobId, scheduledFor: new Date(start - 1_000) },
    ]);
    expect(again.requeued.filter((r) => r.tenantId === tenantId)).toEqual([]);
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'dead',
      attempt: 2,
      finished_at: new Date(later),
      last_error: 'lease expired',
    });
    expect((await attemptRows(db.pool, runId)).map((a) => a.outcome)).toEqual([
      'lease_expired',
      'lease_expired',
    ]);
  });

  test('a run completed before the reaper runs is not touched, even with now past its old expiry', async () => {
    const { tenantId, runId } = await oneRun();
    const start = db.clock.nowMs();
    const c = await claimOne(tenantId, start);
    db.clock.advance(10_000);
    expect(await store.completeRuns({ leases: [c!], now: db.clock.nowMs() })).toEqual({
      completed: [runId],
      lost: [],
    });
    const before = await runRow(db.pool, runId);
    const attemptsBefore = await attemptRows(db.pool, runId);

    db.clock.set(start + LEASE_MS + 60_000);
    const reaped = await store.reapExpired({ now: db.clock.nowMs(), batchSize: 1000 });
    expect([...reaped.requeued, ...reaped.dead].filter((r) => r.runId === runId)).toEqual([]);
    expect(await runRow(db.pool, runId)).toEqual(before);
    expect(before.state).toBe('succeeded');
    expect(await attemptRows(db.pool, runId)).toEqual(attemptsBefore);
  });

  /** A reaper whose candidate read is followed, before its write, by `between`. */
  const reaperPausedAfterRead = (between: () => Promise<void>) =>
    new PostgresStore(
      pauseAfter(db.newPool(), (sql) => sql.includes('FROM run_claims WHERE lease_expires_at < $1'), between),
      { random: () => 0 },
    );

  test("a run completed between the reaper's read and its write is not touched", async () => {
    const { tenantId, runId } = await oneRun();
    const start = db.clock.nowMs();
    const c = await claimOne(tenantId, start);
    db.clock.set(start + LEASE_MS - 1);
    const completedAt = db.clock.nowMs();
    let completed: unknown;
    const reaper = reaperPausedAfterRead(async () => {
      // The worker was just in time (its clock said the lease was live).
      completed = await store.completeRuns({ leases: [c!], now: completedAt });
    });
    const reaped = await reaper.reapExpired({ now: start + LEASE_MS + 1, batchSize: 1000 });
    expect(completed).toEqual({ completed: [runId], lost: [] });
    expect([...reaped.requeued, ...reaped.dead].filter((r) => r.runId === runId)).toEqual([]);
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'succeeded',
      attempt: 1,
      finished_at: new Date(completedAt),
      last_error: null,
    });
    expect((await attemptRows(db.pool, runId)).map((a) => a.outcome)).toEqual(['succeeded']);
  });

  test("a run requeued and re-claimed between the reaper's read and its write keeps its new lease", async () => {
    const { tenantId, runId } = await oneRun({ maxAttempts: 5 });
    const start = db.clock.nowMs();
    await claimOne(tenantId, start, 'w-first');
    const now = start + LEASE_MS + 1;
    db.clock.set(now);
    let second: Awaited<ReturnType<typeof claimOne>>;
    const reaper = reaperPausedAfterRead(async () => {
      // Another reaper requeues it, and a worker claims it when its backoff ends.
      const other = await store.reapExpired({ now, batchSize: 1000 });
      expect(other.requeued.filter((r) => r.runId === runId).map((r) => r.attempt)).toEqual([2]);
      second = await claimOne(tenantId, now + 2_000, 'w-second');
    });
    const reaped = await reaper.reapExpired({ now, batchSize: 1000 });
    expect([...reaped.requeued, ...reaped.dead].filter((r) => r.runId === runId)).toEqual([]);
    expect(second!).toMatchObject({ runId, attempt: 2 });
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'running',
      attempt: 2,
      lease_owner: 'w-second',
      lease_token: second!.leaseToken,
      lease_expires_at: new Date(now + 2_000 + LEASE_MS),
    });
    // The running attempt is read from the run row; its attempt row is written when it ends.
    const { attempts } = await store.getRun({ tenantId, runId });
    expect(attempts.map((a) => [a.attempt, a.workerId, a.outcome])).toEqual([
      [1, 'w-first', 'lease_expired'],
      [2, 'w-second', null],
    ]);
    const rows = await db.pool.query('SELECT outcome FROM attempts WHERE run_id = $1', [runId]);
    expect(rows.rows).toEqual([{ outcome: 'lease_expired' }]);
  });

  test('two reapers at once requeue each expired run once: attempt grows by exactly 1', async () => {
    const tenantId = uniqueId('t-double-reap');
    const def = job({ maxAttempts: 5 });
    await upsertJob(store, { tenantId, job: def, now: db.clock.nowMs() });
    const start = db.clock.nowMs();
    const runs = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        store.triggerRun({
          tenantId,
          jobId: def.jobId,
          scheduledFor: start - 60_000 + i * 1_000,
          now: start,
        }),
      ),
    );
    const ids = runs.map((r) => r.runId);
    const claimed = await store.claimRuns({ workerId: 'w', pool: 'default', max: 30, now: start, tenantId });
    expect(claimed).toHaveLength(30);

    const other = db.newStore({ random: () => 0 });
    db.clock.set(start + LEASE_MS + 1);
    const now = db.clock.nowMs();
    const [a, b] = await Promise.all([
      store.reapExpired({ now, batchSize: 1000 }),
      other.reapExpired({ now, batchSize: 1000 }),
    ]);
    const mine = [...a.requeued, ...b.requeued].filter((r) => r.tenantId === tenantId);
    expect(mine).toHaveLength(30);
    expect(new Set(mine.map((r) => r.runId))).toEqual(new Set(ids));
    for (const r of mine) expect(r.attempt).toBe(2);
    expect([...a.dead, ...b.dead].filter((r) => r.tenantId === tenantId)).toEqual([]);

    const { rows } = await db.pool.query(
      'SELECT state, attempt, available_at, count(*)::int AS n FROM run_states WHERE tenant_id = $1 GROUP BY 1, 2, 3',
      [tenantId],
    );
    expect(rows).toEqual([{ state: 'pending', attempt: 2, available_at: new Date(now + 2_000), n: 30 }]);
    const att = await db.pool.query(
      'SELECT outcome, count(*)::int AS n FROM attempts WHERE run_id = ANY($1::uuid[]) GROUP BY outcome',
      [ids],
    );
    expect(att.rows).toEqual([{ outcome: 'lease_expired', n: 30 }]);
  });
});

describe('replay', () => {
  test('a dead run replays to pending, claimable at once, its attempts numbered on from the last with a fresh budget', async () => {
    const { tenantId, runId } = await oneRun({ maxAttempts: 2 });
    const c1 = await claimOne(tenantId);
    const f1 = await store.failRun({
      runId,
      leaseToken: c1!.leaseToken,
      error: 'flaky',
      now: db.clock.nowMs(),
    });
    db.clock.set(f1.availableAt!.getTime());
    const c2 = await claimOne(tenantId);
    const f2 = await store.failRun({
      runId,
      leaseToken: c2!.leaseToken,
      error: 'fatal',
      now: db.clock.nowMs(),
    });
    expect(f2).toEqual({ state: 'dead', attempt: 2, availableAt: null });

    db.clock.advance(3_600_000);
    let now = db.clock.nowMs();
    const replayed = await store.replayRun({ tenantId, runId, now });
    // Attempts 3 and 4 are the replay's: as many as the first pass had.
    expect(replayed).toMatchObject({
      runId,
      state: 'pending',
      attempt: 3,
      maxAttempts: 4,
      availableAt: new Date(now),
      finishedAt: null,
      leaseExpiresAt: null,
    });
    const c3 = await claimOne(tenantId, now, 'w-replay');
    expect(c3).toMatchObject({ runId, attempt: 3, maxAttempts: 4 });
    const f3 = await store.failRun({ runId, leaseToken: c3!.leaseToken, error: 'again', now });
    expect(f3).toMatchObject({ state: 'pending', attempt: 4 });
    db.clock.set(f3.availableAt!.getTime());
    now = db.clock.nowMs();
    const c4 = await claimOne(tenantId, now, 'w-replay');
    expect(await store.failRun({ runId, leaseToken: c4!.leaseToken, error: 'dead again', now })).toEqual({
      state: 'dead',
      attempt: 4,
      availableAt: null,
    });
    // A second replay goes on from 5, again with two attempts.
    db.clock.advance(60_000);
    now = db.clock.nowMs();
    expect(await store.replayRun({ tenantId, runId, now })).toMatchObject({ attempt: 5, maxAttempts: 6 });
    const c5 = await claimOne(tenantId, now, 'w-replay-2');
    expect(await store.completeRuns({ leases: [c5!], now })).toEqual({ completed: [runId], lost: [] });
    const run = await store.getRun({ tenantId, runId });
    expect(run.state).toBe('succeeded');
    expect(run.attempts.map((a) => [a.attempt, a.workerId, a.outcome])).toEqual([
      [1, 'w-1', 'failed'],
      [2, 'w-1', 'failed'],
      [3, 'w-replay', 'failed'],
      [4, 'w-replay', 'failed'],
      [5, 'w-replay-2', 'succeeded'],
    ]);
  });

  test('a run dead-lettered at once (permanent) replays with its whole budget, numbered on', async () => {
    const { tenantId, runId } = await oneRun({ maxAttempts: 3 });
    const c1 = await claimOne(tenantId);
    const now = db.clock.nowMs();
    await store.failRun({ runId, leaseToken: c1!.leaseToken, error: 'bad', permanent: true, now });
    expect(await store.replayRun({ tenantId, runId, now })).toMatchObject({ attempt: 2, maxAttempts: 4 });
  });

  test('replaying a pending, running, succeeded or cancelled run is a conflict and changes nothing', async () => {
    const pending = await oneRun();
    const running = await oneRun();
    const succeeded = await oneRun();
    const cancelled = await oneRun();
    const now = db.clock.nowMs();
    await claimOne(running.tenantId, now);
    const s = await claimOne(succeeded.tenantId, now);
    await store.completeRuns({ leases: [s!], now });
    await store.deleteJob({ tenantId: cancelled.tenantId, jobId: cancelled.jobId, now });

    for (const [r, state] of [
      [pending, 'pending'],
      [running, 'running'],
      [succeeded, 'succeeded'],
      [cancelled, 'cancelled'],
    ] as const) {
      const before = await runRow(db.pool, r.runId);
      const attemptsBefore = await attemptRows(db.pool, r.runId);
      expect(before.state).toBe(state);
      const err = await expectTockError(
        store.replayRun({ tenantId: r.tenantId, runId: r.runId, now }),
        'conflict',
      );
      expect(err.details.state).toBe(state);
      expect(await runRow(db.pool, r.runId)).toEqual(before);
      expect(await attemptRows(db.pool, r.runId)).toEqual(attemptsBefore);
    }
  });

  test("replaying another tenant's dead run or a malformed id is not_found", async () => {
    const { tenantId, runId } = await oneRun();
    const c = await claimOne(tenantId);
    await store.failRun({
      runId,
      leaseToken: c!.leaseToken,
      error: 'x',
      permanent: true,
      now: db.clock.nowMs(),
    });
    const before = await runRow(db.pool, runId);
    await expectTockError(
      store.replayRun({ tenantId: uniqueId('t-else'), runId, now: db.clock.nowMs() }),
      'not_found',
    );
    await expectTockError(store.replayRun({ tenantId, runId: 'nope', now: db.clock.nowMs() }), 'not_found');
    expect(await runRow(db.pool, runId)).toEqual(before);
  });
});

describe('release', () => {
  test('a released run is pending again on the same attempt, claimable at once; the attempt says released', async () => {
    const { tenantId, runId } = await oneRun();
    const t1 = db.clock.nowMs();
    const c1 = await claimOne(tenantId, t1, 'w-leaving');
    const availableBefore = (await runRow(db.pool, runId)).available_at;

    db.clock.advance(2_000);
    const t2 = db.clock.nowMs();
    expect(await store.releaseRuns({ leases: [c1!], reason: 'worker shutdown', now: t2 })).toEqual({
      released: [runId],
    });
    expect(await runRow(db.pool, runId)).toMatchObject({
      state: 'pending',
      attempt: 1,
      lease_expires_at: null,
      available_at: availableBefore,
    });

    const c2 = await claimOne(tenantId, t2, 'w-next');
    expect(c2).toMatchObject({ runId, attempt: 1 });
    expect(c2!.leaseToken).not.toBe(c1!.leaseToken);
    const { attempts } = await store.getRun({ tenantId, runId });
    expect(attempts.map((a) => [a.attempt, a.workerId, a.outcome, a.error, a.finishedAt])).toEqual([
      [1, 'w-leaving', 'released', 'worker shutdown', new Date(t2)],
      [1, 'w-next', null, null, null],
    ]);

    // Releasing with the old token again does nothing.
    const before = await runRow(db.pool, runId);
    expect(await store.releaseRuns({ leases: [c1!], reason: 'again', now: t2 })).toEqual({ released: [] });
    expect(await runRow(db.pool, runId)).toEqual(before);
  });
});

describe('release after expiry', () => {
  test('a lease that already expired cannot be released: the run stays running for the reaper', async () => {
    const { tenantId, runId } = await oneRun();
    const claimed = await claimOne(tenantId, db.clock.nowMs(), 'w-late');
    db.clock.advance(31_000);
    const before = await runRow(db.pool, runId);
    expect(
      await store.releaseRuns({ leases: [claimed!], reason: 'worker shutdown', now: db.clock.nowMs() }),
    ).toEqual({
      released: [],
    });
    expect(await runRow(db.pool, runId)).toEqual(before);
    expect(before.state).toBe('running');
  });
});
