/**
 * A herd: many jobs due at once drain over several bounded ticks, oldest slot first, the backlog
 * shrinking tick by tick — and the node keeps renewing its shard leases all the while.
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { SystemClock } from '../../src/core/index.js';
import { ShardManager, TickLoop } from '../../src/scheduler/index.js';
import type { Store, TickResult } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once, WatchedClock } from '../setup/events.js';
import { upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });
let db: TestDatabase;
const stops: (() => Promise<void>)[] = [];

beforeEach(async () => {
  db = await setupDatabase();
});
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  await db.teardown();
});

/** `n` jobs whose due slots are spread one per 100 ms before `at`, the oldest first. */
async function herd(n: number, at: number, schedule = '@every 1h'): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `herd-${String(i).padStart(3, '0')}`);
  for (const jobId of ids) {
    await upsertJob(db.store, {
      tenantId: 't',
      job: { jobId, schedule, handler: 'h' },
      now: at - 3_600_000,
    });
  }
  // Give job i the slot at − (n − i) × 100 ms, so job order is slot order (all within the misfire
  // threshold: every slot fires).
  await db.pool.query(
    `UPDATE jobs SET next_run_at = $1::timestamptz - (($2::int - substring(job_id FROM 6)::int) * interval '100 milliseconds')`,
    [new Date(at), n],
  );
  return ids;
}

test('a herd drains in bounded ticks, oldest slot first, and the backlog shrinks with each tick', async () => {
  // Half past: the only slot of each hourly job that is due is the one the test gave it.
  const at = T0 + 1_800_000;
  const clock = new WatchedClock(at);
  const ids = await herd(45, at);
  const loop = new TickLoop({ store: db.store, clock, logger, batchSize: 10, lookaheadMs: 0 });
  stops.push(() => loop.stop());
  const backlogs: number[] = [];
  const ticks: TickResult[] = [];
  loop.on('tick', (r) => ticks.push(r));
  const sum = async () => [...(await db.store.dueBacklog({ now: at })).values()].reduce((a, b) => a + b, 0);
  backlogs.push(await sum());
  for (;;) {
    const r = await loop.tickOnce();
    backlogs.push(await sum());
    if (!r.full) break;
  }
  expect(ticks.map((t) => t.created.length)).toEqual([10, 10, 10, 10, 5]);
  expect(backlogs).toEqual([45, 35, 25, 15, 5, 0]);
  // Slot order: every run of a tick is older than every run of the next.
  const slots = ticks.map((t) => t.created.map((c) => c.scheduledFor.getTime()).sort((a, b) => a - b));
  for (let i = 1; i < slots.length; i++) expect(slots[i - 1]!.at(-1)!).toBeLessThan(slots[i]![0]!);
  expect(ticks.flatMap((t) => t.created.map((c) => c.jobId))).toEqual(ids);
});

test('while a slow herd drains, the shard leases keep being renewed and never lapse', async () => {
  const clock = new SystemClock();
  const now = clock.nowMs();
  // Yearly: on real time, no slot of the schedule itself falls among the ones the test gives.
  await herd(200, now, '@yearly');
  // Each tick takes at least 50 ms (a loaded database): 200 jobs in batches of 5 take ~2 s,
  // five times the shard lease.
  const slow: Store = Object.create(db.store);
  slow.tick = async (p) => {
    const r = await db.store.tick(p);
    await new Promise((resolve) => setTimeout(resolve, 50));
    return r;
  };
  const shards = new ShardManager({
    store: db.store,
    clock,
    logger,
    nodeId: 'herder',
    leaseMs: 400,
    renewMs: 100,
  });
  stops.push(() => shards.stop());
  await shards.stepOnce();
  expect(shards.owned()).toHaveLength(64);
  let steps = 0;
  shards.on('step', () => {
    steps += 1;
  });
  let emptyFence = 0;
  const loop = new TickLoop({
    store: slow,
    clock,
    logger,
    batchSize: 5,
    lookaheadMs: 0,
    fence: () => {
      const f = shards.fence();
      if (f.shards.length < 64) emptyFence += 1;
      return f;
    },
  });
  stops.push(() => loop.stop());
  const created: number[] = [];
  loop.on('tick', (r) => created.push(r.created.length));
  const drained = once(loop, 'tick', (r: TickResult) => !r.full && r.created.length < 5, 20_000);
  shards.start();
  loop.start();
  await drained;
  expect(created.reduce((a, b) => a + b, 0)).toBe(200);
  expect(created.length).toBeGreaterThanOrEqual(40);
  // ~2 s of draining at one step per 100 ms: the renewals went on (allow for a loaded machine).
  expect(steps).toBeGreaterThanOrEqual(5);
  expect(emptyFence).toBe(0);
});
