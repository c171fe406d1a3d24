import { afterAll, beforeAll, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

test('a job ticks, is claimed and completes', async () => {
  const { store, clock } = db;
  await upsertJob(store, {
    tenantId: 't',
    job: { jobId: 'a', schedule: '@every 10s', handler: 'h' },
    now: clock.nowMs(),
  });
  const tick = await store.tick({ now: clock.nowMs(), lookaheadMs: 0, batchSize: 100 });
  expect(tick.created).toHaveLength(1);
  const claimed = await store.claimRuns({ workerId: 'w', pool: 'default', max: 10, now: clock.nowMs() });
  expect(claimed).toHaveLength(1);
  const done = await store.completeRuns({ leases: claimed, now: clock.nowMs() });
  expect(done.completed).toEqual([claimed[0]!.runId]);
});
