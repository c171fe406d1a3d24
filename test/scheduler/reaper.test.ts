/**
 * The reaper against a real database: a run whose lease expired is requeued with its next attempt
 * (or dead-lettered), once, and each pass emits `reap`. The store's own `reapExpired` is tested in
 * test/store/. Time moves only through a FakeClock.
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { retryDelayMs, seededRandom } from '../../src/core/index.js';
import { Reaper } from '../../src/scheduler/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { WatchedClock } from '../setup/events.js';
import { NO_REPORT, upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });

let db: TestDatabase;
let clock: WatchedClock;

beforeEach(async () => {
  db = await setupDatabase();
  clock = new WatchedClock(T0);
});

afterEach(async () => {
  await db.teardown();
});

test('reapOnce requeues an expired lease with the next attempt and emits reap', async () => {
  await upsertJob(db.store, {
    tenantId: 't',
    job: { jobId: 'a', schedule: '@every 1h', handler: 'h' },
    now: T0,
  });
  const run = await db.store.triggerRun({ tenantId: 't', jobId: 'a', now: T0 });
  const [claimed] = await db.store.claimRuns({ workerId: 'w1', pool: 'default', max: 1, now: T0 });
  expect(claimed?.runId).toBe(run.runId);
  expect(claimed?.leaseExpiresAt.getTime()).toBe(T0 + 30_000);

  const reaper = new Reaper({ store: db.store, clock, logger });
  const reaps: unknown[] = [];
  reaper.on('reap', (r) => reaps.push(r));

  // At the instant of expiry the lease is still not expired (strictly before now).
  clock.advance(30_000);
  expect(await reaper.reapOnce()).toEqual({ requeued: [], dead: [] });
  expect(reaps).toEqual([{ requeued: [], dead: [], now: T0 + 30_000 }]);

  clock.advance(1000);
  const now = T0 + 31_000;
  const result = await reaper.reapOnce();
  const ref = { runId: run.runId, tenantId: 't', jobId: 'a', scheduledFor: new Date(T0) };
  expect(result).toEqual({ requeued: [{ ...ref, attempt: 2 }], dead: [] });
  expect(reaps).toHaveLength(2);
  expect(reaps[1]).toEqual({ ...result, now });

  // The store's jitter comes from seededRandom(7); this is its first draw.
  const delay = retryDelayMs(1, { baseSeconds: 2, capSeconds: 3600, jitter: 0.5 }, seededRandom(7));
  const after = await db.store.getRun({ tenantId: 't', runId: run.runId });
  expect(after).toMatchObject({
    state: 'pending',
    attempt: 2,
    leaseExpiresAt: null,
    lastError: 'lease expired',
    availableAt: new Date(now + delay),
    finishedAt: null,
  });
  expect(after.attempts).toEqual([
    {
      attempt: 1,
      workerId: 'w1',
      startedAt: new Date(T0),
      claimedAt: new Date(T0),
      finishedAt: new Date(now),
      outcome: 'lease_expired',
      error: 'lease expired',
      errorStack: null,
      output: null,
      ...NO_REPORT,
    },
  ]);

  // A second pass finds nothing: the requeue happened once.
  expect(await reaper.reapOnce()).toEqual({ requeued: [], dead: [] });
});
