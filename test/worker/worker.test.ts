/**
 * The Worker against a real database: bounded concurrency, the handler's context, retries and
 * dead letters, handler filtering, lease loss, batched completions and graceful stop. Handlers
 * block on promises the test resolves; time moves only through a FakeClock; waits are on events,
 * guarded by a timeout.
 */
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { LeaseLostError, PermanentError } from '../../src/core/index.js';
import { Reaper } from '../../src/scheduler/index.js';
import type { ClaimedRun, Run } from '../../src/store/index.js';
import { attemptsOfRun } from '../../src/store/queries/runs.js';
import { type Handler, type RunContext, Worker, type WorkerOptions } from '../../src/worker/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once, WatchedClock } from '../setup/events.js';
import { upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });

interface Gate {
  promise: Promise<void>;
  open: () => void;
}

function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Everything a worker emitted, in order. */
interface Recorder {
  started: ClaimedRun[];
  succeeded: ClaimedRun[];
  failed: [ClaimedRun, { state: 'pending' | 'dead'; error: string }][];
  dropped: [ClaimedRun, string][];
  lost: string[];
  errors: unknown[];
}

let db: TestDatabase;
let clock: WatchedClock;
const cleanups: (() => Promise<void> | void)[] = [];

beforeEach(async () => {
  db = await setupDatabase();
  clock = new WatchedClock(T0);
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.restoreAllMocks();
  await db.teardown();
});

/**
 * A worker on the test clock, recording its events. Its poll and heartbeat loops sleep for an hour,
 * so only the test's explicit steps (and the pokes of finishing handlers) drive it.
 */
function newWorker(
  handlers: Record<string, Handler>,
  o: Partial<WorkerOptions> = {},
): { worker: Worker; events: Recorder } {
  const worker = new Worker({
    store: db.store,
    clock,
    logger,
    handlers,
    pollIntervalMs: 3_600_000,
    heartbeatCheckMs: 3_600_000,
    ...o,
  });
  const events: Recorder = { started: [], succeeded: [], failed: [], dropped: [], lost: [], errors: [] };
  worker.on('run:started', (r) => events.started.push(r));
  worker.on('run:succeeded', (r) => events.succeeded.push(r));
  worker.on('run:failed', (r, result) => events.failed.push([r, result]));
  worker.on('run:dropped', (r, reason) => events.dropped.push([r, reason]));
  worker.on('lease:lost', (id) => events.lost.push(id));
  worker.on('error', (err) => events.errors.push(err));
  return { worker, events };
}

/**
 * `n` ready runs, one per job `job-<i>` of tenant `t`, each with its own payload and slot (the
 * slots are in the past, oldest first, so they are claimable at T0 in job order).
 */
async function readyRuns(n: number, handler = 'h', tenantId = 't'): Promise<Run[]> {
  const runs: Run[] = [];
  for (let i = 0; i < n; i++) {
    const jobId = `${handler}-job-${i}`;
    await upsertJob(db.store, {
      tenantId,
      job: { jobId, schedule: '@every 1h', handler, payload: { n: i, handler } },
      now: T0,
    });
    runs.push(await db.store.triggerRun({ tenantId, jobId, scheduledFor: T0 - (n - i) * 60_000, now: T0 }));
  }
  return runs;
}

async function attemptRows(runId: string) {
  const { rows } = await db.pool.query(attemptsOfRun, [runId]);
  return rows;
}

/** Lets pending I/O callbacks and promise reactions run. */
async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
}

async function runState(
  runId: string,
): Promise<{ state: string; attempt: number; lease_expires_at: Date | null }> {
  const { rows } = await db.pool.query(
    'SELECT state, attempt, lease_expires_at FROM run_states WHERE run_id = $1',
    [runId],
  );
  expect(rows).toHaveLength(1);
  return rows[0];
}

test('runs 7 ready runs with concurrency 3, each once, with the right context', async () => {
  const runs = await readyRuns(7);
  const contexts: RunContext[] = [];
  const waiting: Gate[] = [];
  let current = 0;
  let maxConcurrent = 0;
  const { worker, events } = newWorker(
    {
      h: async (ctx) => {
        contexts.push(ctx);
        current += 1;
        maxConcurrent = Math.max(maxConcurrent, current);
        const g = gate();
        waiting.push(g);
        await g.promise;
        current -= 1;
      },
    },
    { concurrency: 3 },
  );
  cleanups.push(() => worker.stop(0));

  /** Lets every blocked handler finish at once, then waits until `started` runs have started. */
  const round = async (started: number) => {
    const next =
      started > events.started.length
        ? once(worker, 'run:started', () => events.started.length === started)
        : null;
    for (const g of waiting.splice(0)) g.open();
    await next;
  };

  const firstThree = once(worker, 'run:started', () => events.started.length === 3);
  worker.start();
  await firstThree;
  expect([current, worker.inFlight, maxConcurrent]).toEqual([3, 3, 3]);
  await round(6);
  expect([current, maxConcurrent]).toEqual([3, 3]);
  await round(7);
  const allDone = once(worker, 'run:succeeded', () => events.succeeded.length === 7);
  for (const g of waiting.splice(0)) g.open();
  await allDone;

  expect(maxConcurrent).toBe(3);
  expect(current).toBe(0);
  // 'run:succeeded' fires before the run leaves the active set; stop() waits for that (the clock
  // does not move, so the grace cannot run out).
  await worker.stop(1000);
  expect(clock.nowMs()).toBe(T0);
  expect(worker.inFlight).toBe(0);
  // Each run exactly once, in slot order, each with its own identity, slot, attempt and payload.
  expect(contexts.map((c) => c.runId)).toEqual(runs.map((r) => r.runId));
  for (const [i, ctx] of contexts.entries()) {
    const run = runs[i]!;
    expect({
      runId: ctx.runId,
      tenantId: ctx.tenantId,
      jobId: ctx.jobId,
      scheduledFor: ctx.scheduledFor,
      attempt: ctx.attempt,
      payload: ctx.payload,
    }).toEqual({
      runId: run.runId,
      tenantId: 't',
      jobId: `h-job-${i}`,
      scheduledFor: new Date(T0 - (7 - i) * 60_000),
      attempt: 1,
      payload: { n: i, handler: 'h' },
    });
    expect(ctx.signal.aborted).toBe(false);
    expect(typeof ctx.logger.info).toBe('function');
  }
  expect(events.succeeded.map((r) => r.runId).sort()).toEqual(runs.map((r) => r.runId).sort());
  expect(events.failed).toEqual([]);
  expect(events.dropped).toEqual([]);
  expect(events.errors).toEqual([]);
  expect(await db.store.countRuns({})).toMatchObject({ succeeded: 7, pending: 0, running: 0 });
  for (const r of runs) {
    const attempts = (await db.pool.query(attemptsOfRun, [r.runId])).rows;
    expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'succeeded']]);
  }
});

test('a handler that throws fails the attempt: retried after its backoff with attempt 2', async () => {
  const [run] = await readyRuns(1);
  const attempts: number[] = [];
  const { worker, events } = newWorker(
    {
      h: ({ attempt }) => {
        attempts.push(attempt);
        if (attempt === 1) throw new Error('boom');
      },
    },
    { claimAheadMs: 0 },
  );
  cleanups.push(() => worker.stop(0));
  const failed = once(worker, 'run:failed');
  worker.start();
  const [claimed, result] = (await failed) as [ClaimedRun, { state: string; error: string }];

  expect(claimed.runId).toBe(run!.runId);
  expect(result.state).toBe('pending');
  // The message is what tables show; the stack is kept on the attempt, apart.
  expect(result.error).toBe('boom');
  const after = await db.store.getRun({ tenantId: 't', runId: run!.runId });
  expect(after).toMatchObject({ state: 'pending', attempt: 2, leaseExpiresAt: null, finishedAt: null });
  expect(after.lastError).toBe('boom');
  expect(after.attempts[0]!.errorStack).toMatch(/^Error: boom\n {4}at /);
  // Backoff of attempt 1: 2 s, shortened by up to half at random.
  const wait = after.availableAt.getTime() - T0;
  expect(wait >= 1000 && wait <= 2000).toBe(true);
  expect(after.attempts.map((a) => [a.attempt, a.outcome, a.error])).toEqual([[1, 'failed', result.error]]);
  expect(events.succeeded).toEqual([]);

  // Not before its backoff ends; then the retry runs with attempt 2 and succeeds.
  clock.set(after.availableAt.getTime() - 1);
  // Nothing claimable yet: the worker looks again the moment the retry becomes claimable.
  expect(await worker.claimOnce()).toBe(1);
  expect(events.started).toHaveLength(1);
  clock.set(after.availableAt);
  const succeeded = once(worker, 'run:succeeded');
  await worker.claimOnce();
  await succeeded;
  expect(attempts).toEqual([1, 2]);
  expect(events.started.map((r) => [r.runId, r.attempt])).toEqual([
    [run!.runId, 1],
    [run!.runId, 2],
  ]);
  const final = await db.store.getRun({ tenantId: 't', runId: run!.runId });
  expect(final.state).toBe('succeeded');
  expect(final.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
    [1, 'failed'],
    [2, 'succeeded'],
  ]);
  expect(events.errors).toEqual([]);
});

test('a PermanentError dead-letters the run at once', async () => {
  const [run] = await readyRuns(1);
  const { worker, events } = newWorker({
    h: () => {
      throw new PermanentError('bad arguments');
    },
  });
  cleanups.push(() => worker.stop(0));
  const failed = once(worker, 'run:failed');
  worker.start();
  const [, result] = (await failed) as [ClaimedRun, { state: string; error: string }];

  expect(result.state).toBe('dead');
  expect(result.error).toBe('PermanentError: bad arguments');
  const after = await db.store.getRun({ tenantId: 't', runId: run!.runId });
  expect(after).toMatchObject({ state: 'dead', attempt: 1, finishedAt: new Date(T0), maxAttempts: 3 });
  expect(after.attempts.map((a) => [a.attempt, a.outcome, a.error])).toEqual([
    [1, 'failed', 'PermanentError: bad arguments'],
  ]);
  expect(after.attempts[0]!.errorStack).toMatch(/^PermanentError: bad arguments\n {4}at /);
  expect(events.errors).toEqual([]);
});

test('a worker claims only the runs whose handler it has', async () => {
  const [mine] = await readyRuns(1, 'known');
  const [other] = await readyRuns(1, 'unknown');
  const claim = vi.spyOn(db.store, 'claimRuns');
  const { worker, events } = newWorker({ known: () => {} });
  cleanups.push(() => worker.stop(0));
  const done = once(worker, 'run:succeeded');
  worker.start();
  await done;

  // The first claim asked for 10 runs and the unknown handler's run was ready, yet it was not taken.
  const first = await claim.mock.results[0]!.value;
  expect(claim.mock.calls[0]![0]).toMatchObject({ max: 10, handlers: ['known'], now: T0 });
  expect((first as ClaimedRun[]).map((r) => r.runId)).toEqual([mine!.runId]);
  expect(events.started.map((r) => r.runId)).toEqual([mine!.runId]);
  await worker.stop(0);
  expect(await runState(other!.runId)).toEqual({ state: 'pending', attempt: 1, lease_expires_at: null });
  expect(await attemptRows(other!.runId)).toEqual([]);
  expect((await runState(mine!.runId)).state).toBe('succeeded');
});

test('a lost lease aborts the handler and its later result is dropped', async () => {
  const [run] = await readyRuns(1);
  const signals: AbortSignal[] = [];
  const release = gate();
  const complete = vi.spyOn(db.store, 'completeRuns');
  const { worker, events } = newWorker({
    // Blocks on its signal, then (once the test lets it) resolves as if it had succeeded.
    h: async ({ signal }) => {
      signals.push(signal);
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      await release.promise;
      return 'done';
    },
  });
  cleanups.push(() => worker.stop(0));
  const started = once(worker, 'run:started');
  worker.start();
  await started;
  expect(signals).toHaveLength(1);
  const signal = signals[0]!;
  expect(signal.aborted).toBe(false);

  // The worker froze past its 30 s lease; a reaper requeued the run under a new state.
  clock.advance(31_000);
  const reaper = new Reaper({ store: db.store, clock, logger });
  const reaped = await reaper.reapOnce();
  expect(reaped.requeued.map((r) => [r.runId, r.attempt])).toEqual([[run!.runId, 2]]);

  const lost = once(worker, 'lease:lost');
  await worker.heartbeatOnce(true);
  expect(await lost).toEqual([run!.runId]);
  expect(signal.aborted).toBe(true);
  expect(signal.reason).toBeInstanceOf(LeaseLostError);
  expect((signal.reason as LeaseLostError).code).toBe('lease_lost');
  expect(events.dropped).toEqual([]);

  // The handler now resolves successfully: its result must not be recorded.
  const dropped = once(worker, 'run:dropped');
  release.open();
  const [droppedRun, reason] = (await dropped) as [ClaimedRun, string];
  expect(droppedRun.runId).toBe(run!.runId);
  expect(reason).toBe('lease lost');
  expect(events.lost).toEqual([run!.runId]);
  expect(events.succeeded).toEqual([]);
  expect(events.failed).toEqual([]);
  expect(complete).not.toHaveBeenCalled();
  expect(await runState(run!.runId)).toEqual({ state: 'pending', attempt: 2, lease_expires_at: null });
  expect((await attemptRows(run!.runId)).map((a) => a.outcome)).toEqual(['lease_expired']);
  expect(worker.inFlight).toBe(0);
  expect(events.errors).toEqual([]);
});

test('a handler that first reads its signal after the lease is lost finds it aborted', async () => {
  const [run] = await readyRuns(1);
  const release = gate();
  const seen: { aborted: boolean; reason: unknown }[] = [];
  const { worker } = newWorker({
    // Reads neither signal nor logger until the test lets it: the worker makes them on first use.
    h: async (ctx) => {
      await release.promise;
      seen.push({ aborted: ctx.signal.aborted, reason: ctx.signal.reason });
      ctx.logger.info('still here');
    },
  });
  cleanups.push(() => worker.stop(0));
  const started = once(worker, 'run:started');
  worker.start();
  await started;

  clock.advance(31_000);
  await new Reaper({ store: db.store, clock, logger }).reapOnce();
  const lost = once(worker, 'lease:lost');
  await worker.heartbeatOnce(true);
  expect(await lost).toEqual([run!.runId]);

  const dropped = once(worker, 'run:dropped');
  release.open();
  await dropped;
  expect(seen).toHaveLength(1);
  expect(seen[0]!.aborted).toBe(true);
  expect(seen[0]!.reason).toBeInstanceOf(LeaseLostError);
});

test('completions finishing together are written in batches', async () => {
  const runs = await readyRuns(5);
  const release = gate();
  const complete = vi.spyOn(db.store, 'completeRuns');
  const { worker, events } = newWorker({ h: () => release.promise });
  cleanups.push(() => worker.stop(0));
  const started = once(worker, 'run:started', () => events.started.length === 5);
  worker.start();
  await started;

  const done = once(worker, 'run:succeeded', () => events.succeeded.length === 5);
  release.open();
  await done;

  // Handlers finishing in the same turn of the event loop share one statement.
  expect(complete.mock.calls.map(([p]) => p.leases.length)).toEqual([5]);
  const ids = runs.map((r) => r.runId).sort();
  expect(complete.mock.calls.flatMap(([p]) => p.leases.map((l) => l.runId)).sort()).toEqual(ids);
  const { rows } = await db.pool.query('SELECT state, finished_at FROM run_states ORDER BY run_id');
  expect(rows).toEqual(Array.from({ length: 5 }, () => ({ state: 'succeeded', finished_at: new Date(T0) })));
  for (const r of runs) {
    expect((await attemptRows(r.runId)).map((a) => [a.outcome, a.finished_at])).toEqual([
      ['succeeded', new Date(T0)],
    ]);
  }
  expect(events.errors).toEqual([]);
});

test('graceful stop releases unfinished runs without spending an attempt', async () => {
  const runs = await readyRuns(2);
  const release = gate();
  const signals: AbortSignal[] = [];
  const { worker, events } = newWorker({
    h: async ({ signal }) => {
      signals.push(signal);
      await release.promise; // ignores its signal
    },
  });
  cleanups.push(() => release.open());
  const started = once(worker, 'run:started', () => events.started.length === 2);
  worker.start();
  await started;

  const graceBegins = once(clock.events, 'sleep', (ms: number) => ms === 1000);
  let stopped = false;
  const stopping = worker.stop(1000).then(() => {
    stopped = true;
  });
  await graceBegins;
  clock.advance(999);
  expect(stopped).toBe(false);
  expect(signals.map((s) => s.aborted)).toEqual([false, false]);
  clock.advance(1);
  await stopping;

  expect(signals.map((s) => s.aborted)).toEqual([true, true]);
  expect(signals.map((s) => (s.reason as Error).message)).toEqual(['worker shutdown', 'worker shutdown']);
  for (const run of runs) {
    expect(await runState(run.runId)).toEqual({ state: 'pending', attempt: 1, lease_expires_at: null });
    expect(await attemptRows(run.runId)).toEqual([
      {
        attempt: 1,
        worker_id: worker.workerId,
        outcome: 'released',
        error: 'worker shutdown',
        error_stack: null,
        started_at: new Date(T0),
        claimed_at: new Date(T0),
        finished_at: new Date(T0 + 1000),
        output: null,
        // Its handler reported nothing (ctx.progress, ctx.log): no attempt_progress row.
        progress: null,
        progress_message: null,
        logs: null,
        logs_dropped: null,
        reported_at: null,
      },
    ]);
  }

  // The handlers finish late: their results are dropped, not recorded.
  const dropped = once(worker, 'run:dropped', () => events.dropped.length === 2);
  release.open();
  await dropped;
  expect(events.dropped.map(([, reason]) => reason)).toEqual(['worker shutdown', 'worker shutdown']);
  expect(events.succeeded).toEqual([]);

  // Another worker takes them at once, at the same clock time, on the same attempt.
  const second = newWorker({ h: () => {} }, { workerId: 'worker-b', store: db.newStore() });
  cleanups.push(() => second.worker.stop(0));
  const retaken = once(second.worker, 'run:succeeded', () => second.events.succeeded.length === 2);
  second.worker.start();
  await retaken;
  expect(clock.nowMs()).toBe(T0 + 1000);
  expect(second.events.started.map((r) => [r.runId, r.attempt]).sort()).toEqual(
    runs.map((r) => [r.runId, 1]).sort(),
  );
  for (const run of runs) {
    expect((await runState(run.runId)).state).toBe('succeeded');
    expect((await attemptRows(run.runId)).map((a) => [a.attempt, a.worker_id, a.outcome])).toEqual([
      [1, worker.workerId, 'released'],
      [1, 'worker-b', 'succeeded'],
    ]);
  }
  expect(events.errors).toEqual([]);
  expect(second.events.errors).toEqual([]);
});

test('graceful stop lets handlers that finish within the grace complete', async () => {
  const runs = await readyRuns(2);
  const release = gate();
  const releaseSpy = vi.spyOn(db.store, 'releaseRuns');
  const { worker, events } = newWorker({ h: () => release.promise });
  const started = once(worker, 'run:started', () => events.started.length === 2);
  worker.start();
  await started;

  const graceBegins = once(clock.events, 'sleep', (ms: number) => ms === 1000);
  const stopping = worker.stop(1000);
  await graceBegins;
  release.open();
  await stopping;

  expect(clock.nowMs()).toBe(T0);
  expect(clock.pendingSleeps).toBe(0);
  expect(releaseSpy).not.toHaveBeenCalled();
  expect(events.succeeded.map((r) => r.runId).sort()).toEqual(runs.map((r) => r.runId).sort());
  expect(events.dropped).toEqual([]);
  for (const run of runs) {
    expect((await runState(run.runId)).state).toBe('succeeded');
    expect((await attemptRows(run.runId)).map((a) => [a.outcome, a.error])).toEqual([['succeeded', null]]);
  }
  expect(events.errors).toEqual([]);
});

test('stop does not release a run whose handler already returned while its completion is being written', async () => {
  const [run] = await readyRuns(1);
  const handlerDone = gate();
  const completionHeld = gate();
  const realComplete = db.store.completeRuns.bind(db.store);
  const completeCalled = gate();
  vi.spyOn(db.store, 'completeRuns').mockImplementation(async (p) => {
    completeCalled.open();
    await completionHeld.promise;
    return realComplete(p);
  });
  const releaseSpy = vi.spyOn(db.store, 'releaseRuns');
  const { worker, events } = newWorker({
    h: () => {
      handlerDone.open();
    },
  });
  worker.start();
  await handlerDone.promise;
  await completeCalled.promise;

  // The grace is zero: stop decides at once which runs to release, while the completion is held.
  const stopping = worker.stop(0);
  completionHeld.open();
  await stopping;

  expect(releaseSpy).not.toHaveBeenCalled();
  expect((await runState(run!.runId)).state).toBe('succeeded');
  expect((await attemptRows(run!.runId)).map((a) => a.outcome)).toEqual(['succeeded']);
  expect(events.dropped).toEqual([]);
  expect(events.succeeded.map((r) => r.runId)).toEqual([run!.runId]);
});

test('an idle worker on a direct connection is woken by NOTIFY when a run is triggered: no poll needed', async () => {
  const { worker, events } = newWorker({ h: () => {} });
  await upsertJob(db.store, {
    tenantId: 't',
    job: { jobId: 'woken', schedule: '@every 1h', handler: 'h' },
    now: T0,
  });
  worker.start();
  // The poll interval is an hour and the clock never moves: only the notification can wake it.
  await once(worker, 'run:started', () => true, 100).catch(() => undefined);
  expect(events.started).toHaveLength(0);
  const run = await db.store.triggerRun({ tenantId: 't', jobId: 'woken', now: T0 });
  const [started] = await once<[ClaimedRun]>(worker, 'run:started');
  expect(started.runId).toBe(run.runId);
  await once(worker, 'run:succeeded');
  cleanups.push(() => worker.stop(0));
});

test('a completion the database cannot take is retried with backoff, then recorded once', async () => {
  const [run] = await readyRuns(1);
  // The database is unreachable for the first two completions.
  let refusals = 2;
  const complete = db.store.completeRuns.bind(db.store);
  vi.spyOn(db.store, 'completeRuns').mockImplementation(async (p) => {
    if (refusals > 0) {
      refusals -= 1;
      throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
    }
    return complete(p);
  });
  const { worker, events } = newWorker({ h: () => 'done' });
  cleanups.push(() => worker.stop(0));
  const succeeded = once(worker, 'run:succeeded');
  // Each refusal makes the worker sleep (200 ms, then 400 ms) before trying again.
  const backoffs: number[] = [];
  clock.events.on('sleep', (ms) => {
    if (ms < 1000) {
      backoffs.push(ms);
      queueMicrotask(() => clock.advance(ms));
    }
  });
  worker.start();
  await succeeded;
  expect(backoffs).toEqual([200, 400]);
  expect(events.errors).toHaveLength(2);
  expect(events.dropped).toEqual([]);
  expect(await attemptRows(run!.runId)).toMatchObject([{ attempt: 1, outcome: 'succeeded' }]);
});

test('a completion still refused after its retry budget (the lease length) is given up: the run is dropped, not recorded', async () => {
  const [run] = await readyRuns(1);
  vi.spyOn(db.store, 'completeRuns').mockRejectedValue(new Error('connect ECONNREFUSED 127.0.0.1:5432'));
  const { worker, events } = newWorker({ h: () => 'done' });
  cleanups.push(() => worker.stop(0));
  const dropped = once(worker, 'run:dropped');
  clock.events.on('sleep', (ms) => {
    if (ms < 3_600_000) queueMicrotask(() => clock.advance(ms));
  });
  worker.start();
  const [, reason] = (await dropped) as [ClaimedRun, string];
  expect(reason).toBe('the result could not be recorded within 30000 ms');
  expect(events.succeeded).toEqual([]);
  // The run is still running under its (now expired) lease: the reaper will give it another attempt.
  expect((await db.store.getRun({ tenantId: 't', runId: run!.runId })).state).toBe('running');
});

describe('held runs: claim ahead and prefetch', () => {
  /** `n` runs of job `ahead-<i>` becoming claimable at `at` (materialised ahead of their slot). */
  async function futureRuns(n: number, at: number): Promise<Run[]> {
    const runs: Run[] = [];
    for (let i = 0; i < n; i++) {
      const jobId = `ahead-${i}`;
      await upsertJob(db.store, {
        tenantId: 't',
        job: { jobId, schedule: '@every 1h', handler: 'h' },
        now: T0,
      });
      runs.push(await db.store.triggerRun({ tenantId: 't', jobId, scheduledFor: at, now: T0 }));
    }
    return runs;
  }

  test('a run claimed ahead is held under lease and started exactly at its instant, not before', async () => {
    const at = T0 + 200;
    const runs = await futureRuns(3, at);
    const startedAt: number[] = [];
    const { worker, events } = newWorker({ h: () => void startedAt.push(clock.nowMs()) }, { concurrency: 5 });
    cleanups.push(() => worker.stop(0));
    expect(worker.claimAheadMs).toBe(250);
    // 200 ms before the slot: claimed (the lease is ours), not started.
    worker.start();
    await vi.waitFor(() => expect(worker.inFlight).toBe(3));
    expect(events.started).toEqual([]);
    for (const r of runs) expect(await runState(r.runId)).toMatchObject({ state: 'running', attempt: 1 });
    expect(worker.inFlight).toBe(3);

    clock.set(at - 1);
    await flush();
    expect(events.started).toEqual([]);
    const done = Promise.all(runs.map(() => once(worker, 'run:succeeded')));
    clock.set(at);
    await done;
    expect(startedAt).toEqual([at, at, at]);
    expect(events.started.map((r) => r.runId)).toEqual(runs.map((r) => r.runId));
    // Recorded as started at the slot, when the handler ran, not at the claim 200 ms before it.
    for (const r of runs) {
      expect(await db.store.getRun({ tenantId: 't', runId: r.runId })).toMatchObject({
        state: 'succeeded',
        claimedAt: new Date(T0),
        startedAt: new Date(at),
      });
    }
  });

  test('a held run waiting for a free slot is recorded as started when its handler started', async () => {
    const runs = await readyRuns(2);
    const first = gate();
    const { worker, events } = newWorker(
      { h: async ({ payload }) => ((payload as { n: number }).n === 0 ? first.promise : undefined) },
      { concurrency: 1, prefetch: 1 },
    );
    cleanups.push(() => worker.stop(0));
    worker.start();
    await vi.waitFor(() => expect(events.started).toHaveLength(1));
    expect(worker.inFlight).toBe(2);
    clock.advance(500);
    const done = once(worker, 'run:succeeded', () => events.succeeded.length === 2);
    first.open();
    await done;
    const [a, b] = await Promise.all(runs.map((r) => db.store.getRun({ tenantId: 't', runId: r.runId })));
    expect(a).toMatchObject({ claimedAt: new Date(T0), startedAt: new Date(T0) });
    // Claimed with the first, started 500 ms later when the first freed its slot.
    expect(b).toMatchObject({ claimedAt: new Date(T0), startedAt: new Date(T0 + 500) });
  });

  test('with claimAheadMs 0 a run is not claimed before its instant; the claim returns how long to wait', async () => {
    await futureRuns(1, T0 + 200);
    const { worker, events } = newWorker({ h: () => {} }, { claimAheadMs: 0 });
    cleanups.push(() => worker.stop(0));
    worker.start();
    expect(await worker.claimOnce()).toBe(200);
    expect(events.started).toEqual([]);
    expect(worker.inFlight).toBe(0);
  });

  test('a claim looks again claimAheadMs before the next run becomes claimable', async () => {
    await futureRuns(1, T0 + 1_000);
    const { worker } = newWorker({ h: () => {} }, { claimAheadMs: 300 });
    cleanups.push(() => worker.stop(0));
    worker.start();
    expect(await worker.claimOnce()).toBe(700);
    expect(worker.inFlight).toBe(0);
  });

  test('prefetch holds runs beyond concurrency; a freed slot takes the next held run at once', async () => {
    const runs = await readyRuns(4);
    const gates = runs.map(() => gate());
    let calls = 0;
    const { worker, events } = newWorker(
      {
        h: async () => {
          const g = gates[calls++]!;
          await g.promise;
        },
      },
      { concurrency: 1, prefetch: 2 },
    );
    cleanups.push(() => worker.stop(0));
    worker.start();
    await vi.waitFor(() => expect(worker.inFlight).toBe(3));
    // One running, two held (all three leased), the fourth still pending.
    expect(events.started.map((r) => r.runId)).toEqual([runs[0]!.runId]);
    expect(worker.inFlight).toBe(3);
    expect((await runState(runs[2]!.runId)).state).toBe('running');
    expect((await runState(runs[3]!.runId)).state).toBe('pending');
    const second = once(worker, 'run:started');
    const firstDone = once(worker, 'run:succeeded');
    gates[0]!.open();
    await second;
    expect(events.started.map((r) => r.runId)).toEqual([runs[0]!.runId, runs[1]!.runId]);
    // The first run's result is written (until then its lease is renewed too) and the freed
    // prefetch place is refilled with the fourth run before the heartbeat is counted.
    await firstDone;
    await vi.waitFor(async () => expect((await runState(runs[3]!.runId)).state).toBe('running'));
    await vi.waitFor(() => expect(worker.inFlight).toBe(3));
    // Held leases are renewed with the running ones.
    clock.advance(11_000);
    await worker.heartbeatOnce();
    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS n FROM run_states WHERE state = 'running' AND lease_expires_at > $1",
      [new Date(clock.nowMs() + 25_000)],
    );
    expect(rows[0].n).toBe(worker.inFlight);
    for (const g of gates) g.open();
  });

  test('a graceful stop gives held runs back at once, without spending an attempt', async () => {
    const runs = await readyRuns(3);
    const g = gate();
    const { worker, events } = newWorker({ h: () => g.promise }, { concurrency: 1, prefetch: 2 });
    worker.start();
    await vi.waitFor(() => expect(worker.inFlight).toBe(3));
    expect(events.started).toHaveLength(1);
    const stopped = worker.stop(60_000);
    // The held two are pending again before the running one finishes.
    await vi.waitFor(async () => expect((await runState(runs[2]!.runId)).state).toBe('pending'));
    expect(await runState(runs[1]!.runId)).toEqual({ state: 'pending', attempt: 1, lease_expires_at: null });
    expect((await attemptRows(runs[1]!.runId)).map((a) => [a.outcome, a.error])).toEqual([
      ['released', 'worker shutdown'],
    ]);
    g.open();
    await stopped;
    expect((await runState(runs[0]!.runId)).state).toBe('succeeded');
    expect(events.started.map((r) => r.runId)).toEqual([runs[0]!.runId]);
  });

  test('a held run whose lease is lost is dropped without being started', async () => {
    const runs = await futureRuns(1, T0 + 200);
    const { worker, events } = newWorker({ h: () => {} });
    cleanups.push(() => worker.stop(0));
    worker.start();
    await vi.waitFor(() => expect(worker.inFlight).toBe(1));
    // Another party takes the run over (its claim's token changes): the next heartbeat says it is lost.
    await db.pool.query('UPDATE run_claims SET lease_token = gen_random_uuid() WHERE $1 = ANY(run_ids)', [
      runs[0]!.runId,
    ]);
    await worker.heartbeatOnce(true);
    expect(events.lost).toEqual([runs[0]!.runId]);
    expect(events.dropped.map(([r]) => r.runId)).toEqual([runs[0]!.runId]);
    clock.set(T0 + 500);
    await flush();
    expect(events.started).toEqual([]);
    expect(worker.inFlight).toBe(0);
  });

  test("prefetch is 'auto' by default; 'auto' or a count from 0 to 1000 is taken", () => {
    expect(newWorker({ h: () => {} }).worker.prefetch).toBe('auto');
    expect(newWorker({ h: () => {} }, { prefetch: 'auto' }).worker.prefetch).toBe('auto');
    expect(newWorker({ h: () => {} }, { prefetch: 0 }).worker.prefetch).toBe(0);
    expect(newWorker({ h: () => {} }, { prefetch: 1000 }).worker.prefetch).toBe(1000);
  });

  test('concurrency, prefetch and claim-ahead out of range are refused', () => {
    expect(() => newWorker({ h: () => {} }, { prefetch: -1 })).toThrow(
      'worker prefetch must be "auto" or an integer from 0 to 1000',
    );
    for (const o of [
      { prefetch: -1 },
      { prefetch: 1001 },
      { prefetch: 1.5 },
      { prefetch: Number.NaN },
      // A caller without types: only the string 'auto' is taken.
      { prefetch: 'AUTO' as 'auto' },
      { prefetch: '50' as unknown as number },
      { claimAheadMs: -1 },
      { claimAheadMs: 10_001 },
    ]) {
      expect(() => newWorker({ h: () => {} }, o)).toThrow(RangeError);
    }
  });
});

test('an unreachable store: claim failures are logged on the first and then once a minute, and the recovery once', async () => {
  const lines: Record<string, unknown>[] = [];
  const capture = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
  let down = true;
  const store = new Proxy(db.store, {
    get(target, prop, receiver) {
      if (prop === 'claimRuns')
        return (...args: Parameters<typeof target.claimRuns>) =>
          down ? Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1')) : target.claimRuns(...args);
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const { worker } = newWorker({ h: () => {} }, { store, logger: capture, pollIntervalMs: 1000 });
  const claimSleep = () => once(clock.events, 'sleep', (ms) => (ms as number) <= 30_000, 5000);
  let failed = once(worker, 'error', () => true, 5000);
  let slept = claimSleep();
  worker.start();
  cleanups.push(() => worker.stop(1000));
  // Ten minutes of an outage: a failure every 30 s once the backoff is at its cap.
  for (let i = 0; i < 20; i++) {
    await failed;
    await slept;
    failed = once(worker, 'error', () => true, 5000);
    slept = claimSleep();
    clock.advance(30_000);
  }
  await failed;
  await slept;
  down = false;
  const recovered = once(clock.events, 'sleep', (ms) => ms === 1000, 5000);
  clock.advance(30_000);
  await recovered;
  const failures = lines.filter((l) => l.msg === 'claim failed; retrying with backoff');
  // 21 failures over 10 minutes: the first, then one a minute (was one line per failure).
  expect(failures.length).toBeGreaterThanOrEqual(10);
  expect(failures.length).toBeLessThanOrEqual(11);
  expect(failures[0]).toMatchObject({ level: 50, failures: 1 });
  expect(failures.at(-1)!.failures).toBeGreaterThan(18);
  expect(lines.filter((l) => l.msg === 'claims work again')).toEqual([
    expect.objectContaining({ level: 30, failures: 21 }),
  ]);
});
