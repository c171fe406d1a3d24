/**
 * Issue 14, item 9: a claim whose answer arrives late. The barrier holds the claim's answer after
 * the statement has run, moves the clock past (or nearly to) the lease's expiry, and, in the first
 * case, lets the reaper take the run back and another worker run it. When the answer finally
 * reaches the worker, its handler must not start: the run would run twice. A run whose lease is
 * gone is dropped; one with a sliver of lease left is released (no attempt spent). And (item 10) a
 * claim whose answer is lost is sent again with its claim id, which answers what it claimed.
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { FakeClock } from '../../src/core/index.js';
import type { ClaimedRun } from '../../src/store/index.js';
import * as C from '../../src/store/queries/claims.js';
import { LEASE_TOO_SHORT, START_MARGIN_MS, Worker } from '../../src/worker/worker.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once } from '../setup/events.js';
import { pauseAfter, uniqueId, upsertJob } from '../setup/factories.js';

const LEASE_MS = 30_000;
let db: TestDatabase;
const workers: Worker[] = [];

beforeEach(async () => {
  db = await setupDatabase();
});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop(0);
  await db.teardown();
});

/** One ready run of a fresh job (claimable at T0). */
async function readyRun(tenantId: string) {
  const jobId = uniqueId('late');
  await upsertJob(db.store, { tenantId, job: { jobId, schedule: '@every 1h', handler: 'h' }, now: T0 });
  return db.store.triggerRun({ tenantId, jobId, scheduledFor: T0 - 1000, now: T0 });
}

/**
 * A worker on `clock` whose own loops only run when poked; counts its handler's calls. With
 * `oneClaim`, its store answers only the first claim (later ones find nothing): a run it gives back
 * stays in the queue for the test to see, instead of racing the worker's next claim.
 */
function lateWorker(clock: FakeClock, pollIntervalMs = 3_600_000, oneClaim = false) {
  const calls: string[] = [];
  let claims = 0;
  const store: typeof db.store = Object.create(db.store);
  store.claimRuns = async (p) => (oneClaim && claims++ > 0 ? [] : db.store.claimRuns(p));
  const worker = new Worker({
    store,
    clock,
    logger: pino({ level: process.env.LOG_LEVEL ?? 'silent' }),
    handlers: { h: (ctx) => void calls.push(ctx.runId) },
    pollIntervalMs,
    heartbeatCheckMs: 3_600_000,
    workerId: 'w-late',
  });
  workers.push(worker);
  return { worker, calls };
}

const isClaim = (sql: string) => sql === C.runClaim;

test('a claim answered after its lease expired (and the run was reaped and run elsewhere) starts nothing', async () => {
  const clock = new FakeClock(T0);
  const run = await readyRun('t-late');
  const elsewhere: string[] = [];
  pauseAfter(db.pool, isClaim, async () => {
    // The answer is late: the lease runs out, the reaper takes the run back, another worker runs it.
    clock.advance(LEASE_MS + 1000);
    const reaped = await db.store.reapExpired({ now: clock.nowMs(), batchSize: 10 });
    expect(reaped.requeued.map((r) => r.runId)).toEqual([run.runId]);
    // Once its retry is due (the reaper backs it off), another worker claims and runs it.
    const other = db.newStore();
    const later = clock.nowMs() + 3_600_000;
    const [again] = await other.claimRuns({ workerId: 'w-other', pool: 'default', max: 1, now: later });
    expect(again?.runId).toBe(run.runId);
    elsewhere.push(again!.runId);
    await other.completeRuns({
      leases: [{ runId: again!.runId, leaseToken: again!.leaseToken }],
      now: later,
    });
  });
  const { worker, calls } = lateWorker(clock);
  const dropped = once<[ClaimedRun, string]>(worker, 'run:dropped');
  worker.start();
  const [droppedRun, reason] = await dropped;
  expect(droppedRun.runId).toBe(run.runId);
  expect(reason).toBe(LEASE_TOO_SHORT);
  expect(calls).toEqual([]);
  expect(elsewhere).toEqual([run.runId]);
  const { rows } = await db.pool.query('SELECT state, attempt FROM run_states WHERE run_id = $1', [
    run.runId,
  ]);
  expect(rows).toEqual([{ state: 'succeeded', attempt: 2 }]);
});

test('a claim answered with less than the start margin left releases the run: queued again, no attempt spent', async () => {
  const clock = new FakeClock(T0);
  const run = await readyRun('t-short');
  pauseAfter(db.pool, isClaim, async () => {
    clock.advance(LEASE_MS - START_MARGIN_MS / 2);
  });
  const { worker, calls } = lateWorker(clock, undefined, true);
  const dropped = once<[ClaimedRun, string]>(worker, 'run:dropped');
  worker.start();
  const [droppedRun, reason] = await dropped;
  expect(droppedRun.runId).toBe(run.runId);
  expect(reason).toBe(LEASE_TOO_SHORT);
  expect(calls).toEqual([]);
  const { rows } = await db.pool.query('SELECT state, attempt FROM run_states WHERE run_id = $1', [
    run.runId,
  ]);
  expect(rows).toEqual([{ state: 'pending', attempt: 1 }]);
  expect((await db.pool.query('SELECT 1 FROM run_queue WHERE run_id = $1', [run.runId])).rowCount).toBe(1);
  const { rows: attempts } = await db.pool.query('SELECT outcome, error FROM attempts WHERE run_id = $1', [
    run.runId,
  ]);
  expect(attempts).toEqual([{ outcome: 'released', error: LEASE_TOO_SHORT }]);
});

test('a claim whose answer is lost is retried with its claim id: the worker gets the run it claimed, nothing stranded', async () => {
  const clock = new FakeClock(T0);
  const run = await readyRun('t-lost');
  // The claim commits, but its answer never reaches the worker.
  pauseAfter(db.pool, isClaim, async () => {
    throw new Error('connection lost after the claim');
  });
  const { worker, calls } = lateWorker(clock, 1000);
  const failed = once(worker, 'error');
  const succeeded = once<[ClaimedRun]>(worker, 'run:succeeded');
  worker.start();
  await failed;
  // The claim loop backs off (twice its 1 s interval), then claims again with the same id, well
  // within the claim's 30 s lease.
  clock.advance(2000);
  const [done] = await succeeded;
  expect(done.runId).toBe(run.runId);
  expect(calls).toEqual([run.runId]);
  const { rows } = await db.pool.query('SELECT state, attempt FROM run_states WHERE run_id = $1', [
    run.runId,
  ]);
  expect(rows).toEqual([{ state: 'succeeded', attempt: 1 }]);
});
