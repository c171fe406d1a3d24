/**
 * What the hot path's statements read, counted by PostgreSQL itself (`pg_stat_xact_user_tables`,
 * the counters of this session not yet flushed): a completion reads no row of the queue, however many runs wait
 * in it. (Before issue 20's fix, the completion's `skip`-overlap branch, empty for every other job,
 * was planned as a hash join that fetched its first queue row by a sequential scan before finding
 * it had nothing to join: every completion read the queue until its first due run, all of it when
 * nothing was due.)
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PostgresStore } from '../../src/store/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, queueRuns, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
const TENANT = 'hot-path';
const WAITING = 20_000;

beforeAll(async () => {
  db = await setupDatabase();
  const def = job({ jobId: 'waiting' });
  await upsertJob(db.store, { tenantId: TENANT, job: def, now: db.clock.nowMs() });
  // 20,000 runs queued for tomorrow: none due, each a row a scan of the queue would read.
  await queueRuns(db.pool, {
    tenantId: TENANT,
    jobId: def.jobId,
    pool: 'default',
    n: WAITING,
    firstMs: db.clock.nowMs() + 86_400_000,
    stepMs: 1000,
  });
  await db.pool.query('ANALYZE runs, run_queue');
}, 60_000);
afterAll(() => db.teardown());

/**
 * Runs `work` on a store of one connection in a transaction, rolled back, twice: the queue rows the
 * second read. (The first plans the statements, which may probe an index for its ends.)
 */
async function queueRowsRead(work: (store: PostgresStore) => Promise<unknown>): Promise<number> {
  const pool = db.newPool(1);
  const store = new PostgresStore(pool);
  const count = async () =>
    (
      await pool.query(
        `SELECT (seq_tup_read + COALESCE(idx_tup_fetch, 0))::int AS n
         FROM pg_stat_xact_user_tables WHERE relid = 'run_queue'::regclass`,
      )
    ).rows[0].n as number;
  let read = -1;
  for (let i = 0; i < 2; i++) {
    await pool.query('BEGIN');
    try {
      // Counted before and after: the counters may still hold earlier transactions' reads.
      const before = await count();
      await work(store);
      read = (await count()) - before;
    } finally {
      await pool.query('ROLLBACK');
    }
  }
  return read;
}

/** A due run of a job of its own, claimed: its lease. */
async function claimedRun() {
  const def = job();
  await upsertJob(db.store, { tenantId: TENANT, job: def, now: db.clock.nowMs() });
  const now = db.clock.nowMs();
  const { runId } = await db.store.triggerRun({ tenantId: TENANT, jobId: def.jobId, scheduledFor: now, now });
  const [claimed] = await db.store.claimRuns({ workerId: 'w-hot', pool: 'default', max: 1, now });
  expect(claimed?.runId).toBe(runId);
  return { runId, leaseToken: claimed?.leaseToken ?? '' };
}

test('a completion reads no queue row, with 20,000 runs waiting', async () => {
  const lease = await claimedRun();
  const read = await queueRowsRead(async (store) => {
    const { completed } = await store.completeRuns({ leases: [lease], now: db.clock.nowMs() });
    expect(completed).toEqual([lease.runId]);
  });
  expect(read).toBe(0);
});

// Unnamed statements, planned at each call: the planner may read a few index entries of the queue
// (an index's ends, for its estimates), never the queue.
test('a failure and a release read no more than a few queue rows, with 20,000 runs waiting', async () => {
  const lease = await claimedRun();
  const failed = await queueRowsRead((store) =>
    store.failRun({ ...lease, error: 'boom', now: db.clock.nowMs() }),
  );
  expect(failed).toBeLessThan(10);
  const released = await queueRowsRead(async (store) => {
    const r = await store.releaseRuns({ leases: [lease], reason: 'shutdown', now: db.clock.nowMs() });
    expect(r.released).toEqual([lease.runId]);
  });
  expect(released).toBeLessThan(10);
});
