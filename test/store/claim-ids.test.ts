/**
 * Retry-safe claims at the store (issue 14, item 10): a claim id names one claim. Sent again, by the
 * same or another server on the same database, it answers that claim's runs and tokens and claims
 * nothing new; another tenant's or worker's claim id finds nothing of theirs (and claims their own runs); a claim id whose
 * claim has expired claims nothing (and takes nothing off the queue); and a claim whose client went
 * away is released without spending an attempt, unless a retry was answered with it.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PostgresStore } from '../../src/store/index.js';
import * as C from '../../src/store/queries/claims.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

/** `n` ready runs of a fresh job of `tenantId` in a pool of their own; returns the pool. */
async function readyPool(tenantId: string, n: number): Promise<string> {
  const pool = uniqueId('p');
  const def = job({ pool });
  const now = db.clock.nowMs();
  await upsertJob(db.store, { tenantId, job: def, now });
  for (let i = 0; i < n; i++) {
    await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: now - (n - i) * 1000, now });
  }
  return pool;
}

const count = async (sql: string, params: unknown[]) => (await db.pool.query(sql, params)).rowCount;

test('the same claim id, again and from a second store, answers the same runs and tokens and claims nothing new', async () => {
  const pool = await readyPool('t-same', 5);
  const claimId = randomUUID();
  const now = db.clock.nowMs();
  const p = { workerId: 'w-1', pool, max: 2, now, tenantId: 't-same', claimId };
  const first = await db.store.claimRuns(p);
  expect(first).toHaveLength(2);
  const again = await db.store.claimRuns({ ...p, now: now + 1000 });
  const elsewhere = await db.newStore().claimRuns({ ...p, now: now + 2000, max: 3 });
  for (const answer of [again, elsewhere]) {
    expect(answer.map((r) => [r.runId, r.leaseToken, r.leaseExpiresAt.getTime()])).toEqual(
      first.map((r) => [r.runId, r.leaseToken, r.leaseExpiresAt.getTime()]),
    );
  }
  expect(await count('SELECT 1 FROM run_claims WHERE claim_id = $1', [claimId])).toBe(1);
  expect(await count('SELECT 1 FROM run_queue WHERE pool = $1', [pool])).toBe(3);
  // A new claim id claims new runs.
  const next = await db.store.claimRuns({ ...p, claimId: randomUUID() });
  expect(next.map((r) => r.runId)).not.toContain(first[0]!.runId);
  expect(next).toHaveLength(2);
});

test('a first try makes one statement; the same id sent as a first try again is still answered with its claim', async () => {
  const pool = await readyPool('t-first', 4);
  const claimId = randomUUID();
  const now = db.clock.nowMs();
  const p = { workerId: 'w-1', pool, max: 2, now, tenantId: 't-first', claimId, firstTry: true };
  const sent: string[] = [];
  const counted = db.newPool();
  const query = counted.query.bind(counted);
  counted.query = ((q: string | { text: string }, values?: unknown[]) => {
    sent.push(typeof q === 'string' ? q : q.text);
    return query(q as never, values as never);
  }) as typeof counted.query;
  const store = new PostgresStore(counted);
  const first = await store.claimRuns(p);
  expect(first).toHaveLength(2);
  // No lookup of the claim id: the claim alone.
  expect(sent).toEqual([C.runClaim]);
  // Sent twice at once (both as first tries): the second claim's row collides on the claim ids'
  // unique index, takes nothing, and answers the first claim.
  const twice = await store.claimRuns({ ...p, now: now + 1000 });
  expect(twice.map((r) => [r.runId, r.leaseToken])).toEqual(first.map((r) => [r.runId, r.leaseToken]));
  expect(await count('SELECT 1 FROM run_queue WHERE pool = $1', [pool])).toBe(2);
});

test("another tenant's or worker's claim id finds nothing of theirs, and claims their own runs", async () => {
  const pool = await readyPool('t-owner', 3);
  const claimId = randomUUID();
  const now = db.clock.nowMs();
  const owner = { workerId: 'w-a', pool, max: 1, now, tenantId: 't-owner', claimId };
  const mine = await db.store.claimRuns(owner);
  expect(mine).toHaveLength(1);
  const theirPool = await readyPool('t-thief', 1);
  const theirs = await db.store.claimRuns({ ...owner, pool: theirPool, tenantId: 't-thief' });
  expect(theirs).toHaveLength(1);
  const twin = await db.store.claimRuns({ ...owner, workerId: 'w-b' });
  expect(twin).toHaveLength(1);
  // A database worker (no tenant) with the same id and worker is a scope of its own too.
  const all = await db.store.claimRuns({ workerId: 'w-a', pool, max: 1, now, claimId });
  expect(all).toHaveLength(1);
  const runs = [mine, theirs, twin, all].map((c) => c[0]!.runId);
  expect(new Set(runs).size).toBe(4);
  // Each scope's retry answers its own claim: same run, same token; nothing new claimed.
  for (const [p, first] of [
    [owner, mine],
    [{ ...owner, pool: theirPool, tenantId: 't-thief' }, theirs],
    [{ ...owner, workerId: 'w-b' }, twin],
    [{ workerId: 'w-a', pool, max: 1, now, claimId }, all],
  ] as const) {
    const again = await db.store.claimRuns({ ...p, max: 2, now: now + 1000 });
    expect(again.map((r) => [r.runId, r.leaseToken])).toEqual(first.map((r) => [r.runId, r.leaseToken]));
  }
  expect(await count('SELECT 1 FROM run_queue WHERE pool = ANY($1)', [[pool, theirPool]])).toBe(0);
  expect(await count('SELECT 1 FROM run_claims WHERE claim_id = $1', [claimId])).toBe(4);
});

test('a claim id whose claim expired (not reaped yet) claims nothing and leaves the queue as it was', async () => {
  const pool = await readyPool('t-expired', 2);
  const claimId = randomUUID();
  const now = db.clock.nowMs();
  const p = { workerId: 'w-x', pool, max: 1, tenantId: 't-expired', claimId };
  expect(await db.store.claimRuns({ ...p, now })).toHaveLength(1);
  expect(await db.store.claimRuns({ ...p, now: now + 31_000 })).toEqual([]);
  expect(await count('SELECT 1 FROM run_queue WHERE pool = $1', [pool])).toBe(1);
});

test('releasing a claim whose client went away: queued again, no attempt spent; not once a retry was answered', async () => {
  const pool = await readyPool('t-gone', 2);
  const now = db.clock.nowMs();
  const gone = randomUUID();
  const [run] = await db.store.claimRuns({
    workerId: 'w-g',
    pool,
    max: 1,
    now,
    tenantId: 't-gone',
    claimId: gone,
  });
  const p = { workerId: 'w-g', now, reason: 'client gone', tenantId: 't-gone' };
  expect(await db.store.releaseClaim({ ...p, claimId: gone })).toEqual({ released: [run!.runId] });
  const { rows } = await db.pool.query(
    `SELECT r.state, r.attempt, q.run_id IS NOT NULL AS queued FROM run_states r
     LEFT JOIN run_queue q ON q.run_id = r.run_id WHERE r.run_id = $1`,
    [run!.runId],
  );
  expect(rows).toEqual([{ state: 'pending', attempt: 1, queued: true }]);
  const attempts = await db.pool.query('SELECT outcome, error FROM attempts WHERE run_id = $1', [run!.runId]);
  expect(attempts.rows).toEqual([{ outcome: 'released', error: 'client gone' }]);

  // A retry got this claim's answer first: its worker holds the runs, so nothing is released.
  const kept = randomUUID();
  const claim = { workerId: 'w-g', pool, max: 1, now, tenantId: 't-gone', claimId: kept };
  const [held] = await db.store.claimRuns(claim);
  expect((await db.store.claimRuns(claim))[0]?.leaseToken).toBe(held!.leaseToken);
  expect(await db.store.releaseClaim({ ...p, claimId: kept })).toEqual({ released: [] });
  expect(await count('SELECT 1 FROM run_claims WHERE lease_token = $1', [held!.leaseToken])).toBe(1);
});

/** Every node of a JSON plan. */
function nodes(
  node: Record<string, unknown>,
  out: Record<string, unknown>[] = [],
): Record<string, unknown>[] {
  out.push(node);
  for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) nodes(child, out);
  return out;
}

test('the lookup of a claim id is a probe of run_claims_claim_id, not a scan of the claims', async () => {
  // Many live claims with claim ids, so that a scan would show.
  await db.pool.query(
    `INSERT INTO run_claims (lease_token, worker_id, claimed_at, lease_ms, lease_expires_at, run_ids, claim_id, tenant_id)
     SELECT gen_random_uuid(), 'w-many', $1, 30000, $1::timestamptz + interval '30 seconds',
       ARRAY[gen_random_uuid()], gen_random_uuid(), 't-many'
     FROM generate_series(1, 5000)`,
    [new Date(db.clock.nowMs())],
  );
  await db.pool.query('ANALYZE run_claims');
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    for (const [sql, params] of [
      [C.claimAgain, [randomUUID(), new Date(db.clock.nowMs()), 'w-many', 't-many']],
      [C.claimRelease, [randomUUID(), 'w-many', new Date(db.clock.nowMs()), 'client gone', 't-many']],
    ] as const) {
      const { rows } = await client.query(`EXPLAIN (FORMAT JSON) ${sql}`, [...params]);
      const scans = nodes(rows[0]['QUERY PLAN'][0].Plan).filter(
        (n) => n['Relation Name'] === 'run_claims' && n['Node Type'] !== 'ModifyTable',
      );
      // The claim id's probe, and (release) the claims it found by primary key: never a scan of all.
      expect(scans.map((n) => n['Node Type'])).not.toContain('Seq Scan');
      expect(scans[0]?.['Index Name']).toBe('run_claims_claim_id');
    }
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
  await db.pool.query("DELETE FROM run_claims WHERE worker_id = 'w-many'");
});
