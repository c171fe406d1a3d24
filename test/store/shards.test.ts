/**
 * Shard leases between scheduler nodes, against PostgreSQL: taking, sharing out and handing over
 * the 64 shards as nodes join, die and leave; the tick's fence (a node writes only for the shards
 * it still holds at the epochs it was given, and a shard cannot change hands during a tick); the
 * backlog per shard; and when a pool's next run becomes claimable.
 *
 * Every node is its own `PostgresStore` on its own pool, as separate processes would be. Each test
 * starts from free shards (epoch 0), no nodes and no jobs, and passes its own `now`.
 */
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { type Random, seededRandom, shardOf } from '../../src/core/index.js';
import { PostgresStore, type ShardInfo, type ShardStep, type TickResult } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { job, upsertJob } from '../setup/factories.js';

const LEASE_MS = 10_000;
const SHARDS = 64;
const TENANT = 'acme';
const TEN_S = 10_000;

type Node = 'node-a' | 'node-b' | 'node-c';
const NODES: readonly Node[] = ['node-a', 'node-b', 'node-c'];

let db: TestDatabase;
let stores: Record<Node, PostgresStore>;

beforeAll(async () => {
  db = await setupDatabase();
  stores = { 'node-a': db.newStore(), 'node-b': db.newStore(), 'node-c': db.newStore() };
});
afterAll(() => db.teardown());

beforeEach(async () => {
  await db.pool.query(
    'TRUNCATE jobs, job_successes, runs, attempts, attempt_progress, run_queue, run_claims',
  );
  await db.pool.query('DELETE FROM nodes');
  await db.pool.query('UPDATE shards SET owner = NULL, lease_expires_at = NULL, epoch = 0');
});

/** Shard ids `from` up to, not including, `to`. */
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

const ids = (s: ShardStep) => s.owned.map((l) => l.shardId);

function step(node: Node, now: number, leaseMs = LEASE_MS): Promise<ShardStep> {
  return stores[node].shardStep({ nodeId: node, now, leaseMs });
}

/** The fence a node's tick presents: its leases from `s`, with their epochs. */
function fenceOf(node: Node, s: ShardStep) {
  return { nodeId: node, shards: s.owned.map((l) => ({ shardId: l.shardId, epoch: l.epoch })) };
}

/** Shard ids per owner (`null` for unowned), as the table has them. */
async function owners(): Promise<Map<string | null, number[]>> {
  const out = new Map<string | null, number[]>();
  for (const s of await db.store.listShards()) out.set(s.owner, [...(out.get(s.owner) ?? []), s.shardId]);
  return out;
}

/** Node a takes every shard at `t`, b joins, a gives back 32..63 and b takes them: 32/32. */
async function splitInTwo(t: number): Promise<Record<'a' | 'b', ShardStep>> {
  await step('node-a', t);
  await step('node-b', t + 1);
  const a = await step('node-a', t + 2);
  const b = await step('node-b', t + 3);
  expect(ids(a)).toEqual(range(0, 32));
  expect(ids(b)).toEqual(range(32, 64));
  return { a, b };
}

/**
 * Each shard is covered by at most one node's own view of its leases (the owned list of its last
 * step, leases not yet run out at `now`), and the table names that node as the owner.
 */
function expectOneHolder(views: Map<Node, ShardStep>, shards: ShardInfo[], now: number): Map<number, Node> {
  const holder = new Map<number, Node>();
  for (const [node, view] of views) {
    for (const l of view.owned) {
      if (l.expiresAt.getTime() <= now) continue;
      expect(holder.get(l.shardId), `shard ${l.shardId} held by two nodes at ${now - T0} ms`).toBeUndefined();
      holder.set(l.shardId, node);
    }
  }
  for (const s of shards) {
    const h = holder.get(s.shardId);
    if (h !== undefined) {
      expect(s.owner).toBe(h);
      expect(s.epoch).toBe(views.get(h)?.owned.find((l) => l.shardId === s.shardId)?.epoch);
    }
  }
  return holder;
}

interface AddedJob {
  jobId: string;
  shardId: number;
}

/** `n` jobs of TENANT, every 10 s, first due at `t` (on the 10 s grid). */
async function addJobs(n: number, t: number, extra: Parameters<typeof job>[0] = {}): Promise<AddedJob[]> {
  const out: AddedJob[] = [];
  for (let i = 0; i < n; i++) {
    const jobId = `job-${String(i).padStart(3, '0')}`;
    const { job: j } = await upsertJob(db.store, { tenantId: TENANT, job: job({ jobId, ...extra }), now: t });
    expect(j.nextRunAt?.getTime()).toBe(t);
    expect(j.shardId).toBe(shardOf(TENANT, jobId, SHARDS));
    out.push({ jobId, shardId: j.shardId });
  }
  return out;
}

/** Every row of `jobs` and `runs` as text: equal snapshots mean nothing was written. */
async function snapshot(): Promise<{ jobs: string[]; runs: string[] }> {
  const jobs = await db.pool.query('SELECT j::text AS row FROM jobs j ORDER BY tenant_id, job_id');
  const runs = await db.pool.query('SELECT r::text AS row FROM run_states r ORDER BY run_id');
  return { jobs: jobs.rows.map((r) => r.row), runs: runs.rows.map((r) => r.row) };
}

async function jobText(jobIds: readonly string[]): Promise<string[]> {
  const { rows } = await db.pool.query(
    'SELECT j::text AS row FROM jobs j WHERE tenant_id = $1 AND job_id = ANY($2) ORDER BY job_id',
    [TENANT, jobIds],
  );
  return rows.map((r) => r.row);
}

async function runCount(jobIds: readonly string[]): Promise<number> {
  const { rows } = await db.pool.query(
    'SELECT count(*)::int AS n FROM run_states WHERE tenant_id = $1 AND job_id = ANY($2)',
    [TENANT, jobIds],
  );
  return rows[0].n;
}

const createdJobs = (r: TickResult) => r.created.map((c) => c.jobId).sort();

function tickWith(node: Node, now: number, fence: ReturnType<typeof fenceOf>): Promise<TickResult> {
  return stores[node].tick({ now, lookaheadMs: 0, batchSize: 1000, fence });
}

describe('taking and sharing out the shards', () => {
  test('one node takes all 64 at epoch 1; a second gets the upper half after the first gives it back', async () => {
    const t = T0;
    const a1 = await step('node-a', t);
    expect(a1).toEqual({
      owned: range(0, SHARDS).map((shardId) => ({ shardId, epoch: 1, expiresAt: new Date(t + LEASE_MS) })),
      released: [],
      taken: range(0, SHARDS),
      liveNodes: 1,
      fairShare: 64,
      shardCount: 64,
      nextForeignExpiry: null,
    });
    expect(await owners()).toEqual(new Map([['node-a', range(0, 64)]]));

    // b joins: nothing is free, but it counts, and it sees when a's leases would run out.
    const b1 = await step('node-b', t + 1000);
    expect(b1).toEqual({
      owned: [],
      released: [],
      taken: [],
      liveNodes: 2,
      fairShare: 32,
      shardCount: 64,
      nextForeignExpiry: new Date(t + LEASE_MS),
    });

    // a sees two live nodes: renews its lower half and gives back the upper one at a new epoch.
    const a2 = await step('node-a', t + 2000);
    expect(a2.released).toEqual(range(32, 64));
    expect(a2.taken).toEqual([]);
    expect(a2.owned).toEqual(
      range(0, 32).map((shardId) => ({ shardId, epoch: 1, expiresAt: new Date(t + 2000 + LEASE_MS) })),
    );
    expect([a2.liveNodes, a2.fairShare]).toEqual([2, 32]);
    const afterRelease = await db.store.listShards();
    expect(afterRelease.slice(32)).toEqual(
      range(32, 64).map((shardId) => ({ shardId, owner: null, leaseExpiresAt: null, epoch: 2 })),
    );

    const b2 = await step('node-b', t + 3000);
    expect(b2.taken).toEqual(range(32, 64));
    expect(b2.owned).toEqual(
      range(32, 64).map((shardId) => ({ shardId, epoch: 3, expiresAt: new Date(t + 3000 + LEASE_MS) })),
    );
    expect(b2.nextForeignExpiry).toEqual(new Date(t + 2000 + LEASE_MS));
    expect(await owners()).toEqual(
      new Map([
        ['node-a', range(0, 32)],
        ['node-b', range(32, 64)],
      ]),
    );

    // Settled: further steps renew and change nothing.
    const a3 = await step('node-a', t + 4000);
    const b3 = await step('node-b', t + 5000);
    expect([a3.released, a3.taken, b3.released, b3.taken]).toEqual([[], [], [], []]);
    expect(ids(a3)).toEqual(range(0, 32));
    expect(ids(b3)).toEqual(range(32, 64));
    expect(a3.owned.every((l) => l.epoch === 1)).toBe(true);
    expect(b3.owned.every((l) => l.epoch === 3)).toBe(true);
  });

  test('a third node: within two rounds the split is 22/22/20, nobody above ceil(64/3), then stable', async () => {
    const t = T0;
    const views = new Map<Node, ShardStep>(
      Object.entries(await splitInTwo(t)).map(([k, v]) => [`node-${k}` as Node, v]),
    );
    let now = t + 10;
    let rounds = 0;
    for (;;) {
      rounds += 1;
      let changed = false;
      for (const node of ['node-c', 'node-a', 'node-b'] as const) {
        now += 100;
        const s = await step(node, now);
        expect(s.liveNodes).toBe(3);
        expect(s.fairShare).toBe(22);
        expect(s.owned.length).toBeLessThanOrEqual(22);
        changed ||= s.released.length > 0 || s.taken.length > 0;
        views.set(node, s);
        expectOneHolder(views, await db.store.listShards(), now);
      }
      if (!changed) break;
      expect(rounds, 'converged within a bounded number of rounds').toBeLessThan(4);
    }
    // Round 1: c finds nothing free, a and b give back their top 10; round 2: c takes those 20;
    // round 3 changes nothing.
    expect(rounds).toBe(3);
    const counts = NODES.map((n) => views.get(n)!.owned.length);
    expect(counts.reduce((x, y) => x + y, 0)).toBe(64);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(2);
    expect(await owners()).toEqual(
      new Map([
        ['node-a', range(0, 22)],
        ['node-b', range(32, 54)],
        ['node-c', [...range(22, 32), ...range(54, 64)]],
      ]),
    );
    // c's shards changed hands twice (given back, taken); a's and b's kept their epoch.
    const shards = await db.store.listShards();
    expect(shards.filter((s) => s.owner === 'node-c').map((s) => s.epoch)).toEqual([
      ...range(22, 32).map(() => 3),
      ...range(54, 64).map(() => 5),
    ]);
  });

  test('scheduler nodes count toward the fair share; worker nodes do not', async () => {
    await stores['node-c'].touchNode({ nodeId: 'worker-1', role: 'worker', now: T0 });
    const a = await step('node-a', T0);
    expect([a.liveNodes, a.fairShare, a.owned.length]).toEqual([1, 64, 64]);
  });

  test('a node whose own leases ran out before it renewed does not renew them: it takes them again at a new epoch', async () => {
    await step('node-a', T0);
    const late = await step('node-a', T0 + LEASE_MS);
    expect(late.taken).toEqual(range(0, 64));
    expect(late.owned.every((l) => l.epoch === 2)).toBe(true);
    // Just in time: a renewal, same epoch.
    const renewed = await step('node-a', T0 + 2 * LEASE_MS - 1);
    expect(renewed.taken).toEqual([]);
    expect(renewed.owned.every((l) => l.epoch === 2)).toBe(true);
    expect(renewed.owned[0]!.expiresAt).toEqual(new Date(T0 + 3 * LEASE_MS - 1));
  });
});

describe('nodes that die or leave', () => {
  test('a dead node: its shards go to the survivor once its leases run out, never before, at a higher epoch', async () => {
    const split = await splitInTwo(T0);
    const views = new Map<Node, ShardStep>([
      ['node-a', split.a],
      ['node-b', split.b],
    ]);
    const deadAt = T0 + 3; // b's last step
    const bEpochs = new Map(split.b.owned.map((l) => [l.shardId, l.epoch]));
    let takenAt: number | null = null;
    for (let now = deadAt + 2500; now <= deadAt + LEASE_MS + 5000; now += 2500) {
      const a = await step('node-a', now);
      views.set('node-a', a);
      const shards = await db.store.listShards();
      const holder = expectOneHolder(views, shards, now);
      if (now < deadAt + LEASE_MS) {
        // b's leases still run: a keeps its fair half and takes nothing of b's.
        expect([a.liveNodes, ids(a)]).toEqual([2, range(0, 32)]);
        expect(a.nextForeignExpiry).toEqual(new Date(deadAt + LEASE_MS));
      } else if (takenAt === null) {
        takenAt = now;
        expect([a.liveNodes, a.fairShare]).toEqual([1, 64]);
        expect(a.taken).toEqual(range(32, 64));
        for (const l of a.owned.filter((o) => o.shardId >= 32)) {
          expect(l.epoch).toBeGreaterThan(bEpochs.get(l.shardId)!);
        }
      }
      // Every shard has exactly one holder at every instant.
      expect(holder.size).toBe(64);
    }
    expect(takenAt).toBe(deadAt + LEASE_MS);
    expect(await owners()).toEqual(new Map([['node-a', range(0, 64)]]));
  });

  test('leaveNode gives every shard back at once at a new epoch and forgets the node', async () => {
    const { a } = await splitInTwo(T0);
    expect(a.owned.every((l) => l.epoch === 1)).toBe(true);
    const before = await db.store.listShards();

    expect(await stores['node-a'].leaveNode({ nodeId: 'node-a' })).toEqual({ released: range(0, 32) });
    const after = await db.store.listShards();
    expect(after.slice(0, 32)).toEqual(
      range(0, 32).map((shardId) => ({ shardId, owner: null, leaseExpiresAt: null, epoch: 2 })),
    );
    expect(after.slice(32)).toEqual(before.slice(32));
    expect((await db.store.listNodes({ limit: 500 })).items.map((n) => n.nodeId)).toEqual(['node-b']);

    // b need not wait for a lease to run out: at the same instant it is alone and takes them.
    const b = await step('node-b', T0 + 4);
    expect([b.liveNodes, b.fairShare, b.taken]).toEqual([1, 64, range(0, 32)]);
    expect(await owners()).toEqual(new Map([['node-b', range(0, 64)]]));

    // A node holding nothing (a worker) leaves too.
    await stores['node-c'].touchNode({ nodeId: 'worker-1', role: 'worker', now: T0 });
    expect(await stores['node-c'].leaveNode({ nodeId: 'worker-1' })).toEqual({ released: [] });
    expect((await db.store.listNodes({ limit: 500 })).items.map((n) => n.nodeId)).toEqual(['node-b']);
  });

  test('pruneNodes forgets nodes not seen since the given instant', async () => {
    await stores['node-a'].touchNode({ nodeId: 'old', role: 'worker', now: T0 - 3_600_000 });
    await stores['node-a'].touchNode({ nodeId: 'recent', role: 'worker', now: T0 });
    expect(await db.store.pruneNodes({ before: T0 - 60_000 })).toBe(1);
    expect((await db.store.listNodes({ limit: 500 })).items.map((n) => n.nodeId)).toEqual(['recent']);
  });
});

describe('fencing the tick', () => {
  test('a fence with stale epochs ticks only the shards still held; the others are fenced out and untouched', async () => {
    const jobs = await addJobs(40, T0);
    const lower = jobs.filter((j) => j.shardId < 32).map((j) => j.jobId);
    const upper = jobs.filter((j) => j.shardId >= 32).map((j) => j.jobId);
    expect(lower.length).toBeGreaterThan(0);
    expect(upper.length).toBeGreaterThan(0);

    const staleA = fenceOf('node-a', await step('node-a', T0)); // all 64, epoch 1
    await step('node-b', T0 + 1);
    await step('node-a', T0 + 2); // gives back 32..63
    const b = await step('node-b', T0 + 3); // takes 32..63 at epoch 3
    const upperBefore = await jobText(upper);

    const r = await tickWith('node-a', T0 + 4, staleA);
    expect(r.fencedOut).toEqual(range(32, 64));
    expect(createdJobs(r)).toEqual(lower);
    expect(r.jobs).toBe(lower.length);
    expect(await jobText(upper)).toEqual(upperBefore);
    expect(await runCount(upper)).toBe(0);

    const rb = await tickWith('node-b', T0 + 5, fenceOf('node-b', b));
    expect(rb.fencedOut).toEqual([]);
    expect(createdJobs(rb)).toEqual(upper);
    expect(await runCount(jobs.map((j) => j.jobId))).toBe(40);
  });

  test('a shard given back and taken again by the same node: the fence from before is out (the epoch moved)', async () => {
    const jobs = await addJobs(40, T0);
    const upper = jobs.filter((j) => j.shardId >= 32).map((j) => j.jobId);
    const lower = jobs.filter((j) => j.shardId < 32).map((j) => j.jobId);
    const before = fenceOf('node-a', await step('node-a', T0)); // all 64, epoch 1
    await step('node-b', T0 + 1);
    expect((await step('node-a', T0 + 2)).released).toEqual(range(32, 64)); // epoch 2
    await stores['node-b'].leaveNode({ nodeId: 'node-b' }); // b goes before taking them
    const again = await step('node-a', T0 + 3);
    expect(again.taken).toEqual(range(32, 64));
    expect(again.owned.filter((l) => l.shardId >= 32).every((l) => l.epoch === 3)).toBe(true);

    // Same owner, live lease, but the shards changed hands in between: only 0..31 may be ticked.
    const upperBefore = await jobText(upper);
    const r = await tickWith('node-a', T0 + 4, before);
    expect(r.fencedOut).toEqual(range(32, 64));
    expect(createdJobs(r)).toEqual(lower);
    expect(await jobText(upper)).toEqual(upperBefore);
    expect(await runCount(upper)).toBe(0);
  });

  test('a fence whose every shard changed hands writes nothing at all', async () => {
    await addJobs(20, T0);
    const stale = fenceOf('node-a', await step('node-a', T0));
    await stores['node-a'].leaveNode({ nodeId: 'node-a' });
    await step('node-b', T0 + 1);
    const before = await snapshot();
    const r = await tickWith('node-a', T0 + 2, stale);
    expect(r).toEqual({ jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: range(0, 64) });
    expect(await snapshot()).toEqual(before);
  });

  test('an expired lease fences the tick out though nobody took the shard; a new step and its fence tick', async () => {
    const jobs = await addJobs(30, T0);
    const first = fenceOf('node-a', await step('node-a', T0));
    const before = await snapshot();

    // The lease ran out at T0 + LEASE_MS: the node still owns the rows, but may not write.
    const expired = await tickWith('node-a', T0 + LEASE_MS, first);
    expect(expired.fencedOut).toEqual(range(0, 64));
    expect(expired.created).toEqual([]);
    expect(await snapshot()).toEqual(before);
    expect((await owners()).get('node-a')).toEqual(range(0, 64));

    // The next step takes them back at epoch 2: the old fence stays out, the new one ticks.
    const again = await step('node-a', T0 + LEASE_MS);
    const old = await tickWith('node-a', T0 + LEASE_MS, first);
    expect(old.fencedOut).toEqual(range(0, 64));
    expect(await snapshot()).toEqual(before);

    const fresh = await tickWith('node-a', T0 + LEASE_MS, fenceOf('node-a', again));
    expect(fresh.fencedOut).toEqual([]);
    // Two slots each (T0 and T0 + 10 s): on time, nothing dropped.
    expect(fresh.created).toHaveLength(2 * jobs.length);
    expect(fresh.dropped).toBe(0);
    const { rows } = await db.pool.query('SELECT DISTINCT next_run_at FROM jobs');
    expect(rows).toEqual([{ next_run_at: new Date(T0 + 2 * TEN_S) }]);
  });

  test('a shard cannot change hands while a tick holds its fence (take skips it; taken after the tick)', async () => {
    await addJobs(20, T0);
    const a = await step('node-a', T0);
    const expiry = T0 + LEASE_MS;
    // Node a's tick runs on a pool that pauses right after the fence check, inside the transaction.
    const pool = db.newPool();
    let during: ShardStep | null = null;
    pauseInTransaction(
      pool,
      (sql) => sql.includes('FOR SHARE'),
      async () => {
        // Node b's clock is past a's expiry: to b, a is dead and its shards free.
        during = await step('node-b', expiry + 1);
      },
    );
    const ticker = new PostgresStore(pool, { random: seededRandom(7) });
    const r = await ticker.tick({
      now: expiry - 1,
      lookaheadMs: 0,
      batchSize: 1000,
      fence: fenceOf('node-a', a),
    });
    expect(during).not.toBeNull();
    const d = during as unknown as ShardStep;
    expect([d.liveNodes, d.fairShare, d.taken, d.owned]).toEqual([1, 64, [], []]);
    expect(r.fencedOut).toEqual([]);
    expect(r.created).toHaveLength(20);

    // The tick committed: now b takes every shard, at a new epoch, and a's fence is stale.
    const b = await step('node-b', expiry + 1);
    expect(b.taken).toEqual(range(0, 64));
    expect(b.owned.every((l) => l.epoch === 2)).toBe(true);
    const stale = await ticker.tick({
      now: expiry - 1,
      lookaheadMs: 0,
      batchSize: 1000,
      fence: fenceOf('node-a', a),
    });
    expect(stale.fencedOut).toEqual(range(0, 64));
  });

  test('three nodes joining, skipping steps, leaving, and ticking concurrently: each slot once, by its holder', async () => {
    const lease = 15_000;
    const roundMs = 5_000;
    const rounds = 40;
    const jobs = await addJobs(60, T0, { misfire: 'catch_up', catchUpLimit: 1000 });
    const shardOfJob = new Map(jobs.map((j) => [j.jobId, j.shardId]));
    const rnd = seededRandom(11);
    const views = new Map<Node, ShardStep>();
    const creator = new Map<string, Node>();
    const departed = new Set<Node>();
    let fencedOut = 0;

    const tickAll = async (now: number) => {
      const shards = await db.store.listShards();
      const tickers = [...views.keys()];
      const results = await Promise.all(tickers.map((n) => tickWith(n, now, fenceOf(n, views.get(n)!))));
      tickers.forEach((n, i) => {
        const r = results[i]!;
        const view = new Map(views.get(n)!.owned.map((l) => [l.shardId, l.epoch]));
        const held = new Set(
          shards
            .filter(
              (s) => s.owner === n && s.epoch === view.get(s.shardId) && s.leaseExpiresAt!.getTime() > now,
            )
            .map((s) => s.shardId),
        );
        expect(r.fencedOut).toEqual([...view.keys()].filter((id) => !held.has(id)).sort((x, y) => x - y));
        expect(r.dropped).toBe(0);
        fencedOut += r.fencedOut.length;
        for (const c of r.created) {
          expect(held.has(shardOfJob.get(c.jobId)!), `${n} wrote for a shard it did not hold`).toBe(true);
          const key = `${c.jobId}@${c.scheduledFor.toISOString()}`;
          expect(creator.get(key), `${key} created twice`).toBeUndefined();
          creator.set(key, n);
        }
      });
    };

    for (let round = 0; round < rounds; round++) {
      const now = T0 + round * roundMs;
      // c joins at round 10 and leaves at round 28 (but keeps ticking with its last, stale fence).
      const active = NODES.filter((n) => n !== 'node-c' || (round >= 10 && round < 28));
      if (round === 28) {
        await stores['node-c'].leaveNode({ nodeId: 'node-c' });
        departed.add('node-c');
      }
      for (const n of shuffle(active, rnd)) {
        if (rnd() < 0.3) continue; // a pause: this node skips its step this round
        views.set(n, await stores[n].shardStep({ nodeId: n, now, leaseMs: lease }));
      }
      // A node that left has given its shards back: its own view of them no longer counts.
      const current = new Map([...views].filter(([n]) => !departed.has(n)));
      expectOneHolder(current, await db.store.listShards(), now);
      await tickAll(now);
    }

    // a and b settle at the end, and tick what is left.
    const end = T0 + rounds * roundMs;
    views.delete('node-c');
    for (let i = 0; i < 3; i++) {
      for (const n of ['node-a', 'node-b'] as const) {
        views.set(n, await stores[n].shardStep({ nodeId: n, now: end, leaseMs: lease }));
      }
    }
    expect(views.get('node-a')!.owned.length + views.get('node-b')!.owned.length).toBe(64);
    await tickAll(end);

    // Some ticks did present stale fences, and were turned away.
    expect(fencedOut).toBeGreaterThan(0);
    // Every job has exactly one run per 10 s slot from T0 to the end: none lost, none twice.
    const { rows } = await db.pool.query(
      `SELECT job_id, count(*)::int AS n, count(DISTINCT scheduled_for)::int AS d,
              min(scheduled_for) AS first, max(scheduled_for) AS last
       FROM run_states GROUP BY job_id ORDER BY job_id`,
    );
    const slots = (end - T0) / TEN_S + 1;
    expect(rows).toEqual(
      jobs.map((j) => ({ job_id: j.jobId, n: slots, d: slots, first: new Date(T0), last: new Date(end) })),
    );
    expect(creator.size).toBe(slots * jobs.length);
    // Every node wrote some of them.
    expect(new Set(creator.values())).toEqual(new Set(NODES));
  });
});

describe('backlog and the next claimable run', () => {
  test('dueBacklog counts due, enabled, unmaterialised jobs per shard', async () => {
    const jobs = await addJobs(30, T0);
    await db.store.pauseJob({ tenantId: TENANT, jobId: jobs[0]!.jobId, now: T0 });
    await db.store.pauseJob({ tenantId: TENANT, jobId: jobs[1]!.jobId, now: T0 });
    await upsertJob(db.store, {
      tenantId: TENANT,
      job: job({ jobId: 'later', schedule: `@at ${new Date(T0 + 60_000).toISOString()}` }),
      now: T0,
    });
    await upsertJob(db.store, { tenantId: 'other', job: job({ jobId: 'other-1' }), now: T0 });
    const expected = new Map<number, number>();
    for (const j of [...jobs.slice(2), { shardId: shardOf('other', 'other-1', SHARDS) }]) {
      expected.set(j.shardId, (expected.get(j.shardId) ?? 0) + 1);
    }

    expect(await db.store.dueBacklog({ now: T0 - 1 })).toEqual(new Map());
    expect(await db.store.dueBacklog({ now: T0 })).toEqual(expected);
    const some = [...expected.keys()].slice(0, 2);
    expect(await db.store.dueBacklog({ now: T0, shards: some })).toEqual(
      new Map(some.map((s) => [s, expected.get(s)!])),
    );
    expect(await db.store.dueBacklog({ now: T0, shards: [] })).toEqual(new Map());

    // Ticked: nothing is due until the next slot.
    await db.store.tick({ now: T0, lookaheadMs: 0, batchSize: 1000 });
    expect(await db.store.dueBacklog({ now: T0 })).toEqual(new Map());
    expect(await db.store.dueBacklog({ now: T0 + TEN_S })).toEqual(expected);
  });

  test("nextAvailableAt: the earliest future available_at of the pool's pending runs, by tenant when asked", async () => {
    const at = (ms: number) => new Date(T0 + ms);
    const add = async (tenantId: string, jobId: string, pool: string, slots: number[]) => {
      await upsertJob(db.store, { tenantId, job: job({ jobId, pool, schedule: '@every 1h' }), now: T0 });
      for (const ms of slots) await db.store.triggerRun({ tenantId, jobId, scheduledFor: T0 + ms, now: T0 });
    };
    await add(TENANT, 'p1-job', 'p1', [-5000, 3000, 5000]);
    await add('other', 'p1-other', 'p1', [1000]);
    await add(TENANT, 'p2-job', 'p2', [500]);

    const next = (pool: string, now = T0, tenantId?: string) =>
      db.store.nextAvailableAt({ pool, now, ...(tenantId ? { tenantId } : {}) });
    expect(await next('p1')).toEqual(at(1000));
    expect(await next('p1', T0, TENANT)).toEqual(at(3000));
    expect(await next('p1', T0, 'other')).toEqual(at(1000));
    expect(await next('p2')).toEqual(at(500));
    expect(await next('nothing-here')).toBeNull();
    // Strictly after now: a run claimable now is not "next".
    expect(await next('p1', T0 + 1000, 'other')).toBeNull();
    expect(await next('p1', T0 + 3000)).toEqual(at(5000));
    expect(await next('p1', T0 + 5000)).toBeNull();
    // Only pending runs: deleting the job cancels its runs.
    await db.store.deleteJob({ tenantId: TENANT, jobId: 'p2-job', now: T0 });
    expect(await next('p2')).toBeNull();
  });
});

/** A copy of `items` in an order drawn from `rnd`. */
function shuffle<T>(items: readonly T[], rnd: Random): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/**
 * Makes transactions on `pool` run `between` once, right after the first statement matching
 * `match` returns inside them: a pause point between a transaction's check and its writes.
 */
function pauseInTransaction(
  pool: pg.Pool,
  match: (sql: string) => boolean,
  between: () => Promise<void>,
): void {
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => Promise<pg.PoolClient> | undefined;
  let fired = false;
  const wrapped = async (...args: unknown[]) => {
    // pool.query connects with a callback: leave that path alone.
    if (typeof args[0] === 'function') return connect(...args);
    const client = (await connect()) as pg.PoolClient;
    if (fired) return client;
    const query = client.query.bind(client) as (...a: unknown[]) => Promise<unknown>;
    const pausing = async (...a: unknown[]) => {
      const result = await query(...a);
      if (!fired && typeof a[0] === 'string' && match(a[0])) {
        fired = true;
        await between();
      }
      return result;
    };
    (client as unknown as { query: typeof pausing }).query = pausing;
    return client;
  };
  (pool as unknown as { connect: typeof wrapped }).connect = wrapped;
}

test("an expired lease of a dead node does not hide when a live node's lease runs out", async () => {
  const t = T0;
  // a, b and c split the shards (22/22/20).
  for (let round = 0; round < 3; round++) {
    for (const [i, node] of NODES.entries()) await step(node, t + round * 10 + i);
  }
  expect([...(await owners()).values()].map((s) => s.length).sort()).toEqual([20, 22, 22]);
  // c dies; b renews once more at t + 1000; at t + LEASE + 30, c's leases have run out.
  await step('node-b', t + 1000);
  const a = await step('node-a', t + LEASE_MS + 30);
  // a took what its new fair share (32 of 2 live nodes) allows; some of c's shards are still
  // expired and unowned by a live node, yet the next expiry worth waking for is b's.
  expect(a.fairShare).toBe(32);
  expect(a.nextForeignExpiry).toEqual(new Date(t + 1000 + LEASE_MS));
});
