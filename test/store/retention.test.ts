/**
 * Retention in the store (`pruneBatch`, tenant settings, the maintenance lease) against
 * PostgreSQL: finished runs past their state's retention go with their attempts and reports; runs
 * inside it, pending and running runs, and other tenants' runs stay; a job's override and the
 * tenant's settings decide before the defaults; a dry run deletes nothing; batches resume from
 * their cursor; a run replayed while a batch waits for its row stays; a batch holds no lock a claim
 * waits on; one owner holds a maintenance lease at a time.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DEFAULT_RETENTION, type RetentionState, ValidationError } from '../../src/core/index.js';
import { PostgresStore, type PruneCursor } from '../../src/store/index.js';
import * as Q from '../../src/store/queries/retention.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { countRows, endedRun, job, uniqueId, upsertJob } from '../setup/factories.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

/** A run that ended in `state` at `finishedAt` (null: still pending), with an attempt and a report. */
const runEnded = (
  tenantId: string,
  jobId: string,
  slot: number,
  state: RetentionState | null,
  finishedAt: number,
) => endedRun(db, { tenantId, jobId, slot, state, finishedAt });

async function exists(runId: string): Promise<boolean> {
  return (await countRows(db.pool, 'runs', 'run_id = $1', [runId])) === 1;
}

/** Prunes the tenant as of `now` to the end, in batches of `limit`; the total by state. */
async function pruneAll(tenantId: string, now: number, { limit = 1000, dryRun = false } = {}) {
  const total: Record<string, number> = {};
  let after = null;
  let batches = 0;
  do {
    const r = await db.store.pruneBatch({ tenantId, now, horizon: now, after, limit, dryRun });
    for (const [state, n] of Object.entries(r.byState)) total[state] = (total[state] ?? 0) + (n ?? 0);
    after = r.next;
    batches += 1;
  } while (after !== null && batches < 1000);
  return { total, batches };
}

async function tenantWithJob(extra: Record<string, unknown> = {}) {
  const tenantId = uniqueId('tenant');
  const def = job(extra);
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  return { tenantId, jobId: def.jobId };
}

describe('pruning', () => {
  test('deletes finished runs past the default retention with their attempts and reports, keeps the rest', async () => {
    const { tenantId, jobId } = await tenantWithJob();
    const now = db.clock.nowMs();
    const oldSucceeded = await runEnded(tenantId, jobId, now - 8 * DAY, 'succeeded', now - 8 * DAY + 1000);
    const youngSucceeded = await runEnded(tenantId, jobId, now - 6 * DAY, 'succeeded', now - 6 * DAY);
    const oldDead = await runEnded(tenantId, jobId, now - 31 * DAY, 'dead', now - 31 * DAY);
    const youngDead = await runEnded(tenantId, jobId, now - 20 * DAY, 'dead', now - 20 * DAY);
    const oldCancelled = await runEnded(tenantId, jobId, now - 9 * DAY, 'cancelled', now - 9 * DAY);
    const oldSkipped = await runEnded(tenantId, jobId, now - 9 * DAY - 1000, 'skipped', now - 9 * DAY);
    const oldPending = await runEnded(tenantId, jobId, now - 90 * DAY, null, 0);

    const { total } = await pruneAll(tenantId, now);

    expect(total).toEqual({ succeeded: 1, dead: 1, cancelled: 1, skipped: 1 });
    for (const gone of [oldSucceeded, oldDead, oldCancelled, oldSkipped])
      expect(await exists(gone)).toBe(false);
    for (const kept of [youngSucceeded, youngDead, oldPending]) expect(await exists(kept)).toBe(true);
    expect(await countRows(db.pool, 'attempts', 'run_id = $1', [oldSucceeded])).toBe(0);
    expect(await countRows(db.pool, 'attempt_progress', 'run_id = $1', [oldDead])).toBe(0);
    expect(await countRows(db.pool, 'attempts', 'run_id = $1', [youngDead])).toBe(1);
    expect(await countRows(db.pool, 'run_queue', 'run_id = $1', [oldPending])).toBe(1);
  });

  test('never deletes a running run, however old its slot', async () => {
    const pool = uniqueId('pool');
    const { tenantId, jobId } = await tenantWithJob({ pool });
    const now = db.clock.nowMs();
    const running = await runEnded(tenantId, jobId, now - 60 * DAY, null, 0);
    const claimed = await db.store.claimRuns({ workerId: 'w', pool, max: 10, now });
    expect(claimed.map((r) => r.runId)).toEqual([running]);

    const { total } = await pruneAll(tenantId, now + 365 * DAY);

    expect(total).toEqual({});
    expect(await exists(running)).toBe(true);
  });

  test("the job's override, then the tenant's settings, then the defaults", async () => {
    const { tenantId, jobId: plain } = await tenantWithJob();
    const keeper = job({ retention: { succeeded: 'forever' } });
    const brief = job({ retention: { dead: '1h' } });
    const now = db.clock.nowMs();
    await upsertJob(db.store, { tenantId, job: keeper, now });
    await upsertJob(db.store, { tenantId, job: brief, now });
    await db.store.putTenantRetention({ tenantId, retention: { succeeded: '2d', dead: 'forever' }, now });

    const plainOld = await runEnded(tenantId, plain, now - 3 * DAY, 'succeeded', now - 3 * DAY);
    const plainYoung = await runEnded(tenantId, plain, now - DAY, 'succeeded', now - DAY);
    const plainDead = await runEnded(tenantId, plain, now - 300 * DAY, 'dead', now - 300 * DAY);
    const plainCancelled = await runEnded(tenantId, plain, now - 8 * DAY, 'cancelled', now - 8 * DAY);
    const keeperOld = await runEnded(tenantId, keeper.jobId, now - 300 * DAY, 'succeeded', now - 300 * DAY);
    const briefDead = await runEnded(tenantId, brief.jobId, now - 2 * HOUR, 'dead', now - 2 * HOUR);
    const briefYoungDead = await runEnded(
      tenantId,
      brief.jobId,
      now - 10 * 60_000,
      'dead',
      now - 10 * 60_000,
    );

    expect(await db.store.shortestRetention({ tenantId })).toBe(HOUR);
    const { total } = await pruneAll(tenantId, now);

    expect(total).toEqual({ succeeded: 1, cancelled: 1, dead: 1 });
    for (const gone of [plainOld, plainCancelled, briefDead]) expect(await exists(gone)).toBe(false);
    for (const kept of [plainYoung, plainDead, keeperOld, briefYoungDead])
      expect(await exists(kept)).toBe(true);
  });

  test("touches only the tenant's own runs, by its own settings", async () => {
    const a = await tenantWithJob();
    const b = await tenantWithJob();
    const now = db.clock.nowMs();
    await db.store.putTenantRetention({ tenantId: a.tenantId, retention: { succeeded: '1h' }, now });
    const aRun = await runEnded(a.tenantId, a.jobId, now - 2 * HOUR, 'succeeded', now - 2 * HOUR);
    const bRun = await runEnded(b.tenantId, b.jobId, now - 2 * HOUR, 'succeeded', now - 2 * HOUR);
    const bOld = await runEnded(b.tenantId, b.jobId, now - 10 * DAY, 'succeeded', now - 10 * DAY);

    expect(await pruneAll(a.tenantId, now)).toMatchObject({ total: { succeeded: 1 } });

    expect(await exists(aRun)).toBe(false);
    expect(await exists(bRun)).toBe(true);
    expect(await exists(bOld)).toBe(true);
    expect(await pruneAll(b.tenantId, now)).toMatchObject({ total: { succeeded: 1 } });
    expect(await exists(bRun)).toBe(true);
  });

  test('a dry run counts what would go and deletes nothing', async () => {
    const { tenantId, jobId } = await tenantWithJob();
    const now = db.clock.nowMs();
    const old = await runEnded(tenantId, jobId, now - 40 * DAY, 'dead', now - 40 * DAY);

    expect((await pruneAll(tenantId, now, { dryRun: true })).total).toEqual({ dead: 1 });
    expect(await exists(old)).toBe(true);
    expect(await countRows(db.pool, 'attempts', 'run_id = $1', [old])).toBe(1);
  });

  test('batches resume from their cursor and stop at the horizon', async () => {
    const { tenantId, jobId } = await tenantWithJob();
    const now = db.clock.nowMs();
    const ids: string[] = [];
    // 25 old runs, every third one kept (dead, inside its month), then one after the horizon.
    for (let i = 0; i < 25; i++) {
      const slot = now - 20 * DAY + i * 1000;
      ids.push(await runEnded(tenantId, jobId, slot, i % 3 === 0 ? 'dead' : 'succeeded', slot));
    }
    const late = await runEnded(tenantId, jobId, now - DAY, 'succeeded', now - 20 * DAY);

    const batch = (after: PruneCursor | null) =>
      db.store.pruneBatch({ tenantId, now, horizon: now - 2 * DAY, after, limit: 10, dryRun: false });
    const first = await batch(null);
    expect(first.scanned).toBe(10);
    expect(first.next).not.toBeNull();
    expect(first.byState).toEqual({ succeeded: 6 });
    const second = await batch(first.next);
    expect(second.byState).toEqual({ succeeded: 7 });
    const third = await batch(second.next);
    expect(third).toMatchObject({ scanned: 5, next: null, byState: { succeeded: 3 } });
    expect(third.last).toEqual({ slot: expect.any(Date), runId: ids[24] });
    expect(await countRows(db.pool, 'runs', 'tenant_id = $1', [tenantId])).toBe(9 + 1);
    expect(await exists(late)).toBe(true);
  });

  test('a run replayed while the batch waits for its row stays', async () => {
    const { tenantId, jobId } = await tenantWithJob();
    const now = db.clock.nowMs();
    const dead = await runEnded(tenantId, jobId, now - 40 * DAY, 'dead', now - 40 * DAY);
    const replayer = await db.pool.connect();
    try {
      await replayer.query('BEGIN');
      await replayer.query(
        "UPDATE runs SET state = 'pending', parked = NULL, finished_at = NULL WHERE run_id = $1",
        [dead],
      );
      const pruning = db.store.pruneBatch({
        tenantId,
        now,
        horizon: now,
        after: null,
        limit: 100,
        dryRun: false,
      });
      // The batch read the run as dead (its snapshot) and now waits for the replayer's row lock.
      await waitForLockWait(db.pool);
      await replayer.query('COMMIT');
      expect((await pruning).byState).toEqual({});
    } finally {
      replayer.release();
    }
    expect(await exists(dead)).toBe(true);
  });

  test('holds no lock a claim waits on', async () => {
    const pool = uniqueId('pool');
    const { tenantId, jobId } = await tenantWithJob({ pool });
    const now = db.clock.nowMs();
    for (let i = 0; i < 50; i++)
      await runEnded(tenantId, jobId, now - 10 * DAY + i * 1000, 'succeeded', now - 10 * DAY);
    const ready = await runEnded(tenantId, jobId, now - 60_000, null, 0);
    const claimPool = new pg.Pool({
      connectionString: db.url,
      max: 2,
      options: `-c search_path=${db.schema} -c lock_timeout=50ms`,
    });
    const pruner = await db.pool.connect();
    try {
      // The batch's transaction stays open with its 50 deletes: the claim must not wait for it.
      await pruner.query('BEGIN');
      const batch = await pruner.query(Q.pruneBatch, [
        tenantId,
        new Date(now),
        new Date(now),
        null,
        null,
        1000,
        JSON.stringify(DEFAULT_RETENTION),
        false,
        0,
      ]);
      expect(batch.rows[0].by_state).toEqual({ succeeded: 50 });
      const claimed = await new PostgresStore(claimPool).claimRuns({ workerId: 'w', pool, max: 10, now });
      expect(claimed.map((r) => r.runId)).toEqual([ready]);
      await pruner.query('ROLLBACK');
    } finally {
      await pruner.query('ROLLBACK').catch(() => {});
      pruner.release();
      await claimPool.end();
    }
  });
});

/** Waits (at most 5 s) until some session of the database waits for a lock. */
async function waitForLockWait(pool: typeof db.pool): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
    );
    if (rows[0].n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no session waited for a lock within 5 s');
}

describe('tenant settings', () => {
  test('are stored canonical, and a bad value is refused with nothing written', async () => {
    const tenantId = uniqueId('tenant');
    const now = db.clock.nowMs();
    expect(await db.store.getTenantRetention({ tenantId })).toBeNull();
    expect(
      await db.store.putTenantRetention({ tenantId, retention: { succeeded: '168h', dead: 'forever' }, now }),
    ).toEqual({
      succeeded: '7d',
      dead: 'forever',
    });
    for (const bad of [
      { running: '1d' },
      { succeeded: '1 day' },
      { dead: 5 },
      { succeeded: '10ms' },
      { skipped: '400d' },
    ]) {
      await expect(
        db.store.putTenantRetention({ tenantId, retention: bad as never, now }),
      ).rejects.toBeInstanceOf(ValidationError);
    }
    expect(await db.store.getTenantRetention({ tenantId })).toEqual({ succeeded: '7d', dead: 'forever' });
    expect(await db.store.shortestRetention({ tenantId })).toBe(7 * DAY);
    await db.store.putTenantRetention({
      tenantId,
      retention: { succeeded: 'forever', dead: 'forever', cancelled: 'forever', skipped: 'forever' },
      now,
    });
    expect(await db.store.shortestRetention({ tenantId })).toBeNull();
  });

  test('tenantsWithRuns lists each tenant with runs once, in order, in pages', async () => {
    const a = await tenantWithJob();
    const now = db.clock.nowMs();
    await runEnded(a.tenantId, a.jobId, now, null, 0);
    await runEnded(a.tenantId, a.jobId, now - 1000, null, 0);
    const all: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page: string[] = await db.store.tenantsWithRuns({ after, limit: 2 });
      all.push(...page);
      if (page.length < 2) break;
      after = page[page.length - 1] ?? null;
    }
    expect(all).toEqual([...new Set(all)].sort());
    expect(all).toContain(a.tenantId);
  });
});

describe('maintenance leases', () => {
  test('one owner at a time; taken over when it lapses; given back', async () => {
    const name = uniqueId('duty');
    const now = db.clock.nowMs();
    expect(await db.store.takeMaintenanceLease({ name, owner: 'a', now, leaseMs: 30_000 })).toBe(true);
    expect(await db.store.takeMaintenanceLease({ name, owner: 'b', now: now + 1000, leaseMs: 30_000 })).toBe(
      false,
    );
    expect(
      await db.store.takeMaintenanceLease({ name, owner: 'a', now: now + 20_000, leaseMs: 30_000 }),
    ).toBe(true);
    expect(
      await db.store.takeMaintenanceLease({ name, owner: 'b', now: now + 40_000, leaseMs: 30_000 }),
    ).toBe(false);
    expect(
      await db.store.takeMaintenanceLease({ name, owner: 'b', now: now + 50_000, leaseMs: 30_000 }),
    ).toBe(true);
    await db.store.releaseMaintenanceLease({ name, owner: 'a' });
    expect(
      await db.store.takeMaintenanceLease({ name, owner: 'a', now: now + 51_000, leaseMs: 30_000 }),
    ).toBe(false);
    await db.store.releaseMaintenanceLease({ name, owner: 'b' });
    expect(
      await db.store.takeMaintenanceLease({ name, owner: 'a', now: now + 52_000, leaseMs: 30_000 }),
    ).toBe(true);
  });
});
