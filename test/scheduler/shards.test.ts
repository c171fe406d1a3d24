/**
 * The shard manager and the fenced tick loop against a real database on a FakeClock: the fence
 * only offers leases that have not run out on this node's clock (whether or not the store answers),
 * a lease missing from a step is dropped and reported lost, the next step comes early when another
 * node's lease runs out first, stopping gives the shards back, and a tick loop holding no shard
 * never ticks.
 */
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ShardManager, type ShardStore, TickLoop } from '../../src/scheduler/index.js';
import type { ShardStep, Store } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once, WatchedClock } from '../setup/events.js';
import { upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });
const LEASE_MS = 10_000;
const RENEW_MS = 2_500;

let db: TestDatabase;
let clock: WatchedClock;
const stops: (() => Promise<void>)[] = [];

beforeEach(async () => {
  db = await setupDatabase();
  clock = new WatchedClock(T0);
});

afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  await db.teardown();
});

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

/** The store, unless `down`: then every call fails as an unreachable database would. */
function flakyStore(): ShardStore & { down: boolean; steps: number } {
  const s = {
    down: false,
    steps: 0,
    shardStep(p: Parameters<ShardStore['shardStep']>[0]) {
      s.steps += 1;
      return s.down ? Promise.reject(new Error('connect ECONNREFUSED')) : db.store.shardStep(p);
    },
    leaveNode(p: { nodeId: string }) {
      return s.down ? Promise.reject(new Error('connect ECONNREFUSED')) : db.store.leaveNode(p);
    },
  };
  return s;
}

function manager(store: ShardStore = db.store, nodeId = 'node-a', log = logger): ShardManager {
  const m = new ShardManager({ store, clock, logger: log, nodeId, leaseMs: LEASE_MS, renewMs: RENEW_MS });
  stops.push(() => m.stop({ keep: true }));
  return m;
}

/** Node a's manager with its log lines kept, parsed. */
function recordedManager(): { m: ShardManager; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const recording = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { m: manager(db.store, 'node-a', recording), lines };
}

/** `n` jobs of tenant `t`, every 10 s, due at T0. */
async function addJobs(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await upsertJob(db.store, {
      tenantId: 't',
      job: { jobId: `job-${i}`, schedule: '@every 10s', handler: 'h' },
      now: T0,
    });
  }
}

/** The store with its `tick` calls counted. */
function countingTicks(): { store: Store; calls: Parameters<Store['tick']>[0][] } {
  const calls: Parameters<Store['tick']>[0][] = [];
  const store = new Proxy(db.store, {
    get(target, prop) {
      if (prop === 'tick') {
        return (p: Parameters<Store['tick']>[0]) => {
          calls.push(p);
          return target.tick(p);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store, calls };
}

describe('ShardManager', () => {
  test('fence() drops leases that ran out on the local clock, though no step ran (the store is down)', async () => {
    const store = flakyStore();
    const m = manager(store);
    expect(m.fence()).toEqual({ nodeId: 'node-a', shards: [] });
    expect(await m.stepOnce()).toBe(RENEW_MS);
    expect(m.fence()).toEqual({
      nodeId: 'node-a',
      shards: range(0, 64).map((shardId) => ({ shardId, epoch: 1 })),
    });
    expect(m.owned()).toEqual(range(0, 64));

    store.down = true;
    await expect(m.stepOnce()).rejects.toThrow('ECONNREFUSED');
    clock.advance(LEASE_MS - 1);
    expect(m.fence().shards).toHaveLength(64);
    clock.advance(1); // T0 + LEASE_MS: the leases' expiry
    expect(m.fence()).toEqual({ nodeId: 'node-a', shards: [] });
    expect(m.owned()).toEqual([]);
  });

  test('the running loop: renewal failures leave the fence to empty on time; recovery takes the shards back', async () => {
    const store = flakyStore();
    const m = manager(store);
    const errors: unknown[] = [];
    m.on('error', (err) => errors.push(err));
    const idle = once(clock.events, 'sleep');
    m.start();
    await idle;
    expect(m.owned()).toEqual(range(0, 64));

    store.down = true;
    const failed = once(m, 'error');
    const backingOff = once(clock.events, 'sleep');
    clock.advance(RENEW_MS);
    await failed;
    await backingOff;
    // Each failure backs off; the leases run out meanwhile and the fence empties exactly then.
    clock.advance(LEASE_MS - RENEW_MS - 1);
    expect(m.owned()).toHaveLength(64);
    clock.advance(1);
    expect(m.owned()).toEqual([]);

    store.down = false;
    const back = once(m, 'change', (s: ShardStep & { lost: number[] }) => s.taken.length === 64, 5000);
    clock.advance(60_000);
    const [s] = await back;
    expect(s.owned.every((l) => l.epoch === 2)).toBe(true);
    expect(m.fence().shards).toEqual(range(0, 64).map((shardId) => ({ shardId, epoch: 2 })));
    expect(errors.length).toBeGreaterThan(0);
  });

  test('the ownership log line names shards as ranges, not one id each', async () => {
    const { m, lines } = recordedManager();
    await m.stepOnce();
    const changed = lines.find((l) => l.msg === 'shard ownership changed');
    expect(changed).toMatchObject({ taken: '0-63', released: '', lost: '', holding: 64, shards: 64 });
  });

  test('a shard missing from a step is out of the fence at once and reported lost', async () => {
    const m = manager();
    await m.stepOnce();
    expect(m.owned()).toEqual(range(0, 64));

    // Node b's clock runs ahead: to b, a's leases ran out and a is dead, so b takes every shard.
    const b = await db.store.shardStep({ nodeId: 'node-b', now: T0 + LEASE_MS + 1, leaseMs: LEASE_MS });
    expect(b.taken).toEqual(range(0, 64));

    // On a's clock its leases still run, but its next step finds them gone.
    clock.advance(RENEW_MS);
    expect(m.owned()).toHaveLength(64);
    const changed = once<[ShardStep & { lost: number[] }]>(m, 'change');
    await m.stepOnce();
    const [c] = await changed;
    expect(c.lost).toEqual(range(0, 64));
    expect(c.released).toEqual([]);
    expect(m.fence().shards).toEqual([]);
    expect(m.lastStep?.owned).toEqual([]);
  });

  test('shards given back by a step are not reported lost', async () => {
    const a = manager();
    await a.stepOnce();
    await db.store.shardStep({ nodeId: 'node-b', now: T0 + 1, leaseMs: LEASE_MS });
    clock.advance(RENEW_MS);
    const changed = once<[ShardStep & { lost: number[] }]>(a, 'change');
    await a.stepOnce();
    const [c] = await changed;
    expect(c.released).toEqual(range(32, 64));
    expect(c.lost).toEqual([]);
    expect(a.owned()).toEqual(range(0, 32));
  });

  /** a holds 0..31 (its step at `T0 + 2`), b holds 32..63 until `T0 + 3 + LEASE_MS`: both at their fair share. */
  async function splitWithB(m: ShardManager): Promise<void> {
    await m.stepOnce();
    await db.store.shardStep({ nodeId: 'node-b', now: T0 + 1, leaseMs: LEASE_MS });
    clock.set(T0 + 2);
    await m.stepOnce();
    const b = await db.store.shardStep({ nodeId: 'node-b', now: T0 + 3, leaseMs: LEASE_MS });
    expect(b.taken).toEqual(range(32, 64));
    expect(m.owned()).toEqual(range(0, 32));
  }

  test('stepOnce waits less than the renewal when another node’s lease runs out sooner, and takes its shards then', async () => {
    const m = manager();
    await splitWithB(m);
    // b stops; its leases run out at T0 + 3 + LEASE_MS, 1 s from now; a renews every 2.5 s.
    clock.set(T0 + 3 + LEASE_MS - 1000);
    const wait = await m.stepOnce();
    expect(m.owned()).toEqual(range(0, 32));
    expect(wait).toBeGreaterThanOrEqual(1000);
    expect(wait).toBeLessThanOrEqual(1001);

    clock.advance(wait);
    expect(await m.stepOnce()).toBe(RENEW_MS); // nobody else holds anything now
    expect(m.owned()).toEqual(range(0, 64));
    expect(m.lastStep?.liveNodes).toBe(1);
  });

  test('with no other lease to wait for, a node at its fair share waits the renewal interval', async () => {
    const m = manager();
    expect(await m.stepOnce()).toBe(RENEW_MS);
    clock.advance(RENEW_MS);
    expect(await m.stepOnce()).toBe(RENEW_MS);
  });

  test('a node below its fair share looks again sooner than the renewal interval', async () => {
    await db.store.shardStep({ nodeId: 'node-b', now: T0, leaseMs: LEASE_MS });
    const m = manager();
    const wait = await m.stepOnce();
    expect(m.owned()).toEqual([]);
    expect(m.lastStep?.fairShare).toBe(32);
    expect(wait).toBeLessThan(RENEW_MS);
  });

  test('the running loop sleeps only until the other node’s lease runs out', async () => {
    const m = manager();
    await splitWithB(m);
    clock.set(T0 + 3 + LEASE_MS - 1000);
    const slept = once<[number]>(clock.events, 'sleep');
    m.start();
    const [ms] = await slept;
    expect(ms).toBeGreaterThanOrEqual(1000);
    expect(ms).toBeLessThanOrEqual(1001);
    const took = once<[ShardStep & { lost: number[] }]>(m, 'change', (s) => s.taken.length === 32);
    clock.advance(ms);
    const [c] = await took;
    expect(c.taken).toEqual(range(32, 64));
    expect(m.owned()).toEqual(range(0, 64));
  });

  test('every lost shard is logged once, whether a tick or the next step finds it gone', async () => {
    const { m, lines } = recordedManager();
    await m.stepOnce();
    // Node b takes every shard; a tick of a's finds 10 of them fenced out before a's next step.
    await db.store.shardStep({ nodeId: 'node-b', now: T0 + LEASE_MS + 1, leaseMs: LEASE_MS });
    m.forget(range(0, 10));
    m.forget(range(5, 10)); // a second tick in flight for the same shards: already forgotten
    clock.advance(RENEW_MS);
    await m.stepOnce();
    const lost = lines.filter((l) => String(l.msg).startsWith('shard leases lost')).map((l) => l.shards);
    expect(lost).toEqual(['0-9', '10-63']);
    expect(m.owned()).toEqual([]);
  });

  test('forget() drops shards from the fence until a step holds them again', async () => {
    const m = manager();
    await m.stepOnce();
    m.forget([0, 1, 63]);
    expect(m.owned()).toEqual(range(2, 63));
    clock.advance(RENEW_MS);
    await m.stepOnce();
    expect(m.owned()).toEqual(range(0, 64));
  });

  test('stop() gives every shard back and forgets the node; stop({keep: true}) keeps them', async () => {
    const kept = manager(db.store, 'node-k');
    await kept.stepOnce();
    await kept.stop({ keep: true });
    expect((await db.store.listShards()).every((s) => s.owner === 'node-k')).toBe(true);
    await db.store.leaveNode({ nodeId: 'node-k' });

    const m = manager();
    m.start();
    await once(m, 'step');
    expect((await db.store.listShards()).every((s) => s.owner === 'node-a' && s.epoch === 3)).toBe(true);
    await m.stop();
    expect(m.fence().shards).toEqual([]);
    expect(await db.store.listShards()).toEqual(
      range(0, 64).map((shardId) => ({ shardId, owner: null, leaseExpiresAt: null, epoch: 4 })),
    );
    expect((await db.store.listNodes({ limit: 500 })).items.map((n) => n.nodeId)).toEqual([]);
  });

  test('stop() with the store down still stops (the leases run out on their own)', async () => {
    const store = flakyStore();
    const m = manager(store);
    await m.stepOnce();
    store.down = true;
    await m.stop();
    expect(m.fence().shards).toEqual([]);
    expect((await db.store.listShards()).every((s) => s.owner === 'node-a')).toBe(true);
  });
});

describe('TickLoop with a fence', () => {
  test('an empty fence never calls store.tick, by hand or in the running loop', async () => {
    await addJobs(3);
    const { store, calls } = countingTicks();
    const loop = new TickLoop({
      store,
      clock,
      logger,
      intervalMs: 1000,
      fence: () => ({ nodeId: 'node-a', shards: [] }),
    });
    const result = await loop.tickOnce();
    expect(result).toEqual({ jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] });

    stops.push(() => loop.stop());
    loop.start();
    // Let the loop go round five times.
    for (let i = 0; i < 5; i++) {
      const slept = once(clock.events, 'sleep');
      if (i > 0) clock.advance(1000);
      await slept;
    }
    expect(calls).toEqual([]);
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM run_states');
    expect(rows[0].n).toBe(0);
  });

  test('a loop fenced by a ShardManager ticks only while the shards are held on its clock', async () => {
    await addJobs(3);
    const { store, calls } = countingTicks();
    const shardStore = flakyStore();
    const m = manager(shardStore);
    const loop = new TickLoop({ store, clock, logger, lookaheadMs: 0, fence: () => m.fence() });

    // Before the first step: nothing held, no tick.
    await loop.tickOnce();
    expect(calls).toHaveLength(0);

    await m.stepOnce();
    const r = await loop.tickOnce();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.fence).toEqual({
      nodeId: 'node-a',
      shards: range(0, 64).map((shardId) => ({ shardId, epoch: 1 })),
    });
    expect(r.created).toHaveLength(3);
    expect(r.fencedOut).toEqual([]);

    // The store goes away; once the leases run out on this clock the loop stops asking it.
    shardStore.down = true;
    clock.advance(LEASE_MS - 1);
    await loop.tickOnce();
    expect(calls).toHaveLength(2);
    clock.advance(1);
    await loop.tickOnce();
    await loop.tickOnce();
    expect(calls).toHaveLength(2);
  });
});
