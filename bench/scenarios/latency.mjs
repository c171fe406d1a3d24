// Scenario 2 of issue 7 (and issue 6's "start delay p50/p99/max at a steady 1,000 runs/s for
// 60 s"): runs become due at a steady rate and each system starts them; the figure is start − due
// on the database's clock, per run.
//
// Tock: `rate` jobs `@every 1s` with `jitterSeconds: 1`, so each job's runs fall at a fixed offset
// in every second and together they make `rate` runs/s, evenly spread. Its tick loop and Workers
// run in this process, as `tock dev` runs them (defaults of `tock server`/`tock worker`: tick 500 ms,
// lookahead 1 s, batch 1000, poll 500 ms); due = the run's `available_at` (slot + jitter).
// Peers: the same due instants, enqueued as delayed jobs (graphile-worker `runAt`, pg-boss
// `startAfter`, BullMQ `delay` on Redis) one second ahead, in batches every 100 ms, by a loop in this process; due = the
// instant asked for. Every system gets a no-op handler; each peer's first row runs at the settings
// its own docs give for speed, and Tock and the other rows at the same total worker concurrency.
// A window counts the runs due in it; the system kept up when every one of them started by the
// end of the window plus a drain time.
import { Worker as BullWorker } from 'bullmq';
import {
  Logger as GraphileLogger,
  makeWorkerUtils,
  run as runGraphile,
  runMigrations,
} from 'graphile-worker';
import { PgBoss } from 'pg-boss';
import { jitterOffsetMs } from '../../dist/core/index.js';
import { createPool, migrate, PostgresStore } from '../../dist/store/index.js';
import {
  closeBullQueue,
  fmt,
  fmtRange,
  markdownTable,
  openBullQueue,
  PEER_SETTINGS,
  recreateDatabase,
  redisConnection,
  redisUrl,
} from '../lib.mjs';
import {
  Delays,
  databaseTime,
  durationOption,
  fmtDelays,
  overRounds,
  registerJobs,
  sleep,
  startTock,
  waitFor,
} from '../timing.mjs';

const TENANT = 'bench';
/** Runs still missing this long after the window's last due instant: the system did not keep up. */
const DRAIN_MS = 5000;
/** Peers' delayed jobs are enqueued this far ahead of their due instant (Tock's lookahead). */
const ENQUEUE_AHEAD_MS = 1000;
const ENQUEUE_EVERY_MS = 100;

/** The due instants of a window: job i's runs fall at `offset_i` into every second of it, sorted. */
function dueInstants({ t0, rate, seconds }) {
  const offsets = Array.from({ length: rate }, (_, i) => jitterOffsetMs(TENANT, `lat-${i}`, 1));
  const dues = new Float64Array(rate * seconds);
  let k = 0;
  for (let s = 0; s < seconds; s++) for (const o of offsets) dues[k++] = t0 + s * 1000 + o;
  return dues.sort();
}

/** Tock: jobs `@every 1s` with jitter 1 s, armed to fire from the window's first second. */
function tock({ workers, concurrency }) {
  let url;
  let admin;
  const each = concurrency / workers;
  return {
    name: `tock-${workers}x${each}`,
    label: `Tock, tick loop + ${workers} Worker${workers > 1 ? 's' : ''} × ${each}`,
    database: 'bench_latency_tock',
    settings: {
      process: 'in this process, as tock dev (tick loop without shard leases, Workers on their own pools)',
      tickIntervalMs: 500,
      lookaheadMs: 1000,
      tickBatch: 1000,
      workers,
      concurrencyEach: each,
      pollIntervalMs: 500,
      jobs: '@every 1s, jitterSeconds 1',
    },
    async setup(databaseUrl) {
      url = databaseUrl;
      admin = createPool(url, { max: 2, applicationName: 'tock-bench-admin' });
      await migrate(admin);
    },
    async window({ t0, rate, seconds, time, record }) {
      await admin.query('TRUNCATE runs, attempts, attempt_progress, run_queue, run_claims');
      await admin.query('DELETE FROM jobs');
      const jobs = Array.from({ length: rate }, (_, i) => ({
        jobId: `lat-${i}`,
        schedule: '@every 1s',
        handler: 'noop',
        jitterSeconds: 1,
      }));
      await registerJobs(new PostgresStore(admin), { tenantId: TENANT, jobs, now: time.clock.nowMs() });
      // Nothing before the window: the first slot of every job is its first second.
      await admin.query('UPDATE jobs SET next_run_at = $1', [new Date(t0)]);
      await admin.query('VACUUM ANALYZE jobs, runs, attempts');
      const end = t0 + seconds * 1000;
      const stack = startTock({
        url,
        time,
        workers,
        concurrency,
        onStart: (run, started) => {
          if (run.scheduledFor.getTime() < end) record(run.availableAt.getTime(), started);
        },
      });
      return {
        errors: stack.errors,
        stop: async () => {
          await stack.stop();
          return { ticks: stack.ticks.length };
        },
      };
    },
    async teardown() {
      await admin?.end();
    },
  };
}

/**
 * graphile-worker 0.18. A job with a future `run_at` is found only by polling (the insert's NOTIFY
 * comes before it is due), so `pollInterval` bounds its start delay. With a local queue the pool
 * polls once per `pollInterval` and hands the batch to its workers; without one, each of the pool's
 * `concurrentJobs` workers polls on its own when idle, which spreads the polls. `role` says why the
 * row is there (its label shows it).
 */
function graphile({ concurrency, pollInterval, maxPoolSize, localQueueSize, completeJobBatchDelay, role }) {
  let url;
  let utils;
  const logger = new GraphileLogger(() => () => {});
  const worker = {
    concurrentJobs: concurrency,
    maxPoolSize,
    pollInterval,
    completeJobBatchDelay,
    failJobBatchDelay: completeJobBatchDelay,
    preparedStatements: true,
    useNodeTime: false,
    ...(localQueueSize ? { localQueue: { size: localQueueSize } } : {}),
  };
  return {
    name: `graphile-${concurrency}-poll${pollInterval}${localQueueSize ? `-queue${localQueueSize}` : ''}`,
    label:
      `graphile-worker, concurrency ${concurrency}, pollInterval ${pollInterval} ms` +
      `${localQueueSize ? `, local queue ${localQueueSize}` : ''}, maxPoolSize ${maxPoolSize} (${role})`,
    database: 'bench_latency_graphile',
    settings: { ...worker, enqueue: 'workerUtils.addJobs with runAt' },
    async setup(databaseUrl) {
      url = databaseUrl;
      await runMigrations({ connectionString: url, logger });
      utils = await makeWorkerUtils({ connectionString: url, logger });
    },
    async window({ time, record }) {
      await utils.withPgClient(async (c) => {
        await c.query('DELETE FROM graphile_worker._private_jobs');
        await c.query('VACUUM ANALYZE graphile_worker._private_jobs');
      });
      const errors = [];
      const runner = await runGraphile({
        connectionString: url,
        noHandleSignals: true,
        logger,
        taskList: { lat: async (payload) => record(payload.d, time.dbNow()) },
        preset: { worker },
      });
      runner.events.on('job:error', ({ error }) => errors.push(error));
      return {
        errors,
        enqueue: (dues) =>
          utils.addJobs(Array.from(dues, (d) => ({ identifier: 'lat', payload: { d }, runAt: new Date(d) }))),
        stop: async () => {
          await runner.stop();
          return {};
        },
      };
    },
    async teardown() {
      await utils?.release();
    },
  };
}

/**
 * pg-boss 12: one `work()` call runs `localConcurrency` loops; each fetches up to `batchSize` jobs
 * whose `start_after` has passed, runs the batch, and fetches again at once while its fetches come
 * back full (`burstWhenBatchFull`), otherwise after the rest of `pollingIntervalSeconds` (0.5 s is
 * the least it accepts). Its LISTEN/NOTIFY wake-up does not apply: it fires for jobs that are
 * ready when inserted, and these are inserted a second early. `role` says why the row is there.
 */
function pgBoss({ localConcurrency, batchSize, burstWhenBatchFull, pollingIntervalSeconds, max, role }) {
  let url;
  return {
    name: `pg-boss-${localConcurrency}x${batchSize}${burstWhenBatchFull ? '-burst' : ''}`,
    label:
      `pg-boss, localConcurrency ${localConcurrency} × batchSize ${batchSize}` +
      `${burstWhenBatchFull ? ', burstWhenBatchFull' : ''}, polling ${pollingIntervalSeconds} s (${role})`,
    database: 'bench_latency_pgboss',
    settings: {
      localConcurrency,
      batchSize,
      burstWhenBatchFull,
      pollingIntervalSeconds,
      max,
      supervise: false,
      schedule: false,
      enqueue: 'boss.insert with startAfter',
    },
    async setup(databaseUrl) {
      url = databaseUrl;
    },
    async window({ time, record }) {
      const boss = new PgBoss({ connectionString: url, max, supervise: false, schedule: false });
      const errors = [];
      boss.on('error', (err) => errors.push(err));
      await boss.start();
      // Deletes the queue with its jobs (12 deletes a queue's jobs itself).
      await boss.deleteQueue('lat');
      await boss.createQueue('lat');
      await boss.getDb().executeSql('VACUUM ANALYZE pgboss.job', []);
      await boss.work(
        'lat',
        { localConcurrency, batchSize, burstWhenBatchFull, pollingIntervalSeconds },
        async (jobs) => {
          const started = time.dbNow();
          for (const job of jobs) record(job.data.d, started);
        },
      );
      return {
        errors,
        enqueue: (dues) =>
          boss.insert(
            'lat',
            Array.from(dues, (d) => ({ data: { d }, startAfter: new Date(d) })),
          ),
        stop: async () => {
          // Waits for every loop to end, its fetch in flight included, before the pool closes.
          await boss.offWork('lat');
          await boss.stop({ graceful: false, timeout: 2000 });
          return {};
        },
      };
    },
    async teardown() {},
  };
}

/**
 * BullMQ on Redis (the issue's reference at 1,000/s: p99 26 ms): one `Worker` with the total
 * concurrency (100 is within the 100–300 its docs call standard,
 * https://docs.bullmq.io/guide/parallelism-and-concurrency); delayed jobs added with `addBulk` and
 * `delay` = due − now, on the same schedule as the PostgreSQL peers. Completed jobs are kept (its
 * default).
 */
function bullmq({ concurrency }) {
  let queue;
  const queueName = 'tock-bench-latency';
  return {
    name: `bullmq-${concurrency}`,
    label: `BullMQ on Redis, concurrency ${concurrency}`,
    database: null,
    settings: {
      concurrency,
      redis: redisUrl(),
      removeOnComplete: false,
      enqueue: 'queue.addBulk with delay',
    },
    async setup() {
      queue = await openBullQueue(queueName);
    },
    async window({ time, record }) {
      await queue.obliterate({ force: true });
      const errors = [];
      const worker = new BullWorker(queueName, async (job) => record(job.data.d, time.dbNow()), {
        connection: redisConnection(),
        concurrency,
      });
      worker.on('error', (err) => errors.push(err));
      await worker.waitUntilReady();
      return {
        errors,
        enqueue: (dues) => {
          const now = time.dbNow();
          return queue.addBulk(
            Array.from(dues, (d) => ({
              name: 'lat',
              data: { d },
              opts: { delay: Math.max(0, Math.round(d - now)) },
            })),
          );
        },
        stop: async () => {
          await worker.close();
          return {};
        },
      };
    },
    async teardown() {
      await closeBullQueue(queue);
    },
  };
}

/**
 * Feeds `dues` (sorted) to `enqueue` `ENQUEUE_AHEAD_MS` ahead of each, in batches every 100 ms.
 * Returns how late the enqueuing got: the most any job was inserted after its due instant (ms;
 * negative: always ahead). A late insert counts against the system, whose database it waited on.
 */
async function enqueueAhead({ dues, enqueue, dbNow, stopped }) {
  let next = 0;
  let late = Number.NEGATIVE_INFINITY;
  while (next < dues.length && !stopped()) {
    const horizon = dbNow() + ENQUEUE_AHEAD_MS + ENQUEUE_EVERY_MS;
    let end = next;
    while (end < dues.length && dues[end] < horizon) end++;
    for (let i = next; i < end; i += 5000) {
      await enqueue(dues.subarray(i, Math.min(end, i + 5000)));
      late = Math.max(late, dbNow() - dues[i]);
    }
    next = end;
    if (next < dues.length) await sleep(ENQUEUE_EVERY_MS);
  }
  return late;
}

/** One window of `seconds` at `rate` runs/s for system `s`: its start delays and whether it kept up. */
async function measureWindow(s, { rate, seconds, time }) {
  // Far enough ahead to set up (register jobs, start workers) before the first due instant.
  const t0 = Math.ceil((time.dbNow() + 3000) / 1000) * 1000;
  const dues = dueInstants({ t0, rate, seconds });
  const expected = dues.length;
  const delays = new Delays(expected);
  const lastDue = dues[dues.length - 1];
  let lastStart = null;
  let counting = true; // runs started after the deadline (while stopping) are not counted
  const record = (due, started) => {
    if (!counting) return;
    delays.add(started - due);
    lastStart = started;
  };
  const running = await s.window({ t0, rate, seconds, time, record });
  let stop = false;
  const feeding = running.enqueue
    ? enqueueAhead({ dues, enqueue: running.enqueue, dbNow: time.dbNow, stopped: () => stop })
    : Promise.resolve(null);
  let after;
  let enqueueLateMs = null;
  try {
    const deadline = lastDue + DRAIN_MS;
    await waitFor(() => delays.count >= expected || running.errors.length > 0, {
      dbNow: time.dbNow,
      deadlineMs: deadline,
      everyMs: 100,
    });
  } finally {
    counting = false;
    stop = true;
    enqueueLateMs = await feeding.catch((err) => {
      running.errors.push(err);
      return null;
    });
    after = await running.stop();
  }
  if (running.errors.length > 0) throw running.errors[0];
  const summary = delays.summary();
  return {
    rate,
    seconds,
    expected,
    started: delays.count,
    keptUp: delays.count >= expected && lastStart !== null && lastStart <= lastDue + DRAIN_MS,
    drainMs: lastStart === null ? null : lastStart - lastDue,
    enqueueLateMs,
    ...summary,
    ...after,
  };
}

/**
 * The systems compared. Without `--only`, those not marked `extra`; with it, every system whose
 * name starts with one of its prefixes (`--only tock` runs both Tock layouts).
 */
function contestants({ concurrency, only }) {
  const all = [
    tock({ workers: 1, concurrency }),
    { ...tock({ workers: 2, concurrency }), extra: true },
    // Its performance page's settings (https://worker.graphile.org/docs/performance), which name no
    // pollInterval: 100 ms rather than its default 2000 ms, since only polling finds these jobs.
    graphile({ ...PEER_SETTINGS.graphilePerformancePage, pollInterval: 100 }),
    // At Tock's concurrency without a local queue: each idle worker polls, so the polls spread out
    // and a due job waits less than for the pool's one poll above. maxPoolSize 10, its default: its
    // docs' rule (the larger of 10 and concurrency + 2) would pass the server's max_connections (100).
    graphile({
      concurrency,
      maxPoolSize: 10,
      completeJobBatchDelay: 0,
      pollInterval: 100,
      role: 'Tock’s concurrency, polls spread over its workers',
    }),
    // Its performance page's settings at its default pollInterval.
    {
      ...graphile({
        ...PEER_SETTINGS.graphilePerformancePage,
        pollInterval: 2000,
        role: 'its performance page’s settings, default pollInterval',
      }),
      extra: true,
    },
    // As in the throughput scenario: burstWhenBatchFull, the concurrency in 2 loops.
    pgBoss(PEER_SETTINGS.pgBossBacklog(concurrency)),
    bullmq({ concurrency }),
  ];
  return only ? all.filter((c) => only.some((o) => c.name.startsWith(o))) : all.filter((c) => !c.extra);
}

export default {
  name: 'latency',
  description:
    'runs due at a steady 200/s and 1,000/s: start − due p50/p95/p99/max, and whether each keeps up',
  async run(ctx) {
    const concurrency = ctx.options.concurrency ?? 100;
    const duration = durationOption(ctx, 0);
    const windows = ctx.smoke
      ? [{ rate: 200, seconds: duration.given ? duration.ms / 1000 : 3 }]
      : [
          { rate: 200, seconds: duration.given ? duration.ms / 1000 : 30 },
          { rate: 1000, seconds: duration.given ? duration.ms / 1000 : 60 },
        ];
    for (const w of windows) w.seconds = Math.round(w.seconds);
    const systems = contestants({ concurrency, only: ctx.options.only });
    if (systems.length === 0) throw new Error(`--only ${ctx.options.only} matches no system`);
    const databases = new Map();
    for (const s of systems) {
      if (s.database && !databases.has(s.database))
        databases.set(s.database, await recreateDatabase(ctx.databaseUrl, s.database));
      await s.setup(s.database ? databases.get(s.database) : null);
      ctx.log(`${s.label}: ${JSON.stringify(s.settings)}`);
    }
    const time = await databaseTime(ctx.databaseUrl);
    ctx.log(
      `database clock offset ${fmt(time.offsetMs, 2)} ms (± ${fmt(time.uncertaintyMs, 2)}); ` +
        `windows: ${windows.map((w) => `${w.rate}/s × ${w.seconds} s`).join(', ')}`,
    );
    const results = [];
    try {
      for (const w of windows) {
        for (const s of systems) results.push({ system: s, window: w, rounds: [] });
      }
      for (let r = 1; r <= ctx.rounds; r++) {
        for (const res of results) {
          const f = await measureWindow(res.system, { ...res.window, time });
          res.rounds.push(f);
          ctx.log(
            `round ${r}/${ctx.rounds} ${fmt(res.window.rate)}/s × ${res.window.seconds} s, ${res.system.label}: ` +
              `${fmtDelays(f)}; started ${fmt(f.started)}/${fmt(f.expected)}` +
              `${f.keptUp ? '' : ' — did NOT keep up'}` +
              (f.drainMs === null ? '' : `, last start ${fmt(f.drainMs)} ms after the last due`) +
              (f.enqueueLateMs > 0 ? `; enqueuing fell ${fmt(f.enqueueLateMs)} ms behind` : ''),
          );
          await sleep(500);
        }
      }
    } finally {
      for (const s of systems) await s.teardown();
    }
    const out = results.map((res) => ({
      name: res.system.name,
      label: res.system.label,
      rate: res.window.rate,
      seconds: res.window.seconds,
      settings: res.system.settings,
      rounds: res.rounds,
      p50: overRounds(res.rounds, 'p50'),
      p95: overRounds(res.rounds, 'p95'),
      p99: overRounds(res.rounds, 'p99'),
      max: overRounds(res.rounds, 'max'),
      keptUpRounds: res.rounds.filter((f) => f.keptUp).length,
    }));
    const table = markdownTable(
      [
        `runs/s × s (concurrency ${concurrency})`,
        'system',
        'p50 ms',
        'p95 ms',
        'p99 ms',
        'max ms',
        'started / due',
        'kept up',
      ],
      out.map((o) => [
        `${fmt(o.rate)}/s × ${o.seconds} s`,
        o.label,
        fmtRange(o.p50, 1),
        fmtRange(o.p95, 1),
        fmtRange(o.p99, 1),
        fmtRange(o.max, 0),
        `${fmt(overRounds(o.rounds, 'started').median)} / ${fmt(o.rounds[0].expected)}`,
        `${o.keptUpRounds}/${o.rounds.length}`,
      ]),
    );
    const notes = [];
    const target = out
      .filter((o) => o.name.startsWith('tock-') && o.rate === 1000)
      .map(
        (o) =>
          `${o.label} at 1,000/s: p99 ${fmt(o.p99.median, 1)} ms (target < 25 ms: ${o.p99.median < 25 && o.keptUpRounds === o.rounds.length ? 'met' : 'NOT met'})`,
      );
    notes.push(...target);
    for (const t of target) ctx.log(t);
    notes.push(
      'Delay = handler start − due, both on the database server’s clock (offset measured once). Due: Tock, the run’s available_at (slot + the job’s jitter offset); peers, the runAt/startAfter asked for.',
      `Kept up: every run due in the window started within ${DRAIN_MS / 1000} s of the window’s last due instant. Figures are median (min–max) over rounds.`,
      'Each system’s workers, its tick loop or enqueuer, and this harness share one Node process and the machine with PostgreSQL.',
      'BullMQ runs on the machine’s Redis (REDIS_URL, default redis://127.0.0.1:6379), which keeps nothing on disk; its due instants use the same database clock as the others (delay = due − now when added). The issue quotes p99 26 ms at 1,000/s for it.',
      'Peers’ jobs are inserted by a loop in this process one second ahead of their due instant; when the database is too busy for the inserts to keep that lead, the progress line says how far the enqueuing fell behind (those runs start late on that account).',
      `Window length: ${duration.given ? 'set by --duration / TOCK_BENCH_DURATION' : 'the defaults (30 s at 200/s, 60 s at 1,000/s; smoke 3 s); TOCK_BENCH_DURATION=60s (or a --duration passed on by run.mjs) sets every window'}.`,
      'pg-boss: a work() loop polls at most twice a second (its minimum pollingIntervalSeconds is 0.5 s); with burstWhenBatchFull it fetches again at once while a fetch comes back full, so its 2 loops drain whatever became due since their last poll. Without it, each loop takes one batch a poll: 100 jobs in flight cap it at 200 runs/s. Its LISTEN/NOTIFY wake-up (useListenNotify) fires only for jobs ready when inserted, not for these.',
      'graphile-worker: a job with a future run_at is found only by polling (its NOTIFY fires at insert, before the job is due); pollInterval 100 ms (default 2000 ms), polled by the pool for its local queue, or by each idle worker without one.',
    );
    return {
      settings: { windows, concurrency, drainMs: DRAIN_MS, rounds: ctx.rounds },
      systems: out,
      table,
      notes,
    };
  },
};
