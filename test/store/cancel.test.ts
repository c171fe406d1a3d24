/**
 * Cancelling a run (`cancelRun`, `runCancel`) against PostgreSQL: a queued run leaves the queue; a
 * running one leaves its claim (the claim's other runs stay, an emptied claim goes), its attempt is
 * recorded as `cancelled`, and its worker's heartbeat, completion, failure and release are refused
 * as lost; a finished run is a conflict and another tenant's a not-found, with nothing written.
 * Races: a cancel and a completion of the same running attempt, started together many times and
 * ordered by a held lock, end with exactly one winner and a consistent claim; a cancel racing a
 * claim of the same queued run always ends with the run cancelled and no claim holding it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ConflictError } from '../../src/core/index.js';
import type { ClaimedRun } from '../../src/store/index.js';
import { runCancel } from '../../src/store/queries/cancel.js';
import * as R from '../../src/store/queries/runs.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import {
  attemptRows,
  countRows,
  expectTockError,
  job,
  NO_REPORT,
  runRow,
  uniqueId,
  upsertJob,
} from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

/** A job of `tenantId` in a pool of its own with `n` queued runs (slots a second apart, in the past). */
async function queuedRuns(n: number, tenantId = 't', extra: Record<string, unknown> = {}) {
  const pool = uniqueId('p');
  const def = job({ pool, ...extra });
  const now = db.clock.nowMs();
  await upsertJob(db.store, { tenantId, job: def, now });
  const runIds: string[] = [];
  for (let i = n; i >= 1; i--) {
    const run = await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: now - i * 1000, now });
    runIds.push(run.runId);
  }
  return { pool, jobId: def.jobId, runIds };
}

/** `n` runs claimed by worker `w` in one claim (one lease token). */
async function runningRuns(n: number, tenantId = 't'): Promise<ClaimedRun[]> {
  const { pool } = await queuedRuns(n, tenantId);
  const runs = await db.store.claimRuns({ workerId: 'w', pool, max: n, now: db.clock.nowMs() });
  expect(runs).toHaveLength(n);
  expect(new Set(runs.map((r) => r.leaseToken)).size).toBe(1);
  return runs;
}

async function claimOf(token: string): Promise<string[] | null> {
  const { rows } = await db.pool.query('SELECT run_ids FROM run_claims WHERE lease_token = $1', [token]);
  return rows[0]?.run_ids ?? null;
}

/** Claims listing the run (at most one may). */
const claimsListing = (runId: string) => countRows(db.pool, 'run_claims', '$1 = ANY(run_ids)', [runId]);

/** Every row of every table a cancel could write, as text: equal means nothing was written. */
async function tables(): Promise<string[]> {
  const out: string[] = [];
  for (const t of ['runs', 'run_queue', 'run_claims', 'attempts']) {
    const { rows } = await db.pool.query(`SELECT t::text AS r FROM ${t} t ORDER BY 1`);
    out.push(...rows.map((r) => `${t}: ${r.r}`));
  }
  return out;
}

describe('cancelRun', () => {
  test('a queued run leaves the queue and ends cancelled; no claim gets it', async () => {
    const { pool, runIds } = await queuedRuns(2);
    const [runId, other] = runIds as [string, string];
    db.clock.advance(5_000);
    const now = db.clock.nowMs();
    const run = await db.store.cancelRun({ tenantId: 't', runId, now });
    expect(run).toMatchObject({ runId, state: 'cancelled', finishedAt: new Date(now), attempts: [] });
    expect(await runRow(db.pool, runId)).toMatchObject({ state: 'cancelled', parked: 'cancelled' });
    expect(await countRows(db.pool, 'run_queue', 'run_id = $1', [runId])).toBe(0);
    expect(await countRows(db.pool, 'attempts', 'run_id = $1', [runId])).toBe(0);
    // The cancelled-run listing shows it; the claim takes only the other.
    const listed = await db.store.listRuns({ tenantId: 't', state: 'cancelled', limit: 10 });
    expect(listed.items.map((r) => r.runId)).toContain(runId);
    const claimed = await db.store.claimRuns({ workerId: 'w', pool, max: 10, now });
    expect(claimed.map((r) => r.runId)).toEqual([other]);
  });

  test('a running run leaves its claim, whose other run keeps running; its attempt is recorded as cancelled', async () => {
    const [a, b] = (await runningRuns(2)) as [ClaimedRun, ClaimedRun];
    const claimedAt = db.clock.nowMs();
    db.clock.advance(3_000);
    const now = db.clock.nowMs();
    const run = await db.store.cancelRun({ tenantId: 't', runId: a.runId, now });
    expect(run).toMatchObject({ runId: a.runId, state: 'cancelled', attempt: 1, finishedAt: new Date(now) });
    expect(run.leaseExpiresAt).toBeNull();
    expect(run.attempts).toEqual([
      {
        attempt: 1,
        workerId: 'w',
        startedAt: new Date(claimedAt),
        claimedAt: new Date(claimedAt),
        finishedAt: new Date(now),
        outcome: 'cancelled',
        error: null,
        errorStack: null,
        output: null,
        ...NO_REPORT,
      },
    ]);
    expect(await runRow(db.pool, a.runId)).toMatchObject({
      state: 'cancelled',
      parked: 'cancelled',
      lease_token: a.leaseToken,
      lease_owner: 'w',
    });
    expect(await claimOf(a.leaseToken)).toEqual([b.runId]);
    expect(await countRows(db.pool, 'run_queue', 'run_id = $1', [a.runId])).toBe(0);

    // The worker's next heartbeat: the cancelled run is lost, the other renewed.
    const leases = [a, b].map((r) => ({ runId: r.runId, leaseToken: r.leaseToken }));
    const beat = await db.store.heartbeatRuns({ leases, now });
    expect(beat.lost).toEqual([a.runId]);
    expect(beat.renewed.map((r) => r.runId)).toEqual([b.runId]);
    // Its late result is refused, whichever it is, and changes nothing.
    const before = await tables();
    expect(await db.store.completeRuns({ leases: [leases[0]!], now })).toEqual({
      completed: [],
      lost: [a.runId],
    });
    await expectTockError(db.store.failRun({ ...leases[0]!, error: 'late', now }), 'lease_lost');
    expect(await db.store.releaseRuns({ leases: [leases[0]!], reason: 'stop', now })).toEqual({
      released: [],
    });
    expect(await tables()).toEqual(before);

    // Cancelling the claim's last run deletes the claim.
    await db.store.cancelRun({ tenantId: 't', runId: b.runId, now });
    expect(await claimOf(b.leaseToken)).toBeNull();
    expect((await attemptRows(db.pool, b.runId)).map((r) => r.outcome)).toEqual(['cancelled']);
  });

  test('a run whose lease expired but was not reaped yet is cancelled, and the reaper then leaves it alone', async () => {
    const [a] = (await runningRuns(1)) as [ClaimedRun];
    db.clock.advance(60_000);
    const now = db.clock.nowMs();
    expect(a.leaseExpiresAt.getTime()).toBeLessThan(now);
    const run = await db.store.cancelRun({ tenantId: 't', runId: a.runId, now });
    expect(run.state).toBe('cancelled');
    expect(run.attempts.map((x) => x.outcome)).toEqual(['cancelled']);
    expect(await claimOf(a.leaseToken)).toBeNull();
    const reaped = await db.store.reapExpired({ now, batchSize: 100 });
    expect([...reaped.requeued, ...reaped.dead].map((r) => r.runId)).not.toContain(a.runId);
    expect(await runRow(db.pool, a.runId)).toMatchObject({ state: 'cancelled', attempt: 1 });
  });

  test('a retried run (attempt 2, a failed attempt before) cancelled while queued keeps its attempts', async () => {
    const [a] = (await runningRuns(1)) as [ClaimedRun];
    const now = db.clock.nowMs();
    await db.store.failRun({ runId: a.runId, leaseToken: a.leaseToken, error: 'boom', now });
    const run = await db.store.cancelRun({ tenantId: 't', runId: a.runId, now });
    expect(run).toMatchObject({ state: 'cancelled', attempt: 2, lastError: 'boom' });
    expect(run.attempts.map((x) => [x.attempt, x.outcome])).toEqual([[1, 'failed']]);
    expect(await countRows(db.pool, 'run_queue', 'run_id = $1', [a.runId])).toBe(0);
  });

  test('a succeeded, dead or cancelled run is a conflict naming its state; nothing is written', async () => {
    const [ok, dead] = (await runningRuns(2)) as [ClaimedRun, ClaimedRun];
    const now = db.clock.nowMs();
    await db.store.completeRuns({ leases: [ok], now });
    await db.store.failRun({ ...dead, error: 'bad', permanent: true, now });
    const { runIds } = await queuedRuns(1);
    const cancelled = runIds[0]!;
    await db.store.cancelRun({ tenantId: 't', runId: cancelled, now });
    for (const [runId, state] of [
      [ok.runId, 'succeeded'],
      [dead.runId, 'dead'],
      [cancelled, 'cancelled'],
    ] as const) {
      const before = await tables();
      db.clock.advance(1000);
      const err = await expectTockError(
        db.store.cancelRun({ tenantId: 't', runId, now: db.clock.nowMs() }),
        'conflict',
      );
      expect(err.message).toContain(`is ${state}`);
      expect(err.details).toEqual({ state });
      expect(await tables()).toEqual(before);
    }
  });

  test("another tenant's run, an unknown run and a malformed id are not found; nothing is written", async () => {
    const [running] = (await runningRuns(1, 'other')) as [ClaimedRun];
    const { runIds } = await queuedRuns(1, 'other');
    const before = await tables();
    const now = db.clock.nowMs();
    for (const runId of [running.runId, runIds[0]!, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      await expectTockError(db.store.cancelRun({ tenantId: 't', runId, now }), 'not_found');
    }
    expect(await tables()).toEqual(before);
    // The statement alone, given another tenant: no row, no lock taken, nothing written.
    const { rows } = await db.pool.query(runCancel, ['t', running.runId, new Date(now)]);
    expect(rows).toEqual([]);
    expect(await tables()).toEqual(before);
  });
});

/** Waits (bounded) until a backend of this database waits on a lock. */
async function someoneWaitsOnALock(): Promise<void> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
    );
    if (rows[0].n > 0) return;
    if (Date.now() > deadline) throw new Error('no statement waited on a lock');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('cancel and complete of one running attempt', () => {
  test('a completion holding the claim: the cancel waits, then finds the run succeeded (409)', async () => {
    const [a, b] = (await runningRuns(2)) as [ClaimedRun, ClaimedRun];
    const now = db.clock.nowMs();
    const first = await db.newPool(1).connect();
    try {
      await first.query('BEGIN');
      const done = await first.query(R.runCompleteMany, [
        [a.runId],
        [a.leaseToken],
        new Date(now),
        null,
        [null],
        [null],
        null,
      ]);
      // It answers the runs it did not complete: none.
      expect(done.rows).toEqual([]);
      const cancel = db.newStore().cancelRun({ tenantId: 't', runId: a.runId, now });
      await someoneWaitsOnALock();
      await first.query('COMMIT');
      const err = await expectTockError(cancel, 'conflict');
      expect(err.details).toEqual({ state: 'succeeded' });
    } finally {
      first.release();
    }
    expect(await runRow(db.pool, a.runId)).toMatchObject({ state: 'succeeded' });
    expect(await attemptRows(db.pool, a.runId)).toMatchObject([{ outcome: 'succeeded' }]);
    expect(await claimOf(a.leaseToken)).toEqual([b.runId]);
  });

  test("a cancel takes the claim's lock before it writes the run row, as a completion does (no deadlock)", async () => {
    const [a] = (await runningRuns(1)) as [ClaimedRun];
    const now = db.clock.nowMs();
    const holder = await db.newPool(1).connect();
    const probe = await db.newPool(1).connect();
    try {
      // What a completion does first: lock the claim.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM run_claims WHERE lease_token = $1 FOR NO KEY UPDATE', [a.leaseToken]);
      const cancel = db.newStore().cancelRun({ tenantId: 't', runId: a.runId, now });
      await someoneWaitsOnALock();
      // The waiting cancel holds no lock on the run row: a completion holding the claim could write it.
      await probe.query('BEGIN');
      await probe.query('SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE NOWAIT', [a.runId]);
      await probe.query('ROLLBACK');
      await holder.query('COMMIT');
      expect((await cancel).state).toBe('cancelled');
    } finally {
      holder.release();
      probe.release();
    }
  });

  test('a cancel holding the claim: the completion waits, then finds its lease lost', async () => {
    const [a, b] = (await runningRuns(2)) as [ClaimedRun, ClaimedRun];
    const now = db.clock.nowMs();
    const first = await db.newPool(1).connect();
    try {
      await first.query('BEGIN');
      const done = await first.query(runCancel, ['t', a.runId, new Date(now)]);
      expect(done.rows).toEqual([{ run_id: a.runId, lease_token: a.leaseToken }]);
      const complete = db.newStore().completeRuns({ leases: [a, b], now });
      await someoneWaitsOnALock();
      await first.query('COMMIT');
      expect(await complete).toEqual({ completed: [b.runId], lost: [a.runId] });
    } finally {
      first.release();
    }
    expect(await runRow(db.pool, a.runId)).toMatchObject({ state: 'cancelled' });
    expect(await runRow(db.pool, b.runId)).toMatchObject({ state: 'succeeded' });
    expect(await claimOf(a.leaseToken)).toBeNull();
  });

  test('started together 40 times: exactly one wins, and the run, its attempts and the claim agree', async () => {
    const canceller = db.newStore();
    const completer = db.newStore();
    const wins = { cancel: 0, complete: 0 };
    for (let i = 0; i < 40; i++) {
      const [a, b] = (await runningRuns(2)) as [ClaimedRun, ClaimedRun];
      const now = db.clock.nowMs();
      const [cancelled, completed] = await Promise.allSettled([
        canceller.cancelRun({ tenantId: 't', runId: a.runId, now }),
        completer.completeRuns({ leases: [a], now }),
      ]);
      expect(completed.status).toBe('fulfilled');
      const done = (completed as PromiseFulfilledResult<{ completed: string[]; lost: string[] }>).value;
      const row = await runRow(db.pool, a.runId);
      const outcomes = (await attemptRows(db.pool, a.runId)).map((r) => r.outcome);
      if (cancelled.status === 'fulfilled') {
        wins.cancel += 1;
        expect(cancelled.value.state).toBe('cancelled');
        expect(done).toEqual({ completed: [], lost: [a.runId] });
        expect(row).toMatchObject({ state: 'cancelled', parked: 'cancelled' });
        expect(outcomes).toEqual(['cancelled']);
      } else {
        wins.complete += 1;
        expect(cancelled.reason).toBeInstanceOf(ConflictError);
        expect((cancelled.reason as ConflictError).details).toEqual({ state: 'succeeded' });
        expect(done).toEqual({ completed: [a.runId], lost: [] });
        expect(row).toMatchObject({ state: 'succeeded', parked: null });
        expect(outcomes).toEqual(['succeeded']);
      }
      // Either way the claim holds only the other run, which still runs.
      expect(await claimOf(a.leaseToken)).toEqual([b.runId]);
      expect(await claimsListing(a.runId)).toBe(0);
      expect(await countRows(db.pool, 'run_queue', 'run_id = $1', [a.runId])).toBe(0);
      expect((await runRow(db.pool, b.runId)).state).toBe('running');
      db.clock.advance(1000);
    }
    expect(wins.cancel + wins.complete).toBe(40);
  });

  test('a cancel racing a claim of the same queued run, 40 times: the run always ends cancelled and unheld', async () => {
    const canceller = db.newStore();
    const claimer = db.newStore();
    for (let i = 0; i < 40; i++) {
      const { pool, runIds } = await queuedRuns(1);
      const runId = runIds[0]!;
      const now = db.clock.nowMs();
      const [cancelled, claimed] = await Promise.all([
        canceller.cancelRun({ tenantId: 't', runId, now }),
        claimer.claimRuns({ workerId: 'w', pool, max: 1, now }),
      ]);
      expect(cancelled.state).toBe('cancelled');
      expect(await claimsListing(runId)).toBe(0);
      expect(await countRows(db.pool, 'run_queue', 'run_id = $1', [runId])).toBe(0);
      const outcomes = (await attemptRows(db.pool, runId)).map((r) => r.outcome);
      if (claimed.length === 1) {
        // Claimed before the cancel: the cancel revoked that lease.
        expect(outcomes).toEqual(['cancelled']);
        const c = claimed[0]!;
        expect(await claimer.completeRuns({ leases: [c], now })).toEqual({ completed: [], lost: [runId] });
      } else {
        expect(outcomes).toEqual([]);
      }
      db.clock.advance(1000);
    }
  });
});
