/**
 * A handler's `ctx.progress` and `ctx.log` through a Worker on a real database: visible in the
 * store while the run goes on (the lease keeper's next check sends them with a heartbeat, long
 * before a third of the lease), and after it ends (what no heartbeat carried goes with the result,
 * success or failure). Time moves only through the test clock; waits are on events.
 */
import { EventEmitter } from 'node:events';
import pino from 'pino';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import type { HeartbeatRunsParams } from '../../src/core/index.js';
import type { Run } from '../../src/store/index.js';
import { type Handler, Worker } from '../../src/worker/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once, WatchedClock } from '../setup/events.js';
import { upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });
const CHECK_MS = 1000;

let db: TestDatabase;
let clock: WatchedClock;
let beats: EventEmitter;
const cleanups: (() => Promise<void>)[] = [];

beforeEach(async () => {
  db = await setupDatabase();
  clock = new WatchedClock(T0);
  // Each heartbeat the worker sends, announced once the store has answered it.
  beats = new EventEmitter();
  const heartbeatRuns = db.store.heartbeatRuns.bind(db.store);
  vi.spyOn(db.store, 'heartbeatRuns').mockImplementation(async (p: HeartbeatRunsParams) => {
    const answer = await heartbeatRuns(p);
    beats.emit('beat', p);
    return answer;
  });
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.restoreAllMocks();
  await db.teardown();
});

function gate() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** One ready run of a job with a 30 s lease, and a worker whose lease keeper checks every second. */
async function start(handler: Handler): Promise<{ worker: Worker; run: Run }> {
  await upsertJob(db.store, {
    tenantId: 't',
    job: { jobId: 'long', schedule: '@every 1h', handler: 'h', leaseSeconds: 30, maxAttempts: 2 },
    now: T0,
  });
  const run = await db.store.triggerRun({ tenantId: 't', jobId: 'long', scheduledFor: T0 - 1000, now: T0 });
  const worker = new Worker({
    store: db.store,
    clock,
    logger,
    handlers: { h: handler },
    pollIntervalMs: 3_600_000,
    heartbeatCheckMs: CHECK_MS,
  });
  cleanups.push(() => worker.stop(0));
  worker.start();
  return { worker, run };
}

const attempts = async (runId: string) => (await db.store.getRun({ tenantId: 't', runId })).attempts;

test('progress and lines reach the store with the next check, then the rest with the success', async () => {
  const reported = gate();
  const finish = gate();
  const { worker, run } = await start(async (ctx) => {
    ctx.progress(25, 'a quarter');
    ctx.log('step 1');
    ctx.log('step 2');
    reported.open();
    await finish.promise;
    ctx.log('step 3');
    ctx.progress(100, 'done');
  });
  await reported.promise;
  expect(await attempts(run.runId)).toMatchObject([{ outcome: null, progress: null, logs: [] }]);

  // One check later (a thirtieth of the lease), the heartbeat carries the report.
  const beat = once(beats, 'beat');
  clock.advance(CHECK_MS);
  const [sent] = (await beat) as [HeartbeatRunsParams];
  expect(sent.leases).toEqual([
    {
      runId: run.runId,
      leaseToken: expect.any(String),
      progress: { value: 25, message: 'a quarter' },
      logs: ['step 1', 'step 2'],
    },
  ]);
  expect(await attempts(run.runId)).toMatchObject([
    { outcome: null, progress: 25, progressMessage: 'a quarter', logs: ['step 1', 'step 2'] },
  ]);

  // Nothing new to send and the lease young: the next check sends nothing.
  const heartbeats = vi.mocked(db.store.heartbeatRuns).mock.calls.length;
  const slept = once(clock.events, 'sleep', (ms) => ms === CHECK_MS);
  clock.advance(CHECK_MS);
  await slept;
  expect(vi.mocked(db.store.heartbeatRuns).mock.calls.length).toBe(heartbeats);

  const succeeded = once(worker, 'run:succeeded');
  finish.open();
  await succeeded;
  expect(await attempts(run.runId)).toMatchObject([
    {
      outcome: 'succeeded',
      progress: 100,
      progressMessage: 'done',
      logs: ['step 1', 'step 2', 'step 3'],
      logsDropped: 0,
    },
  ]);
});

test('a handler that logs and throws has its lines on the failed attempt', async () => {
  const { worker, run } = await start(async (ctx) => {
    for (let i = 0; i < 105; i++) ctx.log(`row ${i}`);
    ctx.progress(40, 'stuck at row 104');
    throw new Error('upstream 500');
  });
  const [, result] = await once(worker, 'run:failed');
  expect(result).toMatchObject({ state: 'pending', error: 'upstream 500' });
  const [failed] = await attempts(run.runId);
  expect(failed).toMatchObject({ outcome: 'failed', progress: 40, progressMessage: 'stuck at row 104' });
  // The worker kept the last 100 lines and counted the 5 it dropped.
  expect(failed!.logs).toHaveLength(100);
  expect(failed!.logs[0]).toBe('row 5');
  expect(failed!.logsDropped).toBe(5);
});

test('a progress that is not a finite number throws in the handler', async () => {
  const { worker, run } = await start((ctx) => {
    ctx.progress(Number.NaN);
  });
  const [, result] = await once(worker, 'run:failed');
  expect((result as { error: string }).error).toMatch(/progress must be a finite number/);
  expect((await attempts(run.runId))[0]).toMatchObject({ outcome: 'failed', progress: null });
});
