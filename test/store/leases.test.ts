/**
 * Leased execution: concurrent claimers never share a run, claim order (priority with ageing),
 * filters, fencing by lease token and live lease, heartbeats, and the attempt record.
 *
 * Claims here always pass `tenantId`, so each test sees only its own runs.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ClaimedRun } from '../../src/store/index.js';
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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const LEASE_MS = 30_000;

/** Registers a job in `tenantId` and triggers one run per slot; returns the run ids in slot order. */
async function runsOf(tenantId: string, slots: number[], overrides: Parameters<typeof job>[0] = {}) {
  const def = job(overrides);
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  const now = db.clock.nowMs();
  const runs = await Promise.all(
    slots.map((scheduledFor) => db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor, now })),
  );
  return { jobId: def.jobId, runIds: runs.map((r) => r.runId) };
}

const claim = (
  tenantId: string,
  o: { max?: number; now?: number; workerId?: string; pool?: string; handlers?: string[] } = {},
) =>
  db.store.claimRuns({
    workerId: o.workerId ?? 'w-1',
    pool: o.pool ?? 'default',
    max: o.max ?? 10,
    now: o.now ?? db.clock.nowMs(),
    tenantId,
    ...(o.handlers ? { handlers: o.handlers } : {}),
  });

describe('concurrent claimers', () => {
  test('eight claimers over 300 pending runs: each run claimed exactly once, each claim with its own token', async () => {
    const tenantId = uniqueId('t-claimers');
    const now = db.clock.nowMs();
    const { runIds } = await runsOf(
      tenantId,
      Array.from({ length: 300 }, (_, i) => now - 300_000 + i * 1000),
    );
    const stores = Array.from({ length: 8 }, () => db.newStore());

    const received = await Promise.all(
      stores.map(async (store, i) => {
        const got: ClaimedRun[] = [];
        for (;;) {
          const batch = await store.claimRuns({
            workerId: `claimer-${i}`,
            pool: 'default',
            max: 5,
            now,
            tenantId,
          });
          if (batch.length === 0) return got;
          expect(batch.length).toBeLessThanOrEqual(5);
          got.push(...batch);
        }
      }),
    );

    const all = received.flat();
    expect(all).toHaveLength(300);
    expect(new Set(all.map((c) => c.runId))).toEqual(new Set(runIds));
    // One lease per claim: the runs of one claim share its token, and no two claims share one.
    const tokens = all.map((c) => c.leaseToken);
    for (const t of tokens) expect(t).toMatch(UUID);
    const claimsOfToken = new Map<string, Set<string>>();
    received.forEach((got, i) => {
      for (const c of got) {
        const claimers = claimsOfToken.get(c.leaseToken) ?? new Set<string>();
        claimers.add(`claimer-${i}`);
        claimsOfToken.set(c.leaseToken, claimers);
      }
    });
    for (const claimers of claimsOfToken.values()) expect(claimers.size).toBe(1);
    expect(claimsOfToken.size).toBeGreaterThanOrEqual(60);
    for (const c of all) {
      expect(c.attempt).toBe(1);
      expect(c.leaseExpiresAt).toEqual(new Date(now + LEASE_MS));
    }

    // The database agrees: every run running once, under the worker and token that received it.
    const { rows } = await db.pool.query(
      'SELECT run_id, state, lease_owner, lease_token FROM run_states WHERE tenant_id = $1',
      [tenantId],
    );
    expect(rows).toHaveLength(300);
    const owner = new Map<string, [string, string]>();
    received.forEach((got, i) => {
      for (const c of got) owner.set(c.runId, [`claimer-${i}`, c.leaseToken]);
    });
    for (const r of rows) {
      expect(r.state).toBe('running');
      expect([r.lease_owner, r.lease_token]).toEqual(owner.get(r.run_id));
    }
    // Completed, each run shows one succeeded attempt by its claimer (read from the run row).
    const done = await db.store.completeRuns({ leases: all, now: now + 1, tenantId });
    expect(done.completed).toHaveLength(300);
    for (const id of runIds) {
      const att = await attemptRows(db.pool, id);
      expect(att.map((a) => [a.worker_id, a.attempt, a.outcome, a.started_at])).toEqual([
        [owner.get(id)![0], 1, 'succeeded', new Date(now)],
      ]);
    }
  });
});

describe('claim order', () => {
  test('priority 9 before priority 5 at equal availability', async () => {
    const tenantId = uniqueId('t-prio');
    const now = db.clock.nowMs();
    const p5 = await runsOf(tenantId, [now - 1_000], { priority: 5 });
    const p9 = await runsOf(tenantId, [now - 1_000], { priority: 9 });
    const p5b = await runsOf(tenantId, [now - 1_000], { priority: 5 });

    const first = await claim(tenantId, { max: 1 });
    expect(first.map((c) => c.runId)).toEqual(p9.runIds);
    const rest = await claim(tenantId, { max: 10 });
    expect(new Set(rest.map((c) => c.runId))).toEqual(new Set([...p5.runIds, ...p5b.runIds]));
  });

  test('a batch claim comes back best first', async () => {
    const tenantId = uniqueId('t-prio-batch');
    const now = db.clock.nowMs();
    const low = await runsOf(tenantId, [now - 5_000], { priority: 1 });
    const high = await runsOf(tenantId, [now - 5_000], { priority: 50 });
    const mid = await runsOf(tenantId, [now - 5_000], { priority: 20 });
    const got = await claim(tenantId, { max: 3 });
    expect(got.map((c) => c.runId)).toEqual([high.runIds[0], mid.runIds[0], low.runIds[0]]);
  });

  test('ageing: a priority-0 run available 10 minutes earlier beats a priority-9 run; 8 minutes does not', async () => {
    const now = db.clock.nowMs();
    const a = uniqueId('t-age10');
    const old0 = await runsOf(a, [now - 600_000], { priority: 0 });
    const new9 = await runsOf(a, [now], { priority: 9 });
    expect((await claim(a, { max: 1 })).map((c) => c.runId)).toEqual(old0.runIds);
    expect((await claim(a, { max: 1 })).map((c) => c.runId)).toEqual(new9.runIds);

    const b = uniqueId('t-age8');
    const old0b = await runsOf(b, [now - 480_000], { priority: 0 });
    const new9b = await runsOf(b, [now], { priority: 9 });
    expect((await claim(b, { max: 1 })).map((c) => c.runId)).toEqual(new9b.runIds);
    expect((await claim(b, { max: 1 })).map((c) => c.runId)).toEqual(old0b.runIds);
  });
});

describe('filters', () => {
  test('handlers filter: only runs of the named handlers are claimed', async () => {
    const tenantId = uniqueId('t-handlers');
    const now = db.clock.nowMs();
    const email = await runsOf(tenantId, [now - 3_000, now - 2_000], { handler: 'email' });
    const sms = await runsOf(tenantId, [now - 3_000, now - 1_000], { handler: 'sms' });

    expect(await claim(tenantId, { handlers: ['push'] })).toEqual([]);
    expect(await countRows(db.pool, 'run_states', "tenant_id = $1 AND state = 'pending'", [tenantId])).toBe(
      4,
    );

    const got = await claim(tenantId, { handlers: ['sms'] });
    expect(new Set(got.map((c) => c.runId))).toEqual(new Set(sms.runIds));
    for (const c of got) expect(c.handler).toBe('sms');
    const pendingEmail = await db.pool.query(
      "SELECT run_id FROM run_states WHERE tenant_id = $1 AND state = 'pending' ORDER BY scheduled_for",
      [tenantId],
    );
    expect(pendingEmail.rows.map((r) => r.run_id)).toEqual(email.runIds);

    const both = await claim(tenantId, { handlers: ['sms', 'email'] });
    expect(new Set(both.map((c) => c.runId))).toEqual(new Set(email.runIds));
  });

  test('pool filter: a run of pool gpu is claimed only from pool gpu', async () => {
    const tenantId = uniqueId('t-pool');
    const now = db.clock.nowMs();
    const gpu = await runsOf(tenantId, [now - 1_000], { pool: 'gpu' });
    const def = await runsOf(tenantId, [now - 1_000]);

    const fromDefault = await claim(tenantId, { pool: 'default' });
    expect(fromDefault.map((c) => c.runId)).toEqual(def.runIds);
    expect(await claim(tenantId, { pool: 'default' })).toEqual([]);
    expect(await claim(tenantId, { pool: 'cpu' })).toEqual([]);
    const fromGpu = await claim(tenantId, { pool: 'gpu' });
    expect(fromGpu.map((c) => [c.runId, c.pool])).toEqual([[gpu.runIds[0], 'gpu']]);
  });

  test('tenant filter: another tenant does not see the run', async () => {
    const tenantId = uniqueId('t-mine');
    const now = db.clock.nowMs();
    const mine = await runsOf(tenantId, [now - 1_000]);
    expect(await claim(uniqueId('t-theirs'))).toEqual([]);
    expect((await claim(tenantId)).map((c) => c.runId)).toEqual(mine.runIds);
  });
});

describe('fencing', () => {
  test('a stale token after the reaper requeued and another worker claimed cannot heartbeat, complete, fail or release', async () => {
    const tenantId = uniqueId('t-stale');
    const start = db.clock.nowMs();
    const { runIds } = await runsOf(tenantId, [start - 1_000]);
    const runId = runIds[0]!;
    const [old] = await claim(tenantId, { workerId: 'w-old', now: start });
    expect(old!.leaseExpiresAt).toEqual(new Date(start + LEASE_MS));

    // At the expiry instant itself the reaper leaves the run alone; one ms later it requeues it.
    db.clock.set(start + LEASE_MS);
    const atExpiry = await db.store.reapExpired({ now: db.clock.nowMs(), batchSize: 1000 });
    expect(atExpiry.requeued.filter((r) => r.runId === runId)).toEqual([]);
    expect((await runRow(db.pool, runId)).state).toBe('running');
    db.clock.advance(1);
    const reaped = await db.store.reapExpired({ now: db.clock.nowMs(), batchSize: 1000 });
    expect(reaped.requeued.filter((r) => r.runId === runId).map((r) => r.attempt)).toEqual([2]);

    const requeued = await db.store.getRun({ tenantId, runId });
    expect(requeued.state).toBe('pending');
    db.clock.set(requeued.availableAt.getTime());
    const [fresh] = await claim(tenantId, { workerId: 'w-new' });
    expect(fresh!.runId).toBe(runId);
    expect(fresh!.attempt).toBe(2);
    expect(fresh!.leaseToken).not.toBe(old!.leaseToken);

    const rowBefore = await runRow(db.pool, runId);
    const attemptsBefore = await attemptRows(db.pool, runId);
    expect(rowBefore).toMatchObject({
      state: 'running',
      attempt: 2,
      lease_token: fresh!.leaseToken,
      lease_owner: 'w-new',
    });

    const now = db.clock.nowMs();
    const stale = { runId, leaseToken: old!.leaseToken };
    expect(await db.store.heartbeatRuns({ leases: [stale], now })).toEqual({ renewed: [], lost: [runId] });
    expect(await db.store.completeRuns({ leases: [stale], now })).toEqual({ completed: [], lost: [runId] });
    const err = await expectTockError(
      db.store.failRun({ runId, leaseToken: old!.leaseToken, error: 'late failure', now }),
      'lease_lost',
    );
    expect(err.details.run_id).toBe(runId);
    await expectTockError(
      db.store.failRun({ runId, leaseToken: old!.leaseToken, error: 'late', permanent: true, now }),
      'lease_lost',
    );
    expect(await db.store.releaseRuns({ leases: [stale], reason: 'shutdown', now })).toEqual({
      released: [],
    });

    const rowAfter = await runRow(db.pool, runId);
    expect(rowAfter).toEqual(rowBefore);
    for (const col of ['state', 'attempt', 'lease_token', 'last_error', 'available_at', 'lease_expires_at']) {
      expect(rowAfter[col]).toEqual(rowBefore[col]);
    }
    expect(await attemptRows(db.pool, runId)).toEqual(attemptsBefore);

    // The live token still works.
    const live = await db.store.completeRuns({ leases: [fresh!], now });
    expect(live).toEqual({ completed: [runId], lost: [] });
  });

  test('complete, heartbeat and fail need a live lease: an expired lease that was not reaped is rejected', async () => {
    const tenantId = uniqueId('t-expired');
    const start = db.clock.nowMs();
    const { runIds } = await runsOf(tenantId, [start - 1_000]);
    const runId = runIds[0]!;
    const [c] = await claim(tenantId, { now: start });
    const before = await runRow(db.pool, runId);
    const attemptsBefore = await attemptRows(db.pool, runId);

    for (const at of [start + LEASE_MS, start + LEASE_MS + 1, start + LEASE_MS + 60_000]) {
      db.clock.set(at);
      expect(await db.store.completeRuns({ leases: [c!], now: at })).toEqual({
        completed: [],
        lost: [runId],
      });
      expect(await db.store.heartbeatRuns({ leases: [c!], now: at })).toEqual({ renewed: [], lost: [runId] });
      await expectTockError(
        db.store.failRun({ runId, leaseToken: c!.leaseToken, error: 'x', now: at }),
        'lease_lost',
      );
    }
    expect(await runRow(db.pool, runId)).toEqual(before);
    expect(await attemptRows(db.pool, runId)).toEqual(attemptsBefore);
    expect(before.state).toBe('running');

    // One ms before expiry it would still have been live (checked on a second run).
    const t = db.clock.nowMs();
    const second = await runsOf(tenantId, [t - 1]);
    const [c2] = await claim(tenantId, { now: t });
    expect(c2!.runId).toBe(second.runIds[0]);
    db.clock.set(t + LEASE_MS - 1);
    expect(await db.store.completeRuns({ leases: [c2!], now: db.clock.nowMs() })).toEqual({
      completed: [c2!.runId],
      lost: [],
    });
  });

  test('malformed ids and tokens come back as lost, not as errors', async () => {
    const now = db.clock.nowMs();
    const bogus = [
      { runId: 'not-a-uuid', leaseToken: '00000000-0000-0000-0000-000000000000' },
      { runId: '00000000-0000-0000-0000-000000000001', leaseToken: 'nope' },
    ];
    expect(await db.store.heartbeatRuns({ leases: bogus, now })).toEqual({
      renewed: [],
      lost: ['not-a-uuid', '00000000-0000-0000-0000-000000000001'],
    });
    expect(await db.store.completeRuns({ leases: bogus, now })).toEqual({
      completed: [],
      lost: ['not-a-uuid', '00000000-0000-0000-0000-000000000001'],
    });
    await expectTockError(
      db.store.failRun({ runId: 'not-a-uuid', leaseToken: 'nope', error: 'x', now }),
      'lease_lost',
    );
  });
});

describe('heartbeats', () => {
  test('a heartbeat renews the lease to now + lease length, and the renewal is real', async () => {
    const tenantId = uniqueId('t-hb');
    const start = db.clock.nowMs();
    const { runIds } = await runsOf(tenantId, [start - 1_000]);
    const runId = runIds[0]!;
    const [c] = await claim(tenantId, { now: start });

    db.clock.advance(20_000);
    const now = db.clock.nowMs();
    const hb = await db.store.heartbeatRuns({ leases: [c!], now });
    expect(hb).toEqual({ renewed: [{ runId, leaseExpiresAt: new Date(now + LEASE_MS) }], lost: [] });
    expect((await runRow(db.pool, runId)).lease_expires_at).toEqual(new Date(now + LEASE_MS));

    // Past the original expiry the reaper leaves it alone and completion is accepted.
    db.clock.set(start + LEASE_MS + 5_000);
    const reaped = await db.store.reapExpired({ now: db.clock.nowMs(), batchSize: 1000 });
    expect([...reaped.requeued, ...reaped.dead].filter((r) => r.runId === runId)).toEqual([]);
    expect(await db.store.completeRuns({ leases: [c!], now: db.clock.nowMs() })).toEqual({
      completed: [runId],
      lost: [],
    });
  });

  test("a job's own lease length is used for the claim and for renewals", async () => {
    const tenantId = uniqueId('t-hb-own');
    const start = db.clock.nowMs();
    const { runIds } = await runsOf(tenantId, [start - 1_000], { leaseSeconds: 5 });
    const [c] = await claim(tenantId, { now: start });
    expect(c!.leaseExpiresAt).toEqual(new Date(start + 5_000));
    db.clock.advance(4_000);
    const hb = await db.store.heartbeatRuns({ leases: [c!], now: db.clock.nowMs() });
    expect(hb.renewed).toEqual([{ runId: runIds[0], leaseExpiresAt: new Date(db.clock.nowMs() + 5_000) }]);
  });

  test('a batched heartbeat over 50 leases with 3 stale ones renews 47 and returns exactly those 3 as lost', async () => {
    const tenantId = uniqueId('t-hb50');
    const start = db.clock.nowMs();
    await runsOf(
      tenantId,
      Array.from({ length: 50 }, (_, i) => start - 60_000 + i * 100),
    );
    const claimed = await claim(tenantId, { max: 50, now: start });
    expect(claimed).toHaveLength(50);

    // Three ways to lose a lease: completed, failed (back to pending), and a token that is not the run's.
    const completed = claimed[3]!;
    const failed = claimed[17]!;
    const forged = claimed[42]!;
    await db.store.completeRuns({ leases: [completed], now: start });
    await db.store.failRun({ runId: failed.runId, leaseToken: failed.leaseToken, error: 'boom', now: start });
    const leases = claimed.map((c) =>
      c === forged ? { runId: c.runId, leaseToken: '11111111-2222-4333-8444-555555555555' } : c,
    );

    db.clock.advance(10_000);
    const now = db.clock.nowMs();
    const hb = await db.store.heartbeatRuns({ leases, now });
    expect([...hb.lost].sort()).toEqual([completed.runId, failed.runId, forged.runId].sort());
    expect(hb.renewed).toHaveLength(47);
    const lostSet = new Set(hb.lost);
    expect(new Set(hb.renewed.map((r) => r.runId))).toEqual(
      new Set(claimed.filter((c) => !lostSet.has(c.runId)).map((c) => c.runId)),
    );
    for (const r of hb.renewed) expect(r.leaseExpiresAt).toEqual(new Date(now + LEASE_MS));

    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS n FROM run_states WHERE tenant_id = $1 AND state = 'running' AND lease_expires_at = $2",
      [tenantId, new Date(now + LEASE_MS)],
    );
    // One lease per claim: renewing the claim renewed every run it still lists, the forged run's
    // too (its own heartbeat, whose token is not its claim's, was reported lost above).
    expect(rows[0].n).toBe(48);
    // A forged token alone renews nothing.
    db.clock.advance(1_000);
    const alone = await db.store.heartbeatRuns({ leases: [leases[42]!], now: db.clock.nowMs() });
    expect(alone).toEqual({ renewed: [], lost: [forged.runId] });
    expect((await runRow(db.pool, forged.runId)).lease_expires_at).toEqual(new Date(now + LEASE_MS));
  });
});

describe('attempt record', () => {
  test('claim, fail, backoff, claim, complete: two attempts, failed then succeeded, with their workers', async () => {
    const tenantId = uniqueId('t-attempts');
    const t1 = db.clock.nowMs();
    const { runIds } = await runsOf(tenantId, [t1 - 1_000]);
    const runId = runIds[0]!;

    const [a1] = await claim(tenantId, { workerId: 'worker-a', now: t1 });
    db.clock.advance(700);
    const f1 = db.clock.nowMs();
    const failed = await db.store.failRun({
      runId,
      leaseToken: a1!.leaseToken,
      error: 'handler threw',
      now: f1,
    });
    expect(failed.state).toBe('pending');
    expect(failed.attempt).toBe(2);
    expect(await claim(tenantId, { workerId: 'worker-b', now: failed.availableAt!.getTime() - 1 })).toEqual(
      [],
    );

    db.clock.set(failed.availableAt!.getTime());
    const t2 = db.clock.nowMs();
    const [a2] = await claim(tenantId, { workerId: 'worker-b', now: t2 });
    expect(a2!.attempt).toBe(2);
    db.clock.advance(300);
    const f2 = db.clock.nowMs();
    expect(await db.store.completeRuns({ leases: [a2!], now: f2 })).toEqual({ completed: [runId], lost: [] });

    const run = await db.store.getRun({ tenantId, runId });
    expect(run.state).toBe('succeeded');
    expect(run.attempt).toBe(2);
    expect(run.finishedAt).toEqual(new Date(f2));
    expect(run.lastError).toBeNull();
    expect(run.leaseExpiresAt).toBeNull();
    expect(run.attempts).toEqual([
      {
        attempt: 1,
        workerId: 'worker-a',
        startedAt: new Date(t1),
        claimedAt: new Date(t1),
        finishedAt: new Date(f1),
        outcome: 'failed',
        error: 'handler threw',
        errorStack: null,
        output: null,
        ...NO_REPORT,
      },
      {
        attempt: 2,
        workerId: 'worker-b',
        startedAt: new Date(t2),
        claimedAt: new Date(t2),
        finishedAt: new Date(f2),
        outcome: 'succeeded',
        error: null,
        errorStack: null,
        output: null,
        ...NO_REPORT,
      },
    ]);
  });
});

describe('batched completion', () => {
  test('each run of a batch keeps its own output and reported start; a batch with no output stores none', async () => {
    const tenantId = uniqueId('t-batch-complete');
    const now = db.clock.nowMs();
    await runsOf(tenantId, [now - 5000, now - 4000, now - 3000, now - 2000, now - 1000]);
    const got = await claim(tenantId, { max: 5, now });
    expect(got).toHaveLength(5);
    const [a, b, c, d, e] = got as [ClaimedRun, ClaimedRun, ClaimedRun, ClaimedRun, ClaimedRun];
    // One statement: outputs on one run only, starts on two (one a fraction of a millisecond).
    const first = await db.store.completeRuns({
      leases: [
        { ...a, startedAt: now + 5.5, output: null },
        { ...b, output: 'b said "hi" \\ {x,y}' },
        { ...c, startedAt: now + 7 },
      ],
      now: now + 10,
    });
    expect([...first.completed].sort()).toEqual([a.runId, b.runId, c.runId].sort());
    expect(first.lost).toEqual([]);
    /** The run's succeeded attempt: its start and output. */
    const attemptOf = async (r: ClaimedRun) => {
      const run = await db.store.getRun({ tenantId, runId: r.runId });
      expect(run.state).toBe('succeeded');
      const [only] = run.attempts;
      return { startedAt: only!.startedAt, output: only!.output };
    };
    expect(await attemptOf(a)).toEqual({ startedAt: new Date(now + 5.5), output: null });
    expect(await attemptOf(b)).toEqual({ startedAt: new Date(now), output: 'b said "hi" \\ {x,y}' });
    expect(await attemptOf(c)).toEqual({ startedAt: new Date(now + 7), output: null });
    // No output and no start in the whole batch.
    const second = await db.store.completeRuns({ leases: [d, e], now: now + 20 });
    expect([...second.completed].sort()).toEqual([d.runId, e.runId].sort());
    for (const r of [d, e]) expect(await attemptOf(r)).toEqual({ startedAt: new Date(now), output: null });
  });

  test('a batch answers each run as the caller gave it: completed, or lost where its lease is not live (ids in either case)', async () => {
    const tenantId = uniqueId('t-batch-lost');
    const now = db.clock.nowMs();
    await runsOf(tenantId, [now - 4000, now - 3000, now - 2000, now - 1000]);
    const got = await claim(tenantId, { max: 4, now });
    const [a, b, c, d] = got as [ClaimedRun, ClaimedRun, ClaimedRun, ClaimedRun];
    await db.store.completeRuns({ leases: [d], now: now + 5 });
    const upper = { ...b, runId: b.runId.toUpperCase(), leaseToken: b.leaseToken.toUpperCase() };
    const staleUpper = { ...d, runId: d.runId.toUpperCase() };
    // The four share one claim's token: another token is one no claim holds.
    const wrongToken = { ...c, leaseToken: randomUUID() };

    const r = await db.store.completeRuns({ leases: [a, upper, wrongToken, staleUpper], now: now + 10 });

    expect(r.completed).toEqual([a.runId, upper.runId]);
    expect(r.lost).toEqual([c.runId, staleUpper.runId]);
    for (const done of [a, b])
      expect((await db.store.getRun({ tenantId, runId: done.runId })).state).toBe('succeeded');
    expect((await db.store.getRun({ tenantId, runId: c.runId })).state).toBe('running');
  });
});

describe('claiming ahead', () => {
  test('aheadMs claims runs that become claimable within it, with a lease from now; a bad value changes nothing', async () => {
    const tenantId = uniqueId('t-ahead');
    await upsertJob(db.store, { tenantId, job: job({ jobId: 'ahead' }), now: db.clock.nowMs() });
    const now = db.clock.nowMs();
    const run = await db.store.triggerRun({ tenantId, jobId: 'ahead', scheduledFor: now + 500, now });
    const claim = (aheadMs?: number) =>
      db.store.claimRuns({ workerId: 'w-ahead', pool: 'default', max: 10, now, tenantId, aheadMs });
    expect(await claim()).toEqual([]);
    expect(await claim(499)).toEqual([]);
    for (const bad of [-1, 10_001, 0.5, Number.NaN]) {
      await expectTockError(claim(bad), 'validation_error');
    }
    expect((await runRow(db.pool, run.runId)).state).toBe('pending');
    const [got] = await claim(500);
    expect(got).toMatchObject({ runId: run.runId, availableAt: new Date(now + 500) });
    expect(got!.leaseExpiresAt).toEqual(new Date(now + LEASE_MS));
    // Running, it shows the claim and, as its start, its slot: the handler starts there, not at the claim.
    expect(await runRow(db.pool, run.runId)).toMatchObject({
      state: 'running',
      claimed_at: new Date(now),
      started_at: new Date(now + 500),
    });
  });

  test('started_at is the handler start the worker reports, kept within [claim, end]; claimed_at is the claim', async () => {
    const tenantId = uniqueId('t-start');
    await upsertJob(db.store, {
      tenantId,
      job: job({ jobId: 'start', maxAttempts: 5 }),
      now: db.clock.nowMs(),
    });
    const now = db.clock.nowMs();
    const slots = [1, 2, 3, 4, 5].map((i) => now + 10_000 * i + 200);
    const runs = [];
    for (const slot of slots)
      runs.push(await db.store.triggerRun({ tenantId, jobId: 'start', scheduledFor: slot, now }));
    // Each claimed 200 ms ahead of its slot, as a worker with --claim-ahead 250 does.
    const claimAt = async (slot: number) => {
      const [got] = await db.store.claimRuns({
        workerId: 'w-start',
        pool: 'default',
        max: 1,
        now: slot - 200,
        tenantId,
        aheadMs: 250,
      });
      expect(got!.scheduledFor).toEqual(new Date(slot));
      return got!;
    };
    // Completed, with the handler's start (30 ms after the slot) reported.
    const a = await claimAt(slots[0]!);
    await db.store.completeRuns({ leases: [{ ...a, startedAt: slots[0]! + 30 }], now: slots[0]! + 1030 });
    expect(await db.store.getRun({ tenantId, runId: a.runId })).toMatchObject({
      startedAt: new Date(slots[0]! + 30),
      claimedAt: new Date(slots[0]! - 200),
      finishedAt: new Date(slots[0]! + 1030),
    });
    // Failed, reporting a start before the claim (a skewed clock, a client that says 1970): kept at
    // the slot, never earlier — the run was claimable from there and no sooner.
    const b = await claimAt(slots[1]!);
    await db.store.failRun({
      ...b,
      error: 'x',
      permanent: true,
      startedAt: slots[1]! - 60_000,
      now: slots[1]! + 500,
    });
    const [failed] = (await db.store.getRun({ tenantId, runId: b.runId })).attempts;
    expect(failed).toMatchObject({
      startedAt: new Date(slots[1]!),
      claimedAt: new Date(slots[1]! - 200),
    });
    // Completed reporting a start after the end: kept at the end.
    const c = await claimAt(slots[2]!);
    await db.store.completeRuns({ leases: [{ ...c, startedAt: slots[2]! + 60_000 }], now: slots[2]! + 100 });
    expect((await db.store.getRun({ tenantId, runId: c.runId })).startedAt).toEqual(
      new Date(slots[2]! + 100),
    );
    // No start reported (an older worker): the later of the claim and the slot, not the claim.
    const d = await claimAt(slots[3]!);
    await db.store.completeRuns({ leases: [d], now: slots[3]! + 100 });
    expect(await db.store.getRun({ tenantId, runId: d.runId })).toMatchObject({
      startedAt: new Date(slots[3]!),
      claimedAt: new Date(slots[3]! - 200),
    });
    // Reaped (nobody reported): the later of the claim and the slot as well.
    const e = await claimAt(slots[4]!);
    const reapAt = e.leaseExpiresAt.getTime() + 1;
    await db.store.reapExpired({ now: reapAt, batchSize: 10 });
    const [expired] = (await db.store.getRun({ tenantId, runId: e.runId })).attempts;
    expect(expired).toMatchObject({
      outcome: 'lease_expired',
      startedAt: new Date(slots[4]!),
      claimedAt: new Date(slots[4]! - 200),
      finishedAt: new Date(reapAt),
    });
    // A start that is no instant is refused.
    const f = await db.store.triggerRun({ tenantId, jobId: 'start', scheduledFor: now + 99_000, now });
    const heldNow = await db.store.claimRuns({
      workerId: 'w-start',
      pool: 'default',
      max: 10,
      now: now + 99_000,
      tenantId,
    });
    const held = heldNow.find((r) => r.runId === f.runId);
    await expectTockError(
      db.store.completeRuns({ leases: [{ ...held!, startedAt: Number.NaN }], now: now + 99_001 }),
      'validation_error',
    );
  });
});
