// Shared by the timing scenarios (latency, cron, herd, definitions): time on the database's clock,
// start delays and their percentiles, Tock's scheduler and workers in this process, bulk job
// registration, and durations from the command line.
//
// Every delay is measured on the database server's clock, the one Tock schedules by: the offset
// from this process's clock is measured once (round trips through `PostgresStore.sampleClock`,
// as `tock server` does) and `dbNow()` reads it with sub-millisecond resolution.
import pino from 'pino';
import { parseDuration } from '../dist/core/index.js';
import { databaseClock } from '../dist/runtime/database.js';
import { TickLoop } from '../dist/scheduler/index.js';
import { createPool, MAX_BULK_JOBS, PostgresStore } from '../dist/store/index.js';
import { Worker } from '../dist/worker/index.js';
import { fmt } from './lib.mjs';

export const silent = pino({ level: 'silent' });
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/**
 * The database's clock, as Tock's `OffsetClock` (`clock`, for Tock's loops: whole ms) and as
 * `dbNow()` (fractional ms, for measuring). One connection to `url`, closed before returning.
 */
export async function databaseTime(url) {
  const pool = createPool(url, { max: 1, applicationName: 'tock-bench-clock' });
  try {
    const store = new PostgresStore(pool);
    const { clock } = await databaseClock((local) => store.sampleClock(local), silent);
    const { offsetMs, uncertaintyMs } = clock.offset;
    const dbNow = () => performance.timeOrigin + performance.now() + offsetMs;
    return { clock, dbNow, offsetMs, uncertaintyMs };
  } finally {
    await pool.end();
  }
}

/** Start delays in ms, kept in a typed array (a million fit in 8 MB). */
export class Delays {
  constructor(capacity = 1024) {
    this.values = new Float64Array(capacity);
    this.count = 0;
  }

  add(ms) {
    if (this.count === this.values.length) {
      const bigger = new Float64Array(this.values.length * 2);
      bigger.set(this.values);
      this.values = bigger;
    }
    this.values[this.count++] = ms;
  }

  /** count, min, p50, p95, p99, max (nearest rank), mean. All null when empty. */
  summary() {
    return percentiles(this.values.subarray(0, this.count));
  }
}

/** Nearest-rank percentiles of a list of numbers. */
export function percentiles(values) {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  const at = (q) => (n === 0 ? null : sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]);
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: n,
    min: n === 0 ? null : sorted[0],
    p50: at(0.5),
    p95: at(0.95),
    p99: at(0.99),
    max: n === 0 ? null : sorted[n - 1],
    mean: n === 0 ? null : sum / n,
  };
}

/** Median, min and max over rounds of `key` in each round's figures (nulls left out). */
export function overRounds(rounds, key) {
  const xs = rounds.map((r) => (typeof key === 'function' ? key(r) : r[key])).filter((x) => x != null);
  if (xs.length === 0) return { median: null, min: null, max: null };
  const sorted = [...xs].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)], min: sorted[0], max: sorted[sorted.length - 1] };
}

/** `p50 / p99 / max` of a delay summary, for a progress line. */
export const fmtDelays = (s, digits = 1) =>
  s.count === 0
    ? 'no starts'
    : `p50 ${fmt(s.p50, digits)} / p99 ${fmt(s.p99, digits)} / max ${fmt(s.max, digits)} ms`;

/**
 * A duration from the command line or the environment: `ctx.options.duration` (run.mjs's
 * `--duration`, where it passes one) or `TOCK_BENCH_DURATION` (`60s`, `1m`, `500ms`), else `fallbackMs`.
 */
export function durationOption(ctx, fallbackMs) {
  const raw = ctx.options?.duration ?? process.env.TOCK_BENCH_DURATION;
  if (raw === undefined || raw === '') return { ms: fallbackMs, given: false };
  const ms = typeof raw === 'number' ? raw : parseDuration(String(raw));
  if (!(ms >= 1000)) throw new Error(`--duration must be at least 1s (got ${raw})`);
  return { ms, given: true };
}

/**
 * Registers `jobs` (JobInput[]) for `tenantId` through the bulk path, `MAX_BULK_JOBS` a call,
 * `inFlight` calls at once. Returns the ms it took.
 */
export async function registerJobs(store, { tenantId, jobs, now, inFlight = 2 }) {
  const t0 = performance.now();
  let next = 0;
  const lane = async () => {
    while (next < jobs.length) {
      const batch = jobs.slice(next, next + MAX_BULK_JOBS);
      next += MAX_BULK_JOBS;
      await store.upsertJobs({ tenantId, jobs: batch, now });
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return performance.now() - t0;
}

/**
 * Tock as `tock dev` runs it, in this process: a `TickLoop` over every shard on a pool of its own
 * (no shard leases: one scheduler) and `workers` Workers sharing `concurrency`, each on a pool
 * the size `tock worker` gives it (min(concurrency, 16) + 4), all on the database's clock.
 * `onStart(run, startedMs)` is called as each handler starts, with the claimed run (its
 * `availableAt` is when it became due) and `dbNow()`. Tick figures accumulate in `ticks`.
 */
export function startTock({
  url,
  time,
  workers = 2,
  concurrency = 100,
  prefetch = 0,
  claimAheadMs = 250,
  pollIntervalMs = 500,
  tick = { intervalMs: 500, lookaheadMs: 1000, batchSize: 1000 },
  onStart,
  handler = 'noop',
}) {
  const each = Math.floor(concurrency / workers);
  const ticks = [];
  const errors = [];
  // No tick loop when another process schedules (tick: null).
  const tickPool = tick ? createPool(url, { max: 2, applicationName: 'tock-bench-tick' }) : null;
  const loop = tick
    ? new TickLoop({ store: new PostgresStore(tickPool), clock: time.clock, logger: silent, ...tick })
    : null;
  loop?.on('tick', (t) => {
    if (t.jobs > 0) ticks.push({ at: t.now, jobs: t.jobs, created: t.created.length, ms: t.durationMs });
  });
  loop?.on('error', (err) => errors.push(err));
  const running = [];
  for (let i = 0; i < workers; i++) {
    const pool = createPool(url, { max: Math.min(each, 16) + 4, applicationName: 'tock-bench-worker' });
    const claimed = new Map();
    const worker = new Worker({
      store: new PostgresStore(pool),
      clock: time.clock,
      logger: silent,
      concurrency: each,
      prefetch: Math.floor(prefetch / workers),
      claimAheadMs,
      pollIntervalMs,
      workerId: `bench-${i}`,
      handlers: {
        [handler]: (ctx) => {
          const started = time.dbNow();
          const run = claimed.get(ctx.runId);
          claimed.delete(ctx.runId);
          onStart(run, started);
        },
      },
    });
    // Emitted synchronously just before the handler is called: the claimed run, with `availableAt`.
    worker.on('run:started', (run) => claimed.set(run.runId, run));
    worker.on('error', (err) => errors.push(err));
    running.push({ pool, worker });
  }
  for (const { worker } of running) worker.start();
  loop?.start();
  return {
    label: `Tock: tick loop + ${workers} Worker${workers > 1 ? 's' : ''} × ${each}`,
    settings: {
      ...tick,
      workers,
      concurrencyEach: each,
      prefetchEach: Math.floor(prefetch / workers),
      claimAheadMs,
      pollIntervalMs,
      poolMaxEach: Math.min(each, 16) + 4,
    },
    ticks,
    errors,
    async stop() {
      await loop?.stop();
      await Promise.all(running.map(({ worker }) => worker.stop(1000)));
      await Promise.all([tickPool?.end(), ...running.map(({ pool }) => pool.end())]);
    },
  };
}

/** Resolves when `check()` is true (checked every `everyMs`) or at `deadlineMs` on `dbNow`; says which. */
export async function waitFor(check, { dbNow, deadlineMs, everyMs = 20 }) {
  for (;;) {
    if (await check()) return true;
    if (dbNow() >= deadlineMs) return false;
    await sleep(Math.min(everyMs, deadlineMs - dbNow()));
  }
}

/** The resident set size of this process, MiB. */
export const rssMiB = () => process.memoryUsage().rss / 2 ** 20;
