/**
 * One bad result must not wedge a worker (issue 14, item 1), against a real database: a handler's
 * output or error holding U+0000 is recorded sanitised beside the other runs of its batch; a
 * result the database refuses as data (a genuine SQLSTATE 22P05 from PostgreSQL) fails only that
 * run while the rest of the batch is recorded; an unreachable store is retried for the retry
 * budget and no longer, although the worker's own heartbeats keep the lease alive; and a stop
 * gives up unrecorded results instead of waiting for them. Time moves only through the FakeClock.
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { HttpLeaseSource } from '../../src/client/index.js';
import { type JobInput, PermanentError } from '../../src/core/index.js';
import type { ClaimedRun, Completion, Run } from '../../src/store/index.js';
import { attemptsOfRun } from '../../src/store/queries/runs.js';
import { type Handler, Worker, type WorkerOptions } from '../../src/worker/index.js';
import { keysFor } from '../api/helpers.js';
import { startApi } from '../setup/api.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { WatchedClock } from '../setup/events.js';
import { upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });

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

interface Ended {
  succeeded: ClaimedRun[];
  failed: [ClaimedRun, { state: string; error: string }][];
  dropped: [ClaimedRun, string][];
}

function newWorker(handlers: Record<string, Handler>, o: Partial<WorkerOptions> = {}) {
  const worker = new Worker({
    store: db.store,
    clock,
    logger,
    handlers,
    pollIntervalMs: 3_600_000,
    heartbeatCheckMs: 3_600_000,
    ...o,
  });
  const ended: Ended = { succeeded: [], failed: [], dropped: [] };
  worker.on('run:succeeded', (r) => ended.succeeded.push(r));
  worker.on('run:failed', (r, result) => ended.failed.push([r, result]));
  worker.on('run:dropped', (r, reason) => ended.dropped.push([r, reason]));
  worker.on('error', () => {});
  /** Resolves once `n` results have ended (succeeded, failed or dropped); fails loudly after `ms`. */
  const untilEnded = (n: number, ms = 5000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (ended.succeeded.length + ended.failed.length + ended.dropped.length < n) return;
        clearTimeout(timer);
        for (const e of ['run:succeeded', 'run:failed', 'run:dropped'] as const) worker.off(e, check);
        resolve();
      };
      const timer = setTimeout(
        () =>
          reject(new Error(`timed out after ${ms} ms waiting for ${n} results: ${JSON.stringify(ended)}`)),
        ms,
      );
      for (const e of ['run:succeeded', 'run:failed', 'run:dropped'] as const) worker.on(e, check);
      check();
    });
  cleanups.push(() => worker.stop(0));
  return { worker, ended, untilEnded };
}

/** One ready run for each of `handlers`, job `<handler>-<i>`, all claimable at T0 in this order. */
async function readyRuns(handlers: string[], extra: Partial<JobInput> = {}): Promise<Run[]> {
  const runs: Run[] = [];
  for (const [i, handler] of handlers.entries()) {
    const jobId = `${handler}-${i}`;
    await upsertJob(db.store, {
      tenantId: 't',
      job: { jobId, schedule: '@every 1h', handler, ...extra },
      now: T0,
    });
    runs.push(
      await db.store.triggerRun({
        tenantId: 't',
        jobId,
        scheduledFor: T0 - (handlers.length - i) * 60_000,
        now: T0,
      }),
    );
  }
  return runs;
}

/** Lets pending I/O callbacks and promise reactions run (no time passes). */
async function tick(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
}

async function attempts(runId: string) {
  return (await db.pool.query(attemptsOfRun, [runId])).rows;
}

async function states(): Promise<Record<string, number>> {
  const { rows } = await db.pool.query('SELECT state, count(*)::int AS n FROM run_states GROUP BY state');
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/** Advances the clock by each sleep asked for below an hour (the loops' idle sleeps are an hour). */
function autoAdvance(): void {
  clock.events.on('sleep', (ms) => {
    if (ms < 3_600_000) queueMicrotask(() => clock.advance(ms));
  });
}

test("a handler's output holding NUL beside other runs: every run is recorded once, the poison one sanitised", async () => {
  const runs = await readyRuns(['poison', 'ok', 'ok', 'ok', 'ok', 'ok']);
  const { worker, ended, untilEnded } = newWorker({
    poison: () => ({ output: 'binary\u0000output' }),
    ok: () => 'fine',
  });
  worker.start();
  await untilEnded(6);
  expect(ended.failed).toEqual([]);
  expect(ended.dropped).toEqual([]);
  expect(ended.succeeded.map((r) => r.runId).sort()).toEqual(runs.map((r) => r.runId).sort());
  expect(await states()).toEqual({ succeeded: 6 });
  for (const run of runs) {
    const rows = await attempts(run.runId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      outcome: 'succeeded',
      output: run === runs[0] ? 'binary\uFFFDoutput' : 'fine',
    });
  }
});

test('a thrown error whose message holds NUL is recorded: the real message, sanitised', async () => {
  const [run] = await readyRuns(['throws']);
  const { worker, ended, untilEnded } = newWorker({
    throws: () => {
      throw Object.assign(new Error('exit status 2: a\u0000b'), { output: 'stdout \u0000 tail' });
    },
  });
  worker.start();
  await untilEnded(1);
  expect(ended.failed).toHaveLength(1);
  expect(ended.failed[0]![1].error).toBe('exit status 2: a\uFFFDb');
  const [attempt] = await attempts(run!.runId);
  expect(attempt).toMatchObject({ outcome: 'failed', output: 'stdout \uFFFD tail' });
  expect(attempt.error).toBe('exit status 2: a\uFFFDb');
  expect(attempt.error_stack).toMatch(/^Error: exit status 2: a\uFFFDb\n/);
});

test('a result the database refuses (a genuine 22P05) fails only that run; the rest of the batch is recorded', async () => {
  const runs = await readyRuns(['h', 'h', 'h', 'h', 'h']);
  const poison = runs[2]!.runId;
  const complete = db.store.completeRuns.bind(db.store);
  const batches: number[] = [];
  vi.spyOn(db.store, 'completeRuns').mockImplementation(
    async (p: { leases: readonly Completion[]; now: number }) => {
      batches.push(p.leases.length);
      // A value the worker's sanitising does not see: PostgreSQL itself refuses it, as it would
      // refuse a NUL that reached it.
      if (p.leases.some((l) => l.runId === poison)) await db.pool.query(`SELECT '"\\u0000"'::jsonb`);
      return complete(p);
    },
  );
  const { worker, ended, untilEnded } = newWorker({ h: () => 'done' });
  worker.start();
  await untilEnded(5);
  // One batch of 5, refused; its halves: 3 (refused: 2 recorded, then the poison alone, refused
  // and failed instead), then 2.
  expect(batches).toEqual([5, 3, 2, 1, 2]);
  expect(ended.dropped).toEqual([]);
  expect(ended.succeeded.map((r) => r.runId).sort()).toEqual(
    runs
      .map((r) => r.runId)
      .filter((id) => id !== poison)
      .sort(),
  );
  expect(ended.failed).toHaveLength(1);
  const [failedRun, result] = ended.failed[0]!;
  expect(failedRun.runId).toBe(poison);
  expect(result.state).toBe('dead');
  expect(result.error).toMatch(
    /^the handler's result could not be stored: .*unsupported Unicode escape sequence.*\(22P05\)$/,
  );
  expect(await states()).toEqual({ succeeded: 4, dead: 1 });
  expect(await attempts(poison)).toMatchObject([{ outcome: 'failed', error: result.error, output: null }]);
});

test('an unreachable store is retried for the retry budget only, though heartbeats keep renewing the lease', async () => {
  const [run] = await readyRuns(['h']);
  let firstWriteAt: number | null = null;
  vi.spyOn(db.store, 'completeRuns').mockImplementation(async () => {
    firstWriteAt ??= clock.nowMs();
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  });
  const heartbeat = db.store.heartbeatRuns.bind(db.store);
  const renewals: number[] = [];
  vi.spyOn(db.store, 'heartbeatRuns').mockImplementation(async (p) => {
    const r = await heartbeat(p);
    for (const x of r.renewed) renewals.push(x.leaseExpiresAt.getTime());
    return r;
  });
  // Heartbeats when the test says (each second of fake time), so each renewal is seen to happen.
  const { worker, ended } = newWorker({ h: () => 'done' });
  worker.start();
  while (firstWriteAt === null) await tick();
  expect(firstWriteAt).toBe(T0);
  for (let s = 1; s <= 40 && ended.dropped.length === 0; s++) {
    clock.advance(1000);
    await worker.heartbeatOnce();
    await tick();
  }
  expect(ended.succeeded).toEqual([]);
  expect(ended.dropped.map(([r, reason]) => [r.runId, reason])).toEqual([
    [run!.runId, 'the result could not be recorded within 30000 ms'],
  ]);
  // Given up on time (the first write failed at about T0) while the lease was still live: the old
  // rule, "retry while the lease lasts", would have retried for ever.
  const droppedAt = clock.nowMs();
  expect(droppedAt - T0).toBeGreaterThanOrEqual(30_000);
  expect(droppedAt - T0).toBeLessThanOrEqual(31_000);
  expect(renewals.length).toBeGreaterThanOrEqual(2);
  expect(Math.max(...renewals)).toBeGreaterThan(droppedAt);
  // The run has left the worker: no more renewals, so the lease lapses and the reaper retries it.
  const renewed = renewals.length;
  await tick();
  await worker.heartbeatOnce(true);
  expect(renewals).toHaveLength(renewed);
  expect(worker.inFlight).toBe(0);
});

/**
 * A worker whose completions go to `write` (a store failing, or never answering), stopped with a
 * grace of 1 s once its one run's result is being written: the stop ends within 5 s, the result
 * given up. A retry budget of an hour: only the stop can end the retries.
 */
async function stopWhileRecording(write: () => Promise<never>) {
  const [run] = await readyRuns(['h'], { leaseSeconds: 3600 });
  let writes = 0;
  vi.spyOn(db.store, 'completeRuns').mockImplementation(() => {
    writes += 1;
    return write();
  });
  const { worker, ended } = newWorker({ h: () => 'done' }, { resultRetryMs: 3_600_000 });
  worker.start();
  while (writes === 0) await tick();
  autoAdvance();
  await expect(
    Promise.race([
      worker.stop(1000),
      new Promise((_, reject) => setTimeout(() => reject(new Error('stop hung')), 5000)),
    ]),
  ).resolves.toBeUndefined();
  expect(ended.dropped.map(([r, reason]) => [r.runId, reason])).toEqual([
    [run!.runId, 'worker shutdown before the result was recorded'],
  ]);
  return { worker, writes };
}

test('stop gives up a result the store cannot take after the grace period, instead of hanging', async () => {
  // Before the fix, the stop waited for the lease (an hour here; for ever when the heartbeats of a
  // live worker renew it).
  await stopWhileRecording(async () => {
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  });
  expect(clock.nowMs() - T0).toBeLessThan(60_000);
});

test('stop gives up a result whose write never answers (in flight), instead of hanging', async () => {
  // The database takes the statement and never answers: the result stays in the batch being written.
  const { worker, writes } = await stopWhileRecording(() => new Promise<never>(() => {}));
  expect(writes).toBe(1);
  expect(worker.inFlight).toBe(0);
});

test('a remote worker (HttpLeaseSource) records NUL output and a NUL error sanitised, beside the others', async () => {
  const runs = await readyRuns(['poison', 'throws', 'ok', 'ok']);
  const api = await startApi(db);
  cleanups.push(() => api.close());
  const keys = await keysFor(db, 't');
  const store = new HttpLeaseSource({ url: api.base, key: keys.worker, clock, waitMs: 0, resultLingerMs: 0 });
  const { worker, ended, untilEnded } = newWorker(
    {
      poison: () => ({ output: 'binary\u0000output' }),
      throws: () => {
        throw new PermanentError('bad \u0000 byte');
      },
      ok: () => 'fine',
    },
    { store },
  );
  worker.start();
  await untilEnded(4);
  expect(ended.dropped).toEqual([]);
  expect(ended.succeeded).toHaveLength(3);
  expect(ended.failed.map(([r, f]) => [r.runId, f.state])).toEqual([[runs[1]!.runId, 'dead']]);
  expect(await states()).toEqual({ succeeded: 3, dead: 1 });
  expect(await attempts(runs[0]!.runId)).toMatchObject([
    { outcome: 'succeeded', output: 'binary\uFFFDoutput' },
  ]);
  const [failed] = await attempts(runs[1]!.runId);
  expect(failed.error).toBe('PermanentError: bad \uFFFD byte');
  expect(failed.error_stack).toMatch(/^PermanentError: bad \uFFFD byte\n {4}at /);
});
