/**
 * What handlers report (`ctx.progress`, `ctx.log`) as the store keeps it: written by the heartbeat,
 * completion and failure statements only under the run's live lease and for the caller's tenant,
 * bounded (the latest progress, the last 100 lines of 1,000 characters, a message of 200, the
 * dropped lines counted) and sanitised; shown on the run's attempts.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LOG_LINE_MAX_CHARS, LOG_LINES_MAX, PROGRESS_MESSAGE_MAX_CHARS } from '../../src/core/index.js';
import type { ClaimedRun } from '../../src/store/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { countRows, expectTockError, job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

/** A job of `tenantId` with `n` runs due now, all claimed (one claim); the claimed runs. */
async function claimed(tenantId: string, n = 1, overrides: Parameters<typeof job>[0] = {}) {
  const def = job(overrides);
  const now = db.clock.nowMs();
  await upsertJob(db.store, { tenantId, job: def, now });
  for (let i = 0; i < n; i++) {
    await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: now - 1000 * (i + 1), now });
  }
  const runs = await db.store.claimRuns({ workerId: 'w-1', pool: 'default', max: n, now, tenantId });
  expect(runs).toHaveLength(n);
  return runs;
}

const lease = (r: ClaimedRun) => ({ runId: r.runId, leaseToken: r.leaseToken });

/** The run's last attempt as `getRun` shows it. */
async function lastAttempt(r: ClaimedRun) {
  const run = await db.store.getRun({ tenantId: r.tenantId, runId: r.runId });
  return run.attempts.at(-1)!;
}

const reportsOf = (runId: string) => countRows(db.pool, 'attempt_progress', 'run_id = $1', [runId]);

describe('a heartbeat with reports', () => {
  test('writes them under the live lease: progress replaced with its message, lines appended', async () => {
    const [r] = await claimed(uniqueId('t-prog'));
    const t1 = db.clock.nowMs();
    const first = await db.store.heartbeatRuns({
      leases: [{ ...lease(r!), progress: { value: 10, message: 'one of ten' }, logs: ['a', 'b'] }],
      now: t1,
    });
    expect(first.renewed.map((x) => x.runId)).toEqual([r!.runId]);
    expect(await lastAttempt(r!)).toMatchObject({
      outcome: null,
      progress: 10,
      progressMessage: 'one of ten',
      logs: ['a', 'b'],
      logsDropped: 0,
      reportedAt: new Date(t1),
    });

    db.clock.advance(1000);
    await db.store.heartbeatRuns({ leases: [{ ...lease(r!), logs: ['c'] }], now: db.clock.nowMs() });
    // Lines alone leave the progress as it was.
    expect(await lastAttempt(r!)).toMatchObject({
      progress: 10,
      progressMessage: 'one of ten',
      logs: ['a', 'b', 'c'],
    });

    await db.store.heartbeatRuns({
      leases: [{ ...lease(r!), progress: { value: 55.5 } }],
      now: db.clock.nowMs(),
    });
    // A new progress without a message clears the old one: the report is the pair.
    expect(await lastAttempt(r!)).toMatchObject({
      progress: 55.5,
      progressMessage: null,
      logs: ['a', 'b', 'c'],
    });
  });

  test('a heartbeat without reports writes no row', async () => {
    const [r] = await claimed(uniqueId('t-none'));
    await db.store.heartbeatRuns({ leases: [lease(r!)], now: db.clock.nowMs() });
    expect(await reportsOf(r!.runId)).toBe(0);
    expect(await lastAttempt(r!)).toMatchObject({
      progress: null,
      logs: [],
      logsDropped: 0,
      reportedAt: null,
    });
  });

  test('under a stale token, an expired lease or a wrong tenant nothing is written', async () => {
    const tenantId = uniqueId('t-fence');
    const [r, other] = await claimed(tenantId, 2);
    const report = { progress: { value: 1 }, logs: ['x'] };
    const now = db.clock.nowMs();
    const stale = await db.store.heartbeatRuns({
      leases: [{ runId: r!.runId, leaseToken: randomUUID(), ...report }],
      now,
    });
    expect(stale.lost).toEqual([r!.runId]);
    // Another tenant with this tenant's token: not renewed, nothing written.
    const foreign = await db.store.heartbeatRuns({
      leases: [{ ...lease(r!), ...report }],
      now,
      tenantId: uniqueId('t-other'),
    });
    expect(foreign.lost).toEqual([r!.runId]);
    expect(await reportsOf(r!.runId)).toBe(0);

    // The lease lapses: the same token writes nothing any more.
    const late = r!.leaseExpiresAt.getTime() + 1;
    expect((await db.store.heartbeatRuns({ leases: [{ ...lease(r!), ...report }], now: late })).lost).toEqual(
      [r!.runId],
    );
    expect(await reportsOf(r!.runId)).toBe(0);
    expect(await reportsOf(other!.runId)).toBe(0);
  });

  test("a report for one run of a claim leaves the claim's other runs without one", async () => {
    const [a, b] = await claimed(uniqueId('t-claim'), 2);
    expect(a!.leaseToken).toBe(b!.leaseToken);
    const { renewed } = await db.store.heartbeatRuns({
      leases: [{ ...lease(a!), logs: ['only a'] }, lease(b!)],
      now: db.clock.nowMs(),
    });
    expect(renewed).toHaveLength(2);
    expect(await lastAttempt(a!)).toMatchObject({ logs: ['only a'] });
    expect(await reportsOf(b!.runId)).toBe(0);
  });

  test('keeps the last 100 lines, each cut to 1,000 characters, and counts what it dropped', async () => {
    const [r] = await claimed(uniqueId('t-bound'));
    const lines = Array.from({ length: 150 }, (_, i) => `line ${i}`);
    await db.store.heartbeatRuns({
      leases: [
        {
          ...lease(r!),
          progress: { value: 1, message: 'm'.repeat(PROGRESS_MESSAGE_MAX_CHARS + 50) },
          logs: lines,
          logsDropped: 7,
        },
      ],
      now: db.clock.nowMs(),
    });
    let a = await lastAttempt(r!);
    expect(a.logs).toEqual(lines.slice(50));
    expect(a.logsDropped).toBe(57);
    expect(a.progressMessage).toBe('m'.repeat(PROGRESS_MESSAGE_MAX_CHARS));

    await db.store.heartbeatRuns({
      leases: [{ ...lease(r!), logs: ['y'.repeat(LOG_LINE_MAX_CHARS + 1), 'last'] }],
      now: db.clock.nowMs(),
    });
    a = await lastAttempt(r!);
    expect(a.logs).toHaveLength(LOG_LINES_MAX);
    expect(a.logs.slice(-2)).toEqual(['y'.repeat(LOG_LINE_MAX_CHARS), 'last']);
    expect(a.logs[0]).toBe('line 52');
    expect(a.logsDropped).toBe(59);
  });

  test('hostile text is stored sanitised: NUL and lone surrogates become U+FFFD', async () => {
    const [r] = await claimed(uniqueId('t-text'));
    await db.store.heartbeatRuns({
      leases: [
        {
          ...lease(r!),
          progress: { value: 3, message: 'a\u0000b\uD800' },
          logs: ['nul\u0000', 'low \uDC00 high \uD83D', 'pair 😀 kept'],
        },
      ],
      now: db.clock.nowMs(),
    });
    expect(await lastAttempt(r!)).toMatchObject({
      progressMessage: 'a\uFFFDb\uFFFD',
      logs: ['nul\uFFFD', 'low \uFFFD high \uFFFD', 'pair 😀 kept'],
    });
  });

  test('a progress that is not a finite number is refused before anything is written', async () => {
    const [r] = await claimed(uniqueId('t-nan'));
    const before = r!.leaseExpiresAt;
    await expectTockError(
      db.store.heartbeatRuns({
        leases: [{ ...lease(r!), progress: { value: Number.NaN }, logs: ['x'] }],
        now: db.clock.nowMs() + 1000,
      }),
      'validation_error',
    );
    expect(await reportsOf(r!.runId)).toBe(0);
    const { rows } = await db.pool.query('SELECT lease_expires_at FROM run_claims WHERE lease_token = $1', [
      r!.leaseToken,
    ]);
    expect(rows[0].lease_expires_at).toEqual(before);
  });
});

describe('a result with reports', () => {
  test('a completion writes the rest under its lease; the succeeded attempt shows all of it', async () => {
    const [r] = await claimed(uniqueId('t-done'));
    await db.store.heartbeatRuns({ leases: [{ ...lease(r!), logs: ['early'] }], now: db.clock.nowMs() });
    const done = await db.store.completeRuns({
      leases: [{ ...lease(r!), progress: { value: 100, message: 'done' }, logs: ['late'] }],
      now: db.clock.nowMs(),
    });
    expect(done.completed).toEqual([r!.runId]);
    expect(await lastAttempt(r!)).toMatchObject({
      outcome: 'succeeded',
      progress: 100,
      progressMessage: 'done',
      logs: ['early', 'late'],
    });
    // The lease is gone: a late heartbeat or a second completion writes nothing more.
    await db.store.heartbeatRuns({ leases: [{ ...lease(r!), logs: ['after'] }], now: db.clock.nowMs() });
    await db.store.completeRuns({ leases: [{ ...lease(r!), logs: ['again'] }], now: db.clock.nowMs() });
    expect((await lastAttempt(r!)).logs).toEqual(['early', 'late']);
  });

  test('a failure writes the rest on the failed attempt; the next attempt starts with none', async () => {
    const tenantId = uniqueId('t-fail');
    const [r] = await claimed(tenantId, 1, { maxAttempts: 3 });
    await db.store.failRun({
      ...lease(r!),
      error: 'boom',
      progress: { value: 40, message: 'stuck' },
      logs: ['before the error'],
      logsDropped: 2,
      now: db.clock.nowMs(),
    });
    const run = await db.store.getRun({ tenantId, runId: r!.runId });
    expect(run.attempts).toHaveLength(1);
    expect(run.attempts[0]).toMatchObject({
      outcome: 'failed',
      progress: 40,
      progressMessage: 'stuck',
      logs: ['before the error'],
      logsDropped: 2,
    });
    db.clock.set(run.availableAt.getTime());
    const [again] = await db.store.claimRuns({
      workerId: 'w-2',
      pool: 'default',
      max: 1,
      now: db.clock.nowMs(),
      tenantId,
    });
    expect(again?.runId).toBe(r!.runId);
    expect(await lastAttempt(again!)).toMatchObject({ outcome: null, progress: null, logs: [] });
  });

  test('a failure under a lost lease writes no report', async () => {
    const [r] = await claimed(uniqueId('t-lost'));
    await expectTockError(
      db.store.failRun({
        runId: r!.runId,
        leaseToken: r!.leaseToken,
        error: 'late',
        logs: ['x'],
        now: r!.leaseExpiresAt.getTime() + 1,
      }),
      'lease_lost',
    );
    expect(await reportsOf(r!.runId)).toBe(0);
  });
});
