/**
 * Claims (migration 0007): a claim takes its runs off the queue and holds them in one claim row
 * per lease length; the runs' ends take them off it; the reaper ends whole expired claims; and a
 * database migrated from 0006 with live leases carries them over.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { FakeClock, seededRandom } from '../../src/core/index.js';
import { createPool, migrate, PostgresStore } from '../../src/store/index.js';
import { MIGRATIONS_DIR } from '../../src/store/migrate.js';
import * as C from '../../src/store/queries/claims.js';
import { CLAIM_PART_RUNS } from '../../src/store/queries/claims.js';
import * as R from '../../src/store/queries/runs.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { job, runRow, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const LEASE_MS = 30_000;
/** Every migration's number, from the files. */
const MIGRATIONS = readdirSync(MIGRATIONS_DIR)
  .filter((f) => /^\d{4}_.*\.sql$/.test(f))
  .map((f) => Number(f.slice(0, 4)))
  .sort((a, b) => a - b);

/** Registers a job in `tenantId` and triggers one run per slot; returns the run ids in slot order. */
async function runsOf(tenantId: string, slots: number[], overrides: Parameters<typeof job>[0] = {}) {
  const def = job(overrides);
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  const now = db.clock.nowMs();
  const runs = [];
  for (const scheduledFor of slots) {
    runs.push(await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor, now }));
  }
  return runs.map((r) => r.runId);
}

const claim = (tenantId: string, max: number, now = db.clock.nowMs()) =>
  db.store.claimRuns({ workerId: 'w-claims', pool: 'default', max, now, tenantId });

/**
 * Pending runs of `tenantId` that are not in exactly one place (the queue, or one claim), and
 * claims that list no run: both must always be empty.
 */
async function misplaced(tenantId: string) {
  const { rows } = await db.pool.query(
    `SELECT r.run_id,
       (SELECT count(*) FROM run_queue q WHERE q.run_id = r.run_id)::int AS queued,
       (SELECT count(*) FROM run_claims c WHERE r.run_id = ANY(c.run_ids))::int AS claimed
     FROM runs r WHERE r.tenant_id = $1 AND r.state = 'pending'`,
    [tenantId],
  );
  const empty = await db.pool.query('SELECT lease_token FROM run_claims WHERE cardinality(run_ids) = 0');
  return {
    runs: rows.filter((r) => r.queued + r.claimed !== 1),
    emptyClaims: empty.rows,
  };
}

const claimRows = async (tenantId: string) =>
  (
    await db.pool.query(
      `SELECT lease_token, lease_ms, lease_expires_at, run_ids FROM run_claims c
       WHERE EXISTS (SELECT 1 FROM runs r WHERE r.run_id = ANY(c.run_ids) AND r.tenant_id = $1)
       ORDER BY lease_ms`,
      [tenantId],
    )
  ).rows;

describe('claim rows', () => {
  test("a claimed run's instants are its run's, to the millisecond", async () => {
    const tenantId = uniqueId('t-instants');
    const now = db.clock.nowMs();
    const [id] = await runsOf(tenantId, [now - 1_234_567.999]);
    const [early] = await runsOf(tenantId, [Date.UTC(1970, 0, 1, 0, 0, 0, 1)]);
    const got = await claim(tenantId, 10);
    expect(got.map((c) => c.runId).sort()).toEqual([id, early].sort());
    for (const c of got) {
      const run = await db.store.getRun({ tenantId, runId: c.runId });
      expect([c.scheduledFor, c.availableAt, c.createdAt]).toEqual([
        run.scheduledFor,
        run.availableAt,
        run.createdAt,
      ]);
      expect(c.scheduledFor).toBeInstanceOf(Date);
    }
    expect(got.find((c) => c.runId === early)?.scheduledFor.toISOString()).toBe('1970-01-01T00:00:00.001Z');
    expect(got[0]?.leaseExpiresAt).toEqual(new Date(now + LEASE_MS));
  });

  test('a claimed run carries every field of its run, from each claim statement and from a retried claim', async () => {
    // Its own schema: a limit (which makes the store claim through the gated statements) stays there.
    const own = await setupDatabase();
    try {
      const tenantId = uniqueId('t-fields');
      const now = own.clock.nowMs();
      const fields = {
        handler: 'send-mail',
        pool: 'p-fields',
        payload: { to: 'a@example.com', n: [1, 2] },
        maxAttempts: 7,
        timeoutSeconds: 9,
        leaseSeconds: 45,
      };
      const claimIn = async (claimId: string, firstTry = true) =>
        own.store.claimRuns({
          workerId: 'w-fields',
          pool: 'p-fields',
          max: 10,
          now,
          tenantId,
          claimId,
          firstTry,
        });
      const check = async (got: Awaited<ReturnType<typeof claimIn>>, jobId: string) => {
        expect(got).toHaveLength(1);
        const run = await own.store.getRun({ tenantId, runId: got[0]!.runId });
        expect(got[0]).toEqual({
          runId: run.runId,
          tenantId,
          jobId,
          handler: 'send-mail',
          payload: { to: 'a@example.com', n: [1, 2] },
          pool: 'p-fields',
          scheduledFor: run.scheduledFor,
          attempt: 1,
          maxAttempts: 7,
          leaseToken: expect.stringMatching(/^[0-9a-f-]{36}$/),
          leaseExpiresAt: new Date(now + 45_000),
          availableAt: run.availableAt,
          timeoutMs: 9000,
          createdAt: run.createdAt,
        });
      };
      const jobOf = async (extra: Parameters<typeof job>[0] = {}) => {
        const def = job({ ...fields, ...extra });
        await upsertJob(own.store, { tenantId, job: def, now });
        await own.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: now - 60_000, now });
        return def.jobId;
      };
      // The plain claim (no limit exists), and the same claim id sent again (its retry's answer).
      const plain = await jobOf();
      const claimId = '7d1c2a8e-0000-4000-8000-000000000001';
      const first = await claimIn(claimId);
      await check(first, plain);
      const again = await claimIn(claimId, false);
      await check(again, plain);
      expect(again[0]!.leaseToken).toBe(first[0]!.leaseToken);
      // With a limit: the gated claim, then the claim paid by credits (the gated one set them aside).
      await own.store.putLimit({ tenantId, key: 'api', limit: { rate: 1000, burst: 1000 }, now });
      for (const [i, id] of ['00000000002', '00000000003'].entries()) {
        const limited = await jobOf({ limits: ['api'] });
        const got = await claimIn(`7d1c2a8e-0000-4000-8000-0${id}`);
        await check(got, limited);
        if (i === 0) {
          const { rows } = await own.pool.query(`SELECT count(*)::int AS n FROM limit_credits`);
          expect(rows[0].n).toBeGreaterThan(0);
        }
      }
    } finally {
      await own.teardown();
    }
  });

  test('one claim takes runs of two lease lengths: one token per length, each run expiring by its own', async () => {
    const tenantId = uniqueId('t-lengths');
    const now = db.clock.nowMs();
    const short = await runsOf(tenantId, [now - 3_000, now - 2_000], { leaseSeconds: 5 });
    const long = await runsOf(tenantId, [now - 2_500, now - 1_500]);
    const got = await claim(tenantId, 10);
    expect(got.map((c) => c.runId).sort()).toEqual([...short, ...long].sort());
    const tokenOf = (ids: string[]) =>
      new Set(got.filter((c) => ids.includes(c.runId)).map((c) => c.leaseToken));
    expect(tokenOf(short).size).toBe(1);
    expect(tokenOf(long).size).toBe(1);
    expect([...tokenOf(short)][0]).not.toBe([...tokenOf(long)][0]);
    for (const c of got) {
      expect(c.leaseExpiresAt).toEqual(new Date(now + (short.includes(c.runId) ? 5_000 : LEASE_MS)));
    }
    const rows = await claimRows(tenantId);
    expect(rows.map((r) => [r.lease_ms, [...r.run_ids].sort()])).toEqual([
      [5_000, [...short].sort()],
      [LEASE_MS, [...long].sort()],
    ]);
    // Claimed runs are off the queue and show as running, with the claim's lease.
    const queued = await db.pool.query('SELECT count(*)::int AS n FROM run_queue WHERE tenant_id = $1', [
      tenantId,
    ]);
    expect(queued.rows[0].n).toBe(0);
    expect(await runRow(db.pool, short[0]!)).toMatchObject({
      state: 'running',
      lease_owner: 'w-claims',
      lease_expires_at: new Date(now + 5_000),
    });
    expect(await misplaced(tenantId)).toEqual({ runs: [], emptyClaims: [] });
  });

  test('a claim shrinks as its runs end and goes with the last; renewing it renews only what it still holds', async () => {
    const tenantId = uniqueId('t-shrink');
    const now = db.clock.nowMs();
    const ids = await runsOf(tenantId, [now - 4_000, now - 3_000, now - 2_000, now - 1_000], {
      maxAttempts: 3,
    });
    const got = await claim(tenantId, 4);
    expect(new Set(got.map((c) => c.leaseToken)).size).toBe(1);
    const [a, b, c, d] = got;

    expect((await db.store.completeRuns({ leases: [a!], now })).completed).toEqual([a!.runId]);
    expect((await claimRows(tenantId))[0].run_ids.sort()).toEqual([b!.runId, c!.runId, d!.runId].sort());
    await db.store.failRun({ runId: b!.runId, leaseToken: b!.leaseToken, error: 'boom', now });
    expect((await db.store.releaseRuns({ leases: [c!], reason: 'shutdown', now })).released).toEqual([
      c!.runId,
    ]);
    expect((await claimRows(tenantId))[0].run_ids).toEqual([d!.runId]);
    expect(await misplaced(tenantId)).toEqual({ runs: [], emptyClaims: [] });

    // A heartbeat naming every run renews the claim for the one it still holds; the others are lost.
    const hb = await db.store.heartbeatRuns({ leases: got, now: now + 10_000 });
    expect(hb.renewed).toEqual([{ runId: d!.runId, leaseExpiresAt: new Date(now + 10_000 + LEASE_MS) }]);
    expect(hb.lost.sort()).toEqual([a!.runId, b!.runId, c!.runId].sort());

    expect((await db.store.completeRuns({ leases: [d!], now: now + 10_000 })).completed).toEqual([d!.runId]);
    expect(await claimRows(tenantId)).toEqual([]);
    expect(ids.length).toBe(4);
    const counts = await db.store.countRuns({ tenantId });
    expect(counts).toMatchObject({ succeeded: 2, pending: 2, running: 0 });
    expect(await misplaced(tenantId)).toEqual({ runs: [], emptyClaims: [] });
  });

  test('a claim of 250 runs is leased in parts of 100, 100 and 50: a row and a token each, its run ids inline', async () => {
    const tenantId = uniqueId('t-parts');
    const now = db.clock.nowMs();
    await runsOf(
      tenantId,
      Array.from({ length: 250 }, (_, i) => now - 10_000 + i),
    );
    const got = await claim(tenantId, 250);
    expect(got).toHaveLength(250);
    const { rows } = await db.pool.query(
      `SELECT c.lease_token, c.part, cardinality(c.run_ids) AS n, pg_column_size(c.run_ids) AS bytes,
         pg_column_size(c.*) AS row_bytes
       FROM run_claims c WHERE c.run_ids && $1::uuid[] ORDER BY c.part`,
      [got.map((r) => r.runId)],
    );
    expect(rows.map((r) => [r.part, r.n])).toEqual([
      [0, 100],
      [1, 100],
      [2, 50],
    ]);
    // Under PostgreSQL's TOAST threshold (about 2 KB a row): stored in the row, not out of line.
    for (const r of rows) expect(r.row_bytes).toBeLessThan(2032);
    // Each run carries its part's token.
    for (const r of rows) {
      expect(got.filter((c) => c.leaseToken === r.lease_token)).toHaveLength(r.n);
    }
    // Completing ten runs of the first part shortens that part alone; the others are untouched.
    const first = got.filter((c) => c.leaseToken === rows[0].lease_token).slice(0, 10);
    expect((await db.store.completeRuns({ leases: first, now })).completed).toHaveLength(10);
    const after = await db.pool.query(
      `SELECT c.part, cardinality(c.run_ids) AS n FROM run_claims c WHERE c.run_ids && $1::uuid[] ORDER BY c.part`,
      [got.map((r) => r.runId)],
    );
    expect(after.rows.map((r) => [r.part, r.n])).toEqual([
      [0, 90],
      [1, 100],
      [2, 50],
    ]);
    expect(await misplaced(tenantId)).toEqual({ runs: [], emptyClaims: [] });
  });

  test('countRuns counts a claim’s runs as running, not pending', async () => {
    const tenantId = uniqueId('t-count');
    const now = db.clock.nowMs();
    await runsOf(tenantId, [now - 3_000, now - 2_000, now - 1_000]);
    await claim(tenantId, 2);
    expect(await db.store.countRuns({ tenantId })).toMatchObject({ pending: 1, running: 2, succeeded: 0 });
  });
});

/** The plain claim of 10 runs of `pool` under `explain` (an EXPLAIN prefix), rolled back: its plan as text. */
async function claimPlan(explain: string, pool: string, tenants: string[] | null): Promise<string> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const params = [pool, new Date(db.clock.nowMs()), 10, 'w', LEASE_MS, null, null, 0, null, tenants];
    const { rows } = await client.query(`${explain} ${C.runClaim}`, params);
    return rows.map((r) => r['QUERY PLAN'] as string).join('\n');
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

describe('plans', () => {
  /** Every plan node of `plan` that unnests an array, with how many times it ran. */
  function unnests(node: Record<string, unknown>, out: number[] = []): number[] {
    if (node['Function Name'] === 'unnest') out.push(node['Actual Loops'] as number);
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) unnests(child, out);
    return out;
  }

  test('completing, renewing and releasing 300 runs of one claim unnests each array once, not once per run', async () => {
    const tenantId = uniqueId('t-plans');
    const now = db.clock.nowMs();
    await runsOf(
      tenantId,
      Array.from({ length: 300 }, (_, i) => now - 10_000 + i),
    );
    const got = await claim(tenantId, 300);
    // Leased in parts of 100 (migration 0020): three claim rows.
    const parts = new Set(got.map((c) => c.leaseToken)).size;
    expect(parts).toBe(300 / CLAIM_PART_RUNS);
    const ids = got.map((c) => c.runId);
    const tokens = got.map((c) => c.leaseToken);
    // What each answers: the completion its lost runs (none), the others every run they kept or released.
    const statements: [string, string, unknown[], number][] = [
      [
        'complete',
        R.runCompleteMany,
        [ids, tokens, new Date(now), null, ids.map(() => null), ids.map(() => null), null],
        0,
      ],
      ['heartbeat', R.runHeartbeatMany, [ids, tokens, new Date(now), null, null], 300],
      ['release', R.runReleaseMany, [ids, tokens, new Date(now), 'test', null, ids.map(() => null)], 300],
    ];
    for (const [name, sql, params, answered] of statements) {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
        const plan = rows[0]['QUERY PLAN'][0].Plan;
        expect(plan['Actual Rows'], name).toBe(answered);
        const loops = unnests(plan);
        expect(loops.length, name).toBeGreaterThan(0);
        // Once per claim row at most.
        expect(Math.max(...loops), name).toBeLessThanOrEqual(parts);
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    }
  });
});

describe('a claim restricted to tenants (tock worker --tenant)', () => {
  test('takes only those tenants’ runs, oldest first; nextAvailableAt looks at those only', async () => {
    const now = db.clock.nowMs();
    const [a, b, c] = [uniqueId('t-only-a'), uniqueId('t-only-b'), uniqueId('t-only-c')];
    const pool = uniqueId('only');
    // c's runs are the oldest: an unrestricted claim would take them first.
    const cRuns = await runsOf(c, [now - 9000, now - 8000], { pool });
    const aRuns = await runsOf(a, [now - 5000, now + 4000], { pool });
    const bRuns = await runsOf(b, [now - 4000, now + 3000], { pool });
    const got = await db.store.claimRuns({ workerId: 'w-only', pool, max: 10, now, tenants: [a, b] });
    expect(got.map((r) => r.runId)).toEqual([aRuns[0], bRuns[0]]);
    expect(await db.store.nextAvailableAt({ pool, now, tenants: [a] })).toEqual(new Date(now + 4000));
    expect(await db.store.nextAvailableAt({ pool, now, tenants: [a, b] })).toEqual(new Date(now + 3000));
    expect(await db.store.nextAvailableAt({ pool, now, tenants: [c] })).toBeNull();
    // Unrestricted, c's are next.
    const rest = await db.store.claimRuns({ workerId: 'w-all', pool, max: 10, now });
    expect(rest.map((r) => r.runId)).toEqual(cRuns);
    for (const tenants of [[], ['a/b'], Array.from({ length: 1001 }, (_, i) => `t${i}`)]) {
      await expect(db.store.claimRuns({ workerId: 'w', pool, max: 1, now, tenants })).rejects.toMatchObject({
        code: 'validation_error',
      });
    }
  });

  test('the unrestricted claim plans as before: no tenant filter on the queue scan', async () => {
    const explain = (tenants: string[] | null) => claimPlan('EXPLAIN (COSTS OFF)', 'default', tenants);
    const all = await explain(null);
    expect(all).toMatch(/Scan.* on run_queue\b/);
    expect(all).not.toMatch(/tenant_id = ANY/);
    // Restricted, the scan filters by tenant: a filter, or an index condition once the planner's
    // statistics (autovacuum's analyse of run_queue) make run_queue_tenants the cheaper scan.
    expect(await explain(['a', 'b'])).toMatch(
      /(Filter|Index Cond): .*tenant_id = ANY \('\{a,b\}'::text\[\]\)/,
    );
  });
});

describe('the fair order', () => {
  /** The claim of `pool` under EXPLAIN ANALYZE (rolled back). */
  const analyse = (pool: string) => claimPlan('EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)', pool, null);
  // The fair order's sort by turn and place (run, or "never executed"): only when it can change the order.
  const fairSort = /Sort \(actual rows=\d+ loops=1\)\n\s+Sort Key: c(_\d+)?\.turn/;

  test("with one tenant's runs ready, the claim takes them in sort_key order without the fair order's sorts", async () => {
    const pool = uniqueId('p-one');
    const tenantId = uniqueId('t-one');
    const now = db.clock.nowMs();
    const def = job({ pool });
    await upsertJob(db.store, { tenantId, job: def, now });
    const slots = [now - 1000, now - 3000, now - 2000];
    for (const scheduledFor of slots)
      await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor, now });
    const plan = await analyse(pool);
    expect(plan).not.toMatch(fairSort);
    // Nor the union with the tenants' firsts: first_overall's runs are the claim.
    expect(plan).not.toMatch(/CTE Scan on first_of_tenants \(actual/);
    // The runs taken leave the queue by the places they were locked at (a TID scan; on a queue
    // this small, a scan with that filter), not a probe of the primary key per run.
    const taken = /CTE taken\n([\s\S]*?)\n {2}CTE /.exec(plan)?.[1] ?? '';
    expect(taken).toMatch(/(Tid Scan on run_queue|Filter: \(ctid = ANY)/);
    expect(taken).not.toMatch(/run_queue_pkey/);
    const got = await db.store.claimRuns({ workerId: 'w-one', pool, max: 10, now });
    expect(got.map((r) => r.scheduledFor.getTime())).toEqual([now - 3000, now - 2000, now - 1000]);
  });

  test("with two tenants' runs ready, the fair order is computed: each tenant's first before a second", async () => {
    const pool = uniqueId('p-two');
    const now = db.clock.nowMs();
    const [a, b] = [uniqueId('t-a'), uniqueId('t-b')];
    const def = job({ pool });
    for (const tenantId of [a, b]) await upsertJob(db.store, { tenantId, job: def, now });
    for (const scheduledFor of [now - 3000, now - 2000]) {
      await db.store.triggerRun({ tenantId: a, jobId: def.jobId, scheduledFor, now });
    }
    await db.store.triggerRun({ tenantId: b, jobId: def.jobId, scheduledFor: now - 1000, now });
    expect(await analyse(pool)).toMatch(fairSort);
    // Two of three: each tenant's first, not a's two earliest.
    const got = await db.store.claimRuns({ workerId: 'w-two', pool, max: 2, now });
    expect(got.map((r) => [r.tenantId, r.scheduledFor.getTime()])).toEqual([
      [a, now - 3000],
      [b, now - 1000],
    ]);
  });
});

describe('listing a tenant’s runs by state', () => {
  test('queued, claimed, succeeded and dead runs each list under their state, newest first, page by page', async () => {
    const tenantId = uniqueId('t-list');
    const now = db.clock.nowMs();
    const ids = await runsOf(
      tenantId,
      [6, 5, 4, 3, 2, 1].map((i) => now - i * 1_000),
      { maxAttempts: 1 },
    );
    // Claimed in slot order: the two oldest end (one succeeds, one dies), two stay running.
    const got = await claim(tenantId, 4);
    await db.store.completeRuns({ leases: [got[0]!], now });
    await db.store.failRun({ runId: got[1]!.runId, leaseToken: got[1]!.leaseToken, error: 'x', now });
    const expected: Record<string, string[]> = {
      succeeded: [ids[0]!],
      dead: [ids[1]!],
      running: [ids[3]!, ids[2]!],
      pending: [ids[5]!, ids[4]!],
    };
    for (const [state, want] of Object.entries(expected)) {
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let page = 0; page < 5; page++) {
        const r = await db.store.listRuns({ tenantId, state: state as 'pending', limit: 1, cursor });
        for (const run of r.items) {
          expect(run.state).toBe(state);
          seen.push(run.runId);
        }
        cursor = r.nextCursor;
        if (!cursor) break;
      }
      expect(seen).toEqual(want);
    }
    const all = await db.store.listRuns({ tenantId, limit: 10 });
    expect(all.items.map((r) => r.runId)).toEqual([...ids].reverse());
  });
});

describe('the reaper ends whole claims', () => {
  test('batch size counts claims: one claim of 5 expired runs is reaped in one pass, and goes', async () => {
    // A database of its own: the reaper takes the oldest expired claims of all tenants.
    const own = await setupDatabase();
    try {
      const tenantId = 't-reap-claim';
      const def = job({ maxAttempts: 5 });
      await upsertJob(own.store, { tenantId, job: def, now: own.clock.nowMs() });
      const start = own.clock.nowMs();
      const ids: string[] = [];
      for (let i = 1; i <= 5; i++) {
        const run = await own.store.triggerRun({
          tenantId,
          jobId: def.jobId,
          scheduledFor: start - 10_000 + i,
          now: start,
        });
        ids.push(run.runId);
      }
      const got = await own.store.claimRuns({
        workerId: 'w-claims',
        pool: 'default',
        max: 5,
        now: start,
        tenantId,
      });
      expect(got).toHaveLength(5);
      // One run ends before the lease does; the reaper takes the other four, in one pass of batch 1.
      await own.store.completeRuns({ leases: [got[0]!], now: start + 1 });
      const reaped = await own.newStore({ random: seededRandom(3) }).reapExpired({
        now: start + LEASE_MS + 1,
        batchSize: 1,
      });
      const rest = got.slice(1).map((c) => c.runId);
      expect(reaped.requeued.map((r) => r.runId).sort()).toEqual([...rest].sort());
      for (const r of reaped.requeued) expect(r.attempt).toBe(2);
      expect((await own.pool.query('SELECT count(*)::int AS n FROM run_claims')).rows[0].n).toBe(0);
      const queued = await own.pool.query('SELECT run_id FROM run_queue ORDER BY run_id');
      expect(queued.rows.map((r) => r.run_id)).toEqual([...rest].sort());
      const attempts = await own.pool.query(
        `SELECT count(*)::int AS n FROM attempts WHERE run_id = ANY($1) AND outcome = 'lease_expired'
           AND lease_token = $2 AND worker_id = 'w-claims'`,
        [rest, got[0]!.leaseToken],
      );
      expect(attempts.rows[0].n).toBe(4);
      expect(ids).toHaveLength(5);
    } finally {
      await own.teardown();
    }
  });
});

describe('upgrading from migration 0006 with live leases', () => {
  test('pending runs are queued, a running run keeps its lease (token, worker, expiry), finished runs are listed', async () => {
    const url = inject('databaseUrl');
    const schema = `t_upgrade_${Math.random().toString(16).slice(2, 10)}`;
    const admin = createPool(url, { max: 1 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    const pool = createPool(url, { schema, max: 4 });
    const dir = mkdtempSync(join(tmpdir(), 'tock-migrations-'));
    try {
      for (const f of readdirSync(MIGRATIONS_DIR).filter((f) => /^000[1-6]_.*\.sql$/.test(f))) {
        cpSync(join(MIGRATIONS_DIR, f), join(dir, f));
      }
      expect(await migrate(pool, dir)).toEqual([1, 2, 3, 4, 5, 6]);
      const t = new Date(T0);
      const lease = (ms: number) => new Date(T0 + ms);
      const insert = `INSERT INTO runs (run_id, tenant_id, job_id, scheduled_for, state, max_attempts, handler, payload,
          pool, priority, backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at,
          lease_owner, lease_token, lease_expires_at, started_at, finished_at)
        VALUES ($1, 'up', 'j', $2, $3, 3, 'h', '{}', 'default', 0, 2, 3600, $2, $2, $2, $4, $5, $6, $7, $8)`;
      const id = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;
      const token = (n: number) => `11111111-0000-4000-8000-00000000000${n}`;
      await pool.query(insert, [id(1), lease(-4_000), 'pending', null, null, null, null, null]);
      await pool.query(insert, [
        id(2),
        lease(-3_000),
        'running',
        'w-old',
        token(2),
        lease(20_000),
        lease(-10_000),
        null,
      ]);
      await pool.query(insert, [
        id(3),
        lease(-2_000),
        'running',
        'w-old',
        token(3),
        lease(-1),
        lease(-40_000),
        null,
      ]);
      await pool.query(insert, [id(4), lease(-1_000), 'dead', 'w-old', token(4), null, lease(-9_000), t]);
      await pool.query(insert, [id(5), lease(-500), 'succeeded', 'w-old', token(5), null, lease(-9_000), t]);

      // The dead run's failure as versions before 0011 kept it: the whole stack as the error.
      const stack = 'Error: boom\n  on two lines\n    at handler (/app/h.js:1:2)\n    at run (/app/w.js:3:4)';
      await pool.query('UPDATE runs SET last_error = $2 WHERE run_id = $1', [id(4), stack]);
      await pool.query(
        `INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at, finished_at, outcome, error)
         VALUES ($1, $2, 1, 'w-old', $3, $4, 'failed', $5)`,
        [token(4), id(4), lease(-9_000), t, stack],
      );

      // 0007 and every later migration.
      expect(await migrate(pool)).toEqual(MIGRATIONS.filter((v) => v >= 7));
      const clock = new FakeClock(T0);
      const store = new PostgresStore(pool, { random: seededRandom(5) });
      const get = (n: number) => store.getRun({ tenantId: 'up', runId: id(n) });

      expect(await get(2)).toMatchObject({
        state: 'running',
        leaseOwner: 'w-old',
        leaseExpiresAt: lease(20_000),
      });
      // Running: claimed at -10 s, it shows as started at its slot (-3 s), the earliest its handler could.
      expect((await get(2)).attempts.map((a) => [a.workerId, a.claimedAt, a.startedAt, a.outcome])).toEqual([
        ['w-old', lease(-10_000), lease(-3_000), null],
      ]);
      // 0011 split the stored stack: the message on the run and the attempt, the stack apart.
      expect(await get(4)).toMatchObject({ state: 'dead', lastError: 'Error: boom\n  on two lines' });
      expect((await get(4)).attempts).toMatchObject([
        { attempt: 1, error: 'Error: boom\n  on two lines', errorStack: stack, claimedAt: null },
      ]);
      expect(await get(5)).toMatchObject({ state: 'succeeded' });
      expect(
        (await store.listRuns({ tenantId: 'up', state: 'dead', limit: 10 })).items.map((r) => r.runId),
      ).toEqual([id(4)]);
      expect(await store.countRuns({ tenantId: 'up' })).toMatchObject({
        pending: 1,
        running: 2,
        succeeded: 1,
        dead: 1,
      });

      // The old lease still fences: its token completes the run; the expired one is the reaper's.
      const done = await store.completeRuns({
        leases: [{ runId: id(2), leaseToken: token(2) }],
        now: clock.nowMs(),
      });
      expect(done).toEqual({ completed: [id(2)], lost: [] });
      expect(await get(2)).toMatchObject({
        state: 'succeeded',
        leaseOwner: 'w-old',
        claimedAt: lease(-10_000),
        startedAt: lease(-3_000),
      });
      const reaped = await store.reapExpired({ now: clock.nowMs(), batchSize: 10 });
      expect(reaped.requeued.map((r) => [r.runId, r.attempt])).toEqual([[id(3), 2]]);

      // The pending run, and the reaped one once its backoff ends, are claimable.
      const claimed = await store.claimRuns({
        workerId: 'w-new',
        pool: 'default',
        max: 10,
        now: clock.nowMs() + 3_600_000,
      });
      expect(claimed.map((c) => c.runId).sort()).toEqual([id(1), id(3)]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await pool.end();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    }
  });
});
