// A worker process of the soak (bench/scenarios/soak.mjs): `tock worker` on the database, composed
// here from ../dist so that it can report what `tock worker` has no port for. Two `Worker`s share
// one pool of connections and the database's clock: one claims pool `default` (the steady jobs and
// the herd), one pool `long` (the runs that sleep for minutes and keep their leases by heartbeat).
//
// The handlers keep their own log, the soak's record of what ran: one line per handler call,
//   run_id,job_id,slot_ms,attempt,outcome,due_ms,start_ms,end_ms
// (outcome ok, fail or abort; times on the database's clock), appended to `log` every 500 ms and
// at exit. A fast run fails its first attempt when a hash of its run id says so (`failPerMille`),
// so about that share is retried. Every 10 s a JSON line on stdout gives this process's RSS, its
// event-loop delay p99 over the 10 s, and the time of each claim and heartbeat call to the store
// (the call: one statement's round trip, plus the wait for a pooled connection).
//
// Started with one argument, its settings as JSON: { index, log, fastConcurrency,
// longConcurrency, failPerMille }; DATABASE_URL names the database. SIGTERM stops it: no new
// claims, 2 s for running handlers, the rest aborted and released, the log flushed.

import { createHash } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import v8 from 'node:v8';
import pino from 'pino';
import { databaseClock } from '../../dist/runtime/database.js';
import { createPool, PostgresStore } from '../../dist/store/index.js';
import { Worker } from '../../dist/worker/index.js';

const settings = JSON.parse(process.argv[2]);
const logger = pino({ level: 'silent' });
const pool = createPool(process.env.DATABASE_URL, {
  max: Math.min(settings.fastConcurrency, 16) + 8,
  applicationName: `tock-soak-worker-${settings.index}`,
});
const store = new PostgresStore(pool);
const { clock, sync } = await databaseClock((local) => store.sampleClock(local), logger);
sync.start();
const dbNow = () => performance.timeOrigin + performance.now() + clock.offset.offsetMs;

/** Call times of the store's claims and heartbeats since the last report, ms. */
const calls = { claim: [], heartbeat: [] };
/** The store as the Workers see it: its claims and heartbeats timed. */
const timed = Object.create(store);
for (const [method, list] of [
  ['claimRuns', calls.claim],
  ['heartbeatRuns', calls.heartbeat],
]) {
  timed[method] = async (p) => {
    const t0 = performance.now();
    try {
      return await store[method](p);
    } finally {
      list.push(performance.now() - t0);
    }
  };
}

let pending = [];
const flush = () => {
  if (pending.length === 0) return;
  const text = pending.join('');
  pending = [];
  appendFileSync(settings.log, text);
};
const flusher = setInterval(flush, 500);

/** True for about `failPerMille` in 1000 run ids: those fail their first attempt. */
const failsFirst = (runId) =>
  createHash('sha1').update(runId).digest().readUInt16BE(0) % 1000 < settings.failPerMille;

/** Handlers by name, each logging its call; `due` gives a run's available_at from its claim. */
function handlers(due) {
  const record = (ctx, outcome, start) => {
    pending.push(
      `${ctx.runId},${ctx.jobId},${ctx.scheduledFor.getTime()},${ctx.attempt},${outcome},` +
        `${due(ctx.runId)},${start.toFixed(1)},${dbNow().toFixed(1)}\n`,
    );
  };
  return {
    'soak-fast': (ctx) => {
      const start = dbNow();
      if (ctx.attempt === 1 && failsFirst(ctx.runId)) {
        record(ctx, 'fail', start);
        throw new Error('the soak fails this first attempt on purpose');
      }
      record(ctx, 'ok', start);
    },
    'soak-herd': (ctx) => record(ctx, 'ok', dbNow()),
    'soak-long': async (ctx) => {
      const start = dbNow();
      const ms = ctx.payload?.sleepMs ?? 1000;
      const aborted = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        ctx.signal.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            resolve(true);
          },
          { once: true },
        );
      });
      record(ctx, aborted ? 'abort' : 'ok', start);
    },
  };
}

const counts = { dropped: 0, leaseLost: 0, errors: 0 };
const dueOf = new Map();
const due = (runId) => {
  const d = dueOf.get(runId);
  dueOf.delete(runId);
  return d ?? '';
};
const all = handlers(due);
const workers = [
  new Worker({
    store: timed,
    clock,
    logger,
    pool: 'default',
    concurrency: settings.fastConcurrency,
    workerId: `soak-${settings.index}-fast`,
    pollIntervalMs: 500,
    handlers: { 'soak-fast': all['soak-fast'], 'soak-herd': all['soak-herd'] },
  }),
  new Worker({
    store: timed,
    clock,
    logger,
    pool: 'long',
    concurrency: settings.longConcurrency,
    prefetch: 0,
    workerId: `soak-${settings.index}-long`,
    pollIntervalMs: 1000,
    handlers: { 'soak-long': all['soak-long'] },
  }),
];
for (const w of workers) {
  // Emitted synchronously just before the handler is called.
  w.on('run:started', (run) => dueOf.set(run.runId, run.availableAt.getTime()));
  w.on('run:dropped', () => (counts.dropped += 1));
  w.on('lease:lost', () => (counts.leaseLost += 1));
  w.on('error', () => (counts.errors += 1));
  w.start();
}

const lag = monitorEventLoopDelay({ resolution: 10 });
lag.enable();
/** count, mean, p99 (nearest rank) and max of a list of ms, and empties it. */
const summary = (list) => {
  const xs = list.splice(0).sort((a, b) => a - b);
  const n = xs.length;
  if (n === 0) return { count: 0, mean: null, p99: null, max: null };
  return {
    count: n,
    mean: xs.reduce((a, b) => a + b, 0) / n,
    p99: xs[Math.min(n - 1, Math.ceil(0.99 * n) - 1)],
    max: xs[n - 1],
  };
};
/** RssAnon and RssFile of /proc/self/status, bytes (null off Linux). */
const residentKinds = () => {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) * 1024 || null;
    return { anon: kb('RssAnon'), file: kb('RssFile') };
  } catch {
    return { anon: null, file: null };
  }
};
const report = setInterval(() => {
  const memory = process.memoryUsage();
  const heap = v8.getHeapStatistics();
  const young = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
  const line = {
    at: dbNow(),
    rss: memory.rss,
    heapUsed: memory.heapUsed,
    heapTotal: memory.heapTotal,
    // The young generation's pages that are resident (V8 reserves its semi-spaces up front and
    // they become resident as they are first written).
    young: young?.physical_space_size ?? null,
    // Memory held outside the JS heap by objects in it (Buffers and other ArrayBuffers included).
    external: memory.external,
    // Every V8 space's resident pages, and what V8 itself holds in the malloc heap.
    v8Resident: heap.total_physical_size,
    malloced: heap.malloced_memory,
    ...residentKinds(),
    lagP99Ms: lag.percentile(99) / 1e6,
    claim: summary(calls.claim),
    heartbeat: summary(calls.heartbeat),
    running: workers.map((w) => w.inFlight),
    ...counts,
  };
  lag.reset();
  process.stdout.write(`${JSON.stringify(line)}\n`);
}, 10_000);
process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid })}\n`);

let stopping = false;
process.on('SIGTERM', async () => {
  if (stopping) return;
  stopping = true;
  clearInterval(report);
  await Promise.all(workers.map((w) => w.stop(2000)));
  clearInterval(flusher);
  flush();
  await sync.stop();
  await pool.end();
  process.exit(0);
});
