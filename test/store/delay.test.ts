/**
 * Issue 22, item 3, the store's contract: `delaySeries` (a tenant's buckets of slots from the
 * window's start, one pool or job) refuses a window outside its bounds before any statement; `recentJobDelays` and `recentMisfires` refuse a window or a limit they cannot bound.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { checkDelayWindow, delayWindow } from '../../src/core/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { expectTockError, insertDelayRuns } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const MIN = 60_000;

test('buckets by slot from the window start; the last one shorter; of one job or pool', async () => {
  const from = T0 - 10 * MIN;
  await insertDelayRuns(db.pool, [
    { tenantId: 'acme', jobId: 'a', slot: from, delayMs: 100 },
    { tenantId: 'acme', jobId: 'a', slot: from + MIN - 1, delayMs: 300 },
    { tenantId: 'acme', jobId: 'b', slot: from + MIN, delayMs: 700, pool: 'batch' },
    { tenantId: 'acme', jobId: 'b', slot: from + 90_000 - 1, delayMs: 900, state: 'dead', pool: 'batch' },
  ]);
  const window = checkDelayWindow(from, from + 90_000, MIN);
  expect(window.buckets).toBe(2);
  expect(await db.store.delaySeries({ tenantId: 'acme', window })).toEqual([
    { index: 0, runs: 2, p50Ms: 100, p99Ms: 300, maxMs: 300 },
    { index: 1, runs: 2, p50Ms: 700, p99Ms: 900, maxMs: 900 },
  ]);
  expect(await db.store.delaySeries({ tenantId: 'acme', window, jobId: 'a' })).toEqual([
    { index: 0, runs: 2, p50Ms: 100, p99Ms: 300, maxMs: 300 },
  ]);
  expect(await db.store.delaySeries({ tenantId: 'acme', window, pool: 'batch' })).toEqual([
    { index: 1, runs: 2, p50Ms: 700, p99Ms: 900, maxMs: 900 },
  ]);
  expect(await db.store.delaySeries({ tenantId: 'beta', window })).toEqual([]);
});

test('a window past the bounds, or whose buckets do not match it, is refused', async () => {
  const good = delayWindow({ now: T0 });
  await expectTockError(
    db.store.delaySeries({ tenantId: 'acme', window: { ...good, buckets: good.buckets + 1 } }),
    'validation_error',
  );
  await expectTockError(
    db.store.delaySeries({ tenantId: 'acme', window: { ...good, stepMs: 1, buckets: 3_600_000 } }),
    'validation_error',
  );
  await expectTockError(
    db.store.delaySeries({ tenantId: 'acme', window: good, jobId: 'a\u0000' }),
    'validation_error',
  );
});

test('the per-job reads refuse a window or a limit they cannot bound', async () => {
  for (const read of [db.store.recentJobDelays.bind(db.store), db.store.recentMisfires.bind(db.store)]) {
    await expectTockError(read({ now: T0, windowMs: 0, limit: 5 }), 'validation_error');
    await expectTockError(read({ now: T0, windowMs: 1.5, limit: 5 }), 'validation_error');
    await expectTockError(read({ now: T0, windowMs: MIN, limit: 0 }), 'validation_error');
    await expectTockError(read({ now: T0, windowMs: MIN, limit: 10_001 }), 'validation_error');
    expect(await read({ now: T0, windowMs: MIN, limit: 5 })).toEqual({ jobs: [], seen: 0 });
  }
});
