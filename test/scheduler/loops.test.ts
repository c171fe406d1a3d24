/**
 * The tick loop against a real database: one-shot ticks, draining a herd in full batches, two
 * schedulers at once, surviving failing steps with backoff (the reaper's tests are in
 * reaper.test.ts). Time moves only through a FakeClock; waits are on events, guarded by a timeout.
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { TickLoop } from '../../src/scheduler/index.js';
import type { Store, TickResult } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once, WatchedClock } from '../setup/events.js';
import { upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });

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

/** `n` jobs of tenant `t`, every 10 s: each is due at T0 (aligned) with exactly one slot in the lookahead. */
async function addJobs(n: number, prefix = 'job'): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);
  for (let i = 0; i < ids.length; i += 10) {
    await Promise.all(
      ids.slice(i, i + 10).map(async (jobId) => {
        const { job } = await upsertJob(db.store, {
          tenantId: 't',
          job: { jobId, schedule: '@every 10s', handler: 'h' },
          now: T0,
        });
        expect(job.nextRunAt?.getTime()).toBe(T0);
      }),
    );
  }
  return ids;
}

async function runRows(): Promise<{ job_id: string; scheduled_for: Date; state: string; attempt: number }[]> {
  const { rows } = await db.pool.query(
    'SELECT job_id, scheduled_for, state, attempt FROM run_states ORDER BY job_id, scheduled_for',
  );
  return rows;
}

test('tickOnce materialises the due runs, advances the jobs and emits tick', async () => {
  const ids = await addJobs(3);
  const loop = new TickLoop({ store: db.store, clock, logger });
  const ticks: (TickResult & { now: number })[] = [];
  loop.on('tick', (r) => ticks.push(r));

  const result = await loop.tickOnce();
  expect(result.jobs).toBe(3);
  expect(result.dropped).toBe(0);
  expect(result.full).toBe(false);
  expect(result.created.map((r) => [r.tenantId, r.jobId, r.scheduledFor.getTime()]).sort()).toEqual(
    ids.map((id) => ['t', id, T0]),
  );
  expect(ticks).toEqual([{ ...result, now: T0, durationMs: expect.any(Number) }]);

  expect(await runRows()).toEqual(
    ids.map((id) => ({ job_id: id, scheduled_for: new Date(T0), state: 'pending', attempt: 1 })),
  );
  const { rows } = await db.pool.query('SELECT DISTINCT next_run_at FROM jobs');
  expect(rows).toEqual([{ next_run_at: new Date(T0 + 10_000) }]);

  // Nothing more is due until the next slot comes within the lookahead.
  const again = await loop.tickOnce();
  expect(again).toEqual({ jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] });
  expect(ticks).toHaveLength(2);
  expect(await runRows()).toHaveLength(3);
});

test('a started loop drains a herd in full batches without the clock moving', async () => {
  const ids = await addJobs(25);
  const loop = new TickLoop({ store: db.store, clock, logger, batchSize: 10 });
  stops.push(() => loop.stop());
  const ticks: (TickResult & { now: number })[] = [];
  loop.on('tick', (r) => ticks.push(r));
  const drained = once(loop, 'tick', (r: TickResult) => !r.full);

  loop.start();
  await drained;

  expect(ticks.map((t) => [t.jobs, t.created.length, t.full, t.now])).toEqual([
    [10, 10, true, T0],
    [10, 10, true, T0],
    [5, 5, false, T0],
  ]);
  expect(clock.nowMs()).toBe(T0);
  const rows = await runRows();
  expect(rows).toHaveLength(25);
  expect(rows.map((r) => r.job_id)).toEqual(ids);
  expect(new Set(rows.map((r) => r.scheduled_for.getTime()))).toEqual(new Set([T0]));
});

test('two tick loops on two stores create each (job, slot) exactly once', async () => {
  const ids = await addJobs(100);
  const a = new TickLoop({ store: db.store, clock, logger, batchSize: 10 });
  const b = new TickLoop({ store: db.newStore(), clock, logger, batchSize: 10 });
  stops.push(
    () => a.stop(),
    () => b.stop(),
  );
  const ticks: TickResult[] = [];
  a.on('tick', (r) => ticks.push(r));
  b.on('tick', (r) => ticks.push(r));
  // Each loop stops ticking at its first partial batch (it then sleeps on the unmoving clock).
  const idle = Promise.all([
    once(a, 'tick', (r: TickResult) => !r.full),
    once(b, 'tick', (r: TickResult) => !r.full),
  ]);

  a.start();
  b.start();
  await idle;

  // Every job was planned by exactly one tick (SKIP LOCKED), so no slot was even attempted twice.
  expect(ticks.reduce((n, t) => n + t.jobs, 0)).toBe(100);
  const created = ticks.flatMap((t) => t.created.map((r) => r.jobId));
  expect(created).toHaveLength(100);
  expect(new Set(created)).toEqual(new Set(ids));
  const rows = await runRows();
  expect(rows.map((r) => [r.job_id, r.scheduled_for.getTime()])).toEqual(ids.map((id) => [id, T0]));
});

test('the tick loop reports failing steps, backs off, and recovers', async () => {
  const ids = await addJobs(2);
  let calls = 0;
  const real = db.store;
  // A thin wrapper: every method delegates to the real store; tick fails on its first two calls.
  const flaky = new Proxy(real, {
    get(target, prop) {
      if (prop === 'tick') {
        return async (p: Parameters<Store['tick']>[0]) => {
          calls += 1;
          if (calls <= 2) throw new Error(`tick failure ${calls}`);
          return target.tick(p);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Store;

  const loop = new TickLoop({ store: flaky, clock, logger, intervalMs: 1000 });
  stops.push(() => loop.stop());
  const errors: string[] = [];
  loop.on('error', (err) => errors.push((err as Error).message));
  const ticks: TickResult[] = [];
  loop.on('tick', (r) => ticks.push(r));

  // First failure: reported, then a backoff of interval × 2.
  let slept = once(clock.events, 'sleep');
  loop.start();
  expect(await slept).toEqual([2000]);
  expect(errors).toEqual(['tick failure 1']);

  clock.advance(1999);
  expect(clock.pendingSleeps).toBe(1);
  expect(calls).toBe(1);

  // Second failure: reported, backoff doubles.
  slept = once(clock.events, 'sleep');
  clock.advance(1);
  expect(await slept).toEqual([4000]);
  expect(errors).toEqual(['tick failure 1', 'tick failure 2']);
  expect(calls).toBe(2);
  expect(ticks).toEqual([]);

  clock.advance(3999);
  expect(calls).toBe(2);

  // Past the backoff the step succeeds; the backoff resets to the plain interval.
  slept = once(clock.events, 'sleep');
  const ticked = once(loop, 'tick');
  clock.advance(1);
  const [tick] = (await ticked) as [TickResult & { now: number }];
  expect(await slept).toEqual([1000]);
  expect(tick.now).toBe(T0 + 6000);
  expect(tick.jobs).toBe(2);
  expect(tick.created.map((r) => r.jobId).sort()).toEqual(ids);
  expect(errors).toHaveLength(2);
  expect(calls).toBe(3);
  expect(clock.sleeps).toEqual([2000, 4000, 1000]);
  expect(await runRows()).toHaveLength(2);
});
