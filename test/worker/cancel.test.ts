/**
 * Cancelling a running run end to end: a real Worker on the database runs a handler, an operator
 * cancels the run through the HTTP API, and the worker's next heartbeat (due a third of the way
 * through the lease) finds the lease lost and aborts the handler's signal; whatever the handler does
 * then is not recorded, and a completion sent anyway is refused. The worker, the API and the store
 * share a WatchedClock, which moves only when the test moves it; each step waits for the worker's
 * lease check to go back to sleep.
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { LeaseLostError } from '../../src/core/index.js';
import type { ClaimedRun } from '../../src/store/index.js';
import { type Handler, Worker } from '../../src/worker/index.js';
import { type Api, client, keysFor, startApi } from '../api/helpers.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once, WatchedClock } from '../setup/events.js';
import { attemptRows, upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });
/** The lease keeper's check interval, and the default lease (the job sets none). */
const CHECK_MS = 1000;
const LEASE_MS = 30_000;

let db: TestDatabase;
let clock: WatchedClock;
let api: Api;
let operator: string;
const cleanups: (() => Promise<void> | void)[] = [];

beforeEach(async () => {
  db = await setupDatabase();
  clock = new WatchedClock(T0);
  api = await startApi(db, { clock });
  operator = (await keysFor(db, 't')).operator;
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.restoreAllMocks();
  await api.close();
  await db.teardown();
});

/** One ready run of job `j` (handler `h`, tenant `t`), its slot a second ago. */
async function readyRun(): Promise<string> {
  await upsertJob(db.store, {
    tenantId: 't',
    job: { jobId: 'j', schedule: '@every 1h', handler: 'h' },
    now: T0,
  });
  const run = await db.store.triggerRun({ tenantId: 't', jobId: 'j', scheduledFor: T0 - 1000, now: T0 });
  return run.runId;
}

/** A worker on the test clock whose lease check runs every CHECK_MS (claims only when told). */
function newWorker(h: Handler) {
  const worker = new Worker({
    store: db.store,
    clock,
    logger,
    handlers: { h },
    pollIntervalMs: 3_600_000,
    heartbeatCheckMs: CHECK_MS,
    claimAheadMs: 0,
  });
  const dropped: [string, string][] = [];
  const succeeded: string[] = [];
  const errors: unknown[] = [];
  worker.on('run:dropped', (r, reason) => dropped.push([r.runId, reason]));
  worker.on('run:succeeded', (r) => succeeded.push(r.runId));
  worker.on('error', (err) => errors.push(err));
  cleanups.push(() => worker.stop(0));
  return { worker, dropped, succeeded, errors };
}

/** Moves the clock one check interval and waits until the lease check has run and sleeps again. */
async function oneCheck(): Promise<void> {
  const slept = once(clock.events, 'sleep', (ms: number) => ms === CHECK_MS);
  clock.advance(CHECK_MS);
  await slept;
}

async function cancel(runId: string) {
  const a = await client(api.base)('POST', `/v1/runs/${runId}/cancel`, { key: operator });
  expect(a.status, a.text).toBe(200);
  expect(a.json.state).toBe('cancelled');
  return a.json;
}

test("cancelling a running run aborts its handler's signal at the worker's next heartbeat; the run stays cancelled", async () => {
  const runId = await readyRun();
  const complete = vi.spyOn(db.store, 'completeRuns');
  const fail = vi.spyOn(db.store, 'failRun');
  let signal: AbortSignal | undefined;
  const seen: { abortedAt: number | null } = { abortedAt: null };
  const { worker, dropped, succeeded, errors } = newWorker(async (ctx) => {
    signal = ctx.signal;
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
    seen.abortedAt = clock.nowMs();
    // A handler that ignores the abort and returns as if it had succeeded.
    return 'done';
  });
  const started = once(worker, 'run:started');
  worker.start();
  const [claimed] = (await started) as [ClaimedRun];
  expect(claimed.runId).toBe(runId);

  await oneCheck();
  await oneCheck();
  const cancelledAt = clock.nowMs();
  const answer = await cancel(runId);
  expect(answer.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['cancelled']);
  expect(signal?.aborted).toBe(false);

  // The keeper renews once a lease is a third through: that heartbeat finds the lease gone.
  const lost = once(worker, 'lease:lost');
  const dropEvent = once(worker, 'run:dropped');
  while (seen.abortedAt === null && clock.nowMs() < cancelledAt + LEASE_MS) await oneCheck();
  expect(await lost).toEqual([runId]);
  // Not before the renewal is due (T0 + a third of the lease), and within one check of it.
  const abortedAt = seen.abortedAt ?? Number.POSITIVE_INFINITY;
  expect(abortedAt).toBeGreaterThanOrEqual(T0 + LEASE_MS / 3);
  expect(abortedAt - cancelledAt).toBeLessThanOrEqual(LEASE_MS / 3 + CHECK_MS);
  expect(signal?.reason).toBeInstanceOf(LeaseLostError);
  await dropEvent;
  expect(dropped).toEqual([[runId, 'lease lost']]);
  expect(succeeded).toEqual([]);
  expect(complete).not.toHaveBeenCalled();
  expect(fail).not.toHaveBeenCalled();
  expect(worker.inFlight).toBe(0);
  expect(errors).toEqual([]);

  // A completion sent under the old lease anyway is refused, and the run stays cancelled.
  const late = await db.store.completeRuns({
    leases: [{ runId, leaseToken: claimed.leaseToken }],
    now: clock.nowMs(),
  });
  expect(late).toEqual({ completed: [], lost: [runId] });
  const run = await db.store.getRun({ tenantId: 't', runId });
  expect(run).toMatchObject({ state: 'cancelled', finishedAt: new Date(cancelledAt) });
  expect((await attemptRows(db.pool, runId)).map((a) => a.outcome)).toEqual(['cancelled']);
});

test('a handler that returns after the cancel but before the heartbeat: its completion is refused as lost', async () => {
  const runId = await readyRun();
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const { worker, dropped, succeeded, errors } = newWorker(async () => {
    await finished;
    return 'done';
  });
  const started = once(worker, 'run:started');
  worker.start();
  await started;
  await cancel(runId);

  const complete = vi.spyOn(db.store, 'completeRuns');
  const lost = once(worker, 'lease:lost');
  const dropEvent = once(worker, 'run:dropped');
  finish();
  expect(await lost).toEqual([runId]);
  await dropEvent;
  expect(complete).toHaveBeenCalled();
  expect(dropped).toEqual([[runId, 'lease lost before the result was recorded']]);
  expect(succeeded).toEqual([]);
  expect(errors).toEqual([]);
  const run = await db.store.getRun({ tenantId: 't', runId });
  expect(run.state).toBe('cancelled');
  expect(run.attempts.map((a) => a.outcome)).toEqual(['cancelled']);
});
