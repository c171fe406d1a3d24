/**
 * Run history: keyset pagination newest first by (scheduled_for, run_id), stability under inserts,
 * the dead-letter view, counts by state, and tenant scoping of single-run reads.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { RUN_STATES } from '../../src/core/index.js';
import type { Run } from '../../src/store/index.js';
import * as R from '../../src/store/queries/run-reads.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { expectTockError, job, NO_REPORT, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

type Key = { runId: string; scheduledFor: Date };

/** Newest first by (scheduled_for, run_id): the order the store promises. */
function newestFirst(a: Key, b: Key): number {
  const d = b.scheduledFor.getTime() - a.scheduledFor.getTime();
  if (d !== 0) return d;
  return a.runId < b.runId ? 1 : a.runId > b.runId ? -1 : 0;
}

async function newJob(tenantId: string, overrides: Parameters<typeof job>[0] = {}) {
  const def = job(overrides);
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  return def.jobId;
}

function trigger(tenantId: string, jobId: string, slots: number[]): Promise<Run[]> {
  const now = db.clock.nowMs();
  return Promise.all(
    slots.map((scheduledFor) => db.store.triggerRun({ tenantId, jobId, scheduledFor, now })),
  );
}

/** Fetches every page; returns the pages' run ids and cursors. */
async function allPages(p: { tenantId: string; jobId?: string; state?: Run['state']; limit: number }) {
  const pages: Run[][] = [];
  const cursors: (string | null)[] = [];
  let cursor: string | null = null;
  do {
    const page = await db.store.listRuns({ ...p, cursor });
    pages.push(page.items);
    cursors.push(page.nextCursor);
    cursor = page.nextCursor;
  } while (cursor !== null && pages.length < 100);
  return { pages, cursors, items: pages.flat() };
}

/** A deterministic shuffle, so insertion order is not slot order. */
function shuffled<T>(xs: T[]): T[] {
  const out = [...xs];
  let seed = 12345;
  for (let i = out.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const j = seed % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('pagination', () => {
  test('57 runs of one job, limit 10: every run once, newest first, null cursor on the last page', async () => {
    const tenantId = uniqueId('t-hist');
    const a = await newJob(tenantId);
    const b = await newJob(tenantId);
    const base = db.clock.nowMs();
    const slotsA = shuffled(Array.from({ length: 57 }, (_, k) => base - k * 1_000));
    const slotsB = Array.from({ length: 19 }, (_, k) => base - k * 3_000); // shares 19 slots with A
    const runsA = await trigger(tenantId, a, slotsA);
    const runsB = await trigger(tenantId, b, slotsB);

    const { pages, cursors, items } = await allPages({ tenantId, jobId: a, limit: 10 });
    expect(pages.map((p) => p.length)).toEqual([10, 10, 10, 10, 10, 7]);
    expect(cursors.slice(0, 5).every((c) => typeof c === 'string')).toBe(true);
    expect(cursors[5]).toBeNull();
    expect(items.map((r) => r.runId)).toEqual([...runsA].sort(newestFirst).map((r) => r.runId));
    expect(new Set(items.map((r) => r.runId)).size).toBe(57);
    for (const r of items) expect(r.jobId).toBe(a);
    expect(items.map((r) => r.scheduledFor.getTime())).toEqual(
      Array.from({ length: 57 }, (_, k) => base - k * 1_000),
    );

    // Across both jobs, runs sharing a slot are ordered by run_id, descending.
    const both = await allPages({ tenantId, limit: 10 });
    expect(both.pages.map((p) => p.length)).toEqual([10, 10, 10, 10, 10, 10, 10, 6]);
    expect(both.cursors[7]).toBeNull();
    expect(both.items.map((r) => r.runId)).toEqual(
      [...runsA, ...runsB].sort(newestFirst).map((r) => r.runId),
    );
    const ties = both.items.filter((r) => (base - r.scheduledFor.getTime()) % 3_000 === 0);
    expect(ties).toHaveLength(38);
  });

  test('stable under inserts: no run that existed at the start is skipped or repeated', async () => {
    const tenantId = uniqueId('t-stable');
    const jobId = await newJob(tenantId);
    const base = db.clock.nowMs();
    const initial = await trigger(
      tenantId,
      jobId,
      Array.from({ length: 30 }, (_, k) => base - k * 1_000),
    );
    const initialIds = new Set(initial.map((r) => r.runId));

    const seen: Run[] = [];
    const behindCursor = new Set<string>(); // inserted where the reader already was: must not appear
    const aheadOfCursor = new Set<string>(); // inserted where the reader has yet to go: must appear once
    let cursor: string | null = null;
    let round = 0;
    do {
      const page = await db.store.listRuns({ tenantId, jobId, limit: 10, cursor });
      seen.push(...page.items);
      cursor = page.nextCursor;
      const last = seen[seen.length - 1]!.scheduledFor.getTime();
      round += 1;
      // New runs: newer than everything, between already-read runs, just below the cursor, and oldest.
      const newer = await trigger(tenantId, jobId, [base + round * 1_000, last + 500]);
      const older = await trigger(tenantId, jobId, [last - 500, base - 100_000 - round * 1_000]);
      for (const r of newer) behindCursor.add(r.runId);
      for (const r of older) aheadOfCursor.add(r.runId);
    } while (cursor !== null && round < 20);

    const ids = seen.map((r) => r.runId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of initialIds) expect(ids.filter((x) => x === id)).toHaveLength(1);
    for (const id of behindCursor) expect(ids).not.toContain(id);
    // Runs inserted ahead of the cursor on the last round come after the end the reader reached.
    const lastRound = [...aheadOfCursor].slice(-2);
    for (const id of aheadOfCursor) {
      if (!lastRound.includes(id)) expect(ids.filter((x) => x === id)).toHaveLength(1);
    }
    expect(seen).toEqual([...seen].sort(newestFirst));
    expect(ids.length).toBe(30 + aheadOfCursor.size - 2);
  });

  test('bad paging input is a validation error', async () => {
    const tenantId = uniqueId('t-badpage');
    await expectTockError(db.store.listRuns({ tenantId, limit: 0 }), 'validation_error');
    await expectTockError(db.store.listRuns({ tenantId, limit: 501 }), 'validation_error');
    await expectTockError(
      db.store.listRuns({ tenantId, limit: 10, cursor: 'garbage!!' }),
      'validation_error',
    );
    await expectTockError(
      db.store.listRuns({ tenantId, limit: 10, state: 'lost' as never }),
      'validation_error',
    );
    const badId = Buffer.from(JSON.stringify([Date.now(), 'not-a-uuid'])).toString('base64url');
    await expectTockError(db.store.listRuns({ tenantId, limit: 10, cursor: badId }), 'validation_error');
    const badTime = Buffer.from(JSON.stringify(['x', '00000000-0000-0000-0000-000000000000'])).toString(
      'base64url',
    );
    await expectTockError(db.store.listRuns({ tenantId, limit: 10, cursor: badTime }), 'validation_error');
    expect(await db.store.listRuns({ tenantId, limit: 500 })).toEqual({ items: [], nextCursor: null });
  });
});

describe('dead-letter view and counts', () => {
  /** Claims every pending run of the tenant, keyed by run id. */
  async function claimAll(tenantId: string) {
    const claimed = await db.store.claimRuns({
      workerId: 'w-hist',
      pool: 'default',
      max: 100,
      now: db.clock.nowMs(),
      tenantId,
    });
    return new Map(claimed.map((c) => [c.runId, c]));
  }

  test('listRuns by state dead lists the dead runs of every job of the tenant, newest first', async () => {
    const tenantId = uniqueId('t-dead');
    const x = await newJob(tenantId, { maxAttempts: 1 });
    const y = await newJob(tenantId);
    const now = db.clock.nowMs();
    const [x0, x1, x2] = await trigger(tenantId, x, [now - 5_000, now - 4_000, now - 3_000]);
    const [y0, y1] = await trigger(tenantId, y, [now - 4_500, now - 2_000]);
    const leases = await claimAll(tenantId);
    expect(leases.size).toBe(5);
    const lease = (id: string) => leases.get(id)!.leaseToken;
    await db.store.failRun({ runId: x0!.runId, leaseToken: lease(x0!.runId), error: 'exhausted', now }); // max 1
    await db.store.failRun({
      runId: x1!.runId,
      leaseToken: lease(x1!.runId),
      error: 'p',
      permanent: true,
      now,
    });
    await db.store.failRun({
      runId: y0!.runId,
      leaseToken: lease(y0!.runId),
      error: 'p',
      permanent: true,
      now,
    });
    await db.store.completeRuns({ leases: [leases.get(x2!.runId)!], now });
    await db.store.failRun({ runId: y1!.runId, leaseToken: lease(y1!.runId), error: 'retry', now }); // pending

    // Another tenant's dead run must not show.
    const other = uniqueId('t-dead-other');
    const z = await newJob(other);
    const [z0] = await trigger(other, z, [now - 4_200]);
    const zl = await claimAll(other);
    await db.store.failRun({
      runId: z0!.runId,
      leaseToken: zl.get(z0!.runId)!.leaseToken,
      error: 'p',
      permanent: true,
      now,
    });

    const dead = await db.store.listRuns({ tenantId, state: 'dead', limit: 50 });
    expect(dead.items.map((r) => r.runId)).toEqual([x1!.runId, y0!.runId, x0!.runId]);
    expect(dead.items.map((r) => r.lastError)).toEqual(['p', 'p', 'exhausted']);
    for (const r of dead.items) expect(r.state).toBe('dead');
    expect(dead.nextCursor).toBeNull();

    const paged = await allPages({ tenantId, state: 'dead', limit: 2 });
    expect(paged.pages.map((p) => p.map((r) => r.runId))).toEqual([[x1!.runId, y0!.runId], [x0!.runId]]);

    const deadX = await db.store.listRuns({ tenantId, jobId: x, state: 'dead', limit: 50 });
    expect(deadX.items.map((r) => r.runId)).toEqual([x1!.runId, x0!.runId]);
    const pendingY = await db.store.listRuns({ tenantId, jobId: y, state: 'pending', limit: 50 });
    expect(pendingY.items.map((r) => r.runId)).toEqual([y1!.runId]);
  });

  test('countRuns has every state as a key, zeros included, per tenant and overall', async () => {
    const tenantId = uniqueId('t-count');
    const j = await newJob(tenantId);
    const now = db.clock.nowMs();
    const [r0, r1] = await trigger(tenantId, j, [now - 3_000, now - 2_000, now - 1_000]);
    const leases = await db.store.claimRuns({ workerId: 'w', pool: 'default', max: 2, now, tenantId });
    expect(leases.map((l) => l.runId)).toEqual([r0!.runId, r1!.runId]);
    await db.store.completeRuns({ leases: [leases[0]!], now });
    await trigger(tenantId, j, [now - 500]);

    const partial = await db.store.countRuns({ tenantId });
    expect(partial).toEqual({ pending: 2, running: 1, succeeded: 1, dead: 0, cancelled: 0, skipped: 0 });
    expect(Object.keys(partial).sort()).toEqual([...RUN_STATES].sort());

    // Now all five: one dead, and two cancelled by deleting a job with pending runs.
    await db.store.failRun({
      runId: r1!.runId,
      leaseToken: leases[1]!.leaseToken,
      error: 'p',
      permanent: true,
      now,
    });
    const gone = await newJob(tenantId);
    await trigger(tenantId, gone, [now + 60_000, now + 120_000]);
    await db.store.deleteJob({ tenantId, jobId: gone, now });
    expect(await db.store.countRuns({ tenantId })).toEqual({
      pending: 2,
      running: 0,
      succeeded: 1,
      dead: 1,
      cancelled: 2,
      skipped: 0,
    });

    expect(await db.store.countRuns({ tenantId: uniqueId('t-count-empty') })).toEqual({
      pending: 0,
      running: 0,
      succeeded: 0,
      dead: 0,
      cancelled: 0,
      skipped: 0,
    });

    const { rows } = await db.pool.query('SELECT state, count(*)::int AS n FROM run_states GROUP BY state');
    const expected = Object.fromEntries(RUN_STATES.map((s) => [s, 0]));
    for (const r of rows) expected[r.state] = r.n;
    expect(await db.store.countRuns({})).toEqual(expected);
  });
});

describe('getRun', () => {
  test("another tenant's run and malformed or unknown ids are not_found", async () => {
    const tenantId = uniqueId('t-get');
    const j = await newJob(tenantId);
    const [run] = await trigger(tenantId, j, [db.clock.nowMs()]);
    const got = await db.store.getRun({ tenantId, runId: run!.runId });
    expect(got).toMatchObject({ runId: run!.runId, tenantId, jobId: j, attempts: [] });
    // The id is case-insensitive, as a uuid.
    expect((await db.store.getRun({ tenantId, runId: run!.runId.toUpperCase() })).runId).toBe(run!.runId);

    const err = await expectTockError(
      db.store.getRun({ tenantId: uniqueId('t-get-other'), runId: run!.runId }),
      'not_found',
    );
    expect(err.details.run_id).toBe(run!.runId);
    for (const bad of [
      'not-a-uuid',
      '',
      '123',
      `${run!.runId}0`,
      run!.runId.slice(1),
      "'; DROP TABLE runs; --",
    ]) {
      await expectTockError(db.store.getRun({ tenantId, runId: bad }), 'not_found');
    }
    await expectTockError(
      db.store.getRun({ tenantId, runId: '00000000-0000-4000-8000-000000000000' }),
      'not_found',
    );
  });
});

describe('attempts (a row for each that failed, was released or expired)', () => {
  test('the running and the succeeded attempt read from the run row; no attempt row is written for them', async () => {
    const tenantId = uniqueId('t-att');
    const j = await newJob(tenantId);
    const now = db.clock.nowMs();
    const [run] = await trigger(tenantId, j, [now - 1_000]);
    const [lease] = await db.store.claimRuns({ workerId: 'w-att', pool: 'default', max: 1, now, tenantId });
    expect(lease!.runId).toBe(run!.runId);
    const attemptCount = async () =>
      (await db.pool.query('SELECT count(*)::int AS n FROM attempts WHERE run_id = $1', [run!.runId])).rows[0]
        .n;
    expect(await attemptCount()).toBe(0);
    expect((await db.store.getRun({ tenantId, runId: run!.runId })).attempts).toEqual([
      {
        attempt: 1,
        workerId: 'w-att',
        startedAt: new Date(now),
        claimedAt: new Date(now),
        finishedAt: null,
        outcome: null,
        error: null,
        errorStack: null,
        output: null,
        ...NO_REPORT,
      },
    ]);
    await db.store.completeRuns({ leases: [{ ...lease!, output: 'done' }], now: now + 5 });
    expect((await db.store.getRun({ tenantId, runId: run!.runId })).attempts).toEqual([
      {
        attempt: 1,
        workerId: 'w-att',
        startedAt: new Date(now),
        claimedAt: new Date(now),
        finishedAt: new Date(now + 5),
        outcome: 'succeeded',
        error: null,
        errorStack: null,
        output: 'done',
        ...NO_REPORT,
      },
    ]);
    // The succeeded attempt is the run row itself: no attempt row is written for it.
    expect(await attemptCount()).toBe(0);
  });

  test('an attempt row written at claim by an earlier version is completed in place, and shown once', async () => {
    const tenantId = uniqueId('t-att-old');
    const j = await newJob(tenantId, { maxAttempts: 3 });
    const now = db.clock.nowMs();
    const [run] = await trigger(tenantId, j, [now - 1_000]);
    const [lease] = await db.store.claimRuns({ workerId: 'w-old', pool: 'default', max: 1, now, tenantId });
    // What versions before migration 0006 wrote at claim.
    await db.pool.query(
      'INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at) VALUES ($1, $2, 1, $3, $4)',
      [lease!.leaseToken, run!.runId, 'w-old', new Date(now)],
    );
    const shown = (await db.store.getRun({ tenantId, runId: run!.runId })).attempts;
    expect(shown.map((a) => [a.attempt, a.workerId, a.outcome])).toEqual([[1, 'w-old', null]]);

    await db.store.failRun({
      runId: run!.runId,
      leaseToken: lease!.leaseToken,
      error: 'boom',
      now: now + 10,
    });
    const { rows } = await db.pool.query(
      'SELECT attempt, worker_id, outcome, error, finished_at FROM attempts WHERE run_id = $1',
      [run!.runId],
    );
    expect(rows).toEqual([
      { attempt: 1, worker_id: 'w-old', outcome: 'failed', error: 'boom', finished_at: new Date(now + 10) },
    ]);

    // Retried and succeeding under a row written at claim: the success is shown once.
    db.clock.advance(60_000);
    const later = db.clock.nowMs();
    const [again] = await db.store.claimRuns({
      workerId: 'w-old',
      pool: 'default',
      max: 1,
      now: later,
      tenantId,
    });
    expect(again).toMatchObject({ runId: run!.runId, attempt: 2 });
    await db.pool.query(
      'INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at) VALUES ($1, $2, 2, $3, $4)',
      [again!.leaseToken, run!.runId, 'w-old', new Date(later)],
    );
    await db.store.completeRuns({ leases: [again!], now: later + 1 });
    const after = (await db.store.getRun({ tenantId, runId: run!.runId })).attempts;
    expect(after.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'failed'],
      [2, 'succeeded'],
    ]);
  });

  test('listing a job, a tenant, or its dead letters reads an index (no scan of runs, no sort)', async () => {
    const tenantId = uniqueId('t-plan');
    const j = await newJob(tenantId);
    const plan = async (sql: string, params: unknown[]) => {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        // A test table is small enough for a scan to win on cost; with scans priced out, the
        // plan shows which index serves the query, or a (disabled) scan where none can.
        await client.query('SET LOCAL enable_seqscan = off');
        await client.query('SET LOCAL enable_bitmapscan = off');
        const { rows } = await client.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
        return JSON.stringify(rows[0]['QUERY PLAN']);
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    };
    const first = { rows: 51, after: false };
    const next = { rows: 51, after: true };
    const cursor = [new Date(), '00000000-0000-4000-8000-000000000000'];
    const byJob = await plan(R.runListOfJob(first, false), [tenantId, j]);
    // The unique (tenant, job, slot) index, or, in a tenant this small, the tenant's index: both
    // are in slot order. The page is chosen under its limit; only its rows are sorted.
    expect(byJob).toMatch(/runs_tenant_id_job_id_scheduled_for_key|runs_by_tenant/);
    expect(byJob).toContain('"Node Type":"Limit"');
    expect(byJob).not.toMatch(/"Seq Scan"[^}]*"Relation Name":"runs"/);
    const dead = await plan(R.runListParked(first), [tenantId, 'dead']);
    expect(dead).toContain('runs_parked');
    expect(dead).not.toContain('Seq Scan');
    expect(dead).not.toContain('"Sort"');
    const deadAfter = await plan(R.runListParked(next), [tenantId, 'dead', ...cursor]);
    expect(deadAfter).toContain('runs_parked');
    // Succeeded, or any state: the tenant's runs newest first (run_claims, a few live claims, is
    // scanned to tell running from pending).
    const succeeded = await plan(R.runListSucceeded(first), [tenantId]);
    expect(succeeded).toContain('runs_by_tenant');
    expect(succeeded).not.toContain('"Sort"');
    const all = await plan(R.runList(first), [tenantId]);
    expect(all).toContain('runs_by_tenant');
    expect(all).not.toContain('"Sort"');
    expect(all).not.toMatch(/"Seq Scan"[^}]*"Relation Name":"runs"/);
  });
});
