// Scenario 1 of issue 7: a backlog of ready runs drained by in-process workers with a no-op
// handler. Every system runs on the same PostgreSQL, in a database of its own; each peer's first
// row runs at the settings its own docs give for speed, and Tock and the other rows with the same
// total worker concurrency. The rate is runs/s from the first handler call (the first claim's
// answer) until the database says the last run is complete.
import { Worker as BullWorker } from 'bullmq';
import {
  Logger as GraphileLogger,
  makeWorkerUtils,
  run as runGraphile,
  runMigrations,
} from 'graphile-worker';
import { PgBoss } from 'pg-boss';
import pino from 'pino';
import { SystemClock } from '../../dist/core/index.js';
import { createPool, migrate, PostgresStore } from '../../dist/store/index.js';
import { runClaim } from '../../dist/store/queries/claims.js';
import { runCompleteMany } from '../../dist/store/queries/runs.js';
import { Worker } from '../../dist/worker/index.js';
import {
  closeBullQueue,
  cpuDelta,
  fmt,
  fmtRange,
  markdownTable,
  openBullQueue,
  PEER_SETTINGS,
  recreateDatabase,
  redisConnection,
  redisUrl,
  roundRatios,
  seedBacklog,
  serverCpuSync,
  statements,
  summarise,
  waitUntil,
  walPosition,
} from '../lib.mjs';

const clock = new SystemClock();
const silent = pino({ level: 'silent' });

/**
 * Counts handler calls; `all` resolves when `n` runs have been handed to handlers. The first call
 * starts the clock and samples the CPU time of this process and of the database server (`server`:
 * the name of its processes, `postgres` or `redis-server`).
 */
class Drain {
  constructor(n, server) {
    this.n = n;
    this.server = server;
    this.count = 0;
    this.first = null;
    this.all = new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  hit(k = 1) {
    if (this.first === null) {
      this.first = performance.now();
      this.cpu = { node: process.cpuUsage(), server: serverCpuSync(this.server) };
    }
    this.count += k;
    if (this.count >= this.n) this.resolve();
  }
}

/**
 * One measured drain: `start(drain)` starts the workers, `countDone()` asks the database how many
 * runs are complete, `stop()` stops the workers. The clock runs from the first handler call until
 * the database confirms every run complete (stopping the workers is not timed). CPU per run: this
 * process's (the workers', and the polls of `countDone`) and the database server's (every process
 * named `server`), over the same span. `walBytes()`, where given, reads the server's WAL position: WAL written per run over
 * the drain (from before the workers start). Statements per run: what this process's `pg` clients
 * sent from the start until the last completion is confirmed, less the confirming polls.
 */
async function measure({ n, timeoutMs, start, countDone, stop, server = 'postgres', walBytes }) {
  const drain = new Drain(n, server);
  const wal0 = walBytes ? await walBytes() : null;
  const t0 = performance.now();
  let done = 0;
  let t1;
  let cpu;
  let walPerRun = null;
  let polls = 0;
  let sent;
  statements.count = 0;
  statements.on = true;
  try {
    await start(drain);
    const timeout = new Promise((_, reject) => {
      const t = setTimeout(
        () => reject(new Error(`handlers saw ${drain.count} of ${n} runs after ${timeoutMs / 1000} s`)),
        timeoutMs,
      );
      drain.all.finally(() => clearTimeout(t));
    });
    await Promise.race([drain.all, timeout]);
    await waitUntil(
      async () => {
        polls += 1;
        done = await countDone();
        return done >= n;
      },
      { timeoutMs: 30_000, what: `the database to show ${n} runs complete (it shows ${done})` },
    );
    t1 = performance.now();
    statements.on = false;
    sent = statements.count - polls;
    const node = process.cpuUsage(drain.cpu.node);
    const serverMs = cpuDelta(drain.cpu.server, serverCpuSync(server));
    cpu = {
      nodeUs: (node.user + node.system) / n,
      serverUs: serverMs === null ? null : (serverMs * 1000) / n,
    };
    if (walBytes) walPerRun = ((await walBytes()) - wal0) / n;
  } finally {
    statements.on = false;
    await stop();
  }
  if (done !== n) throw new Error(`completed ${done} of ${n}`);
  return {
    runsPerSecond: n / ((t1 - drain.first) / 1000),
    seconds: (t1 - drain.first) / 1000,
    startupMs: drain.first - t0,
    handlerCalls: drain.count,
    nodeCpuUsPerRun: cpu.nodeUs,
    serverCpuUsPerRun: cpu.serverUs,
    walBytesPerRun: walPerRun,
    // BullMQ speaks to Redis: no PostgreSQL statements.
    statementsPerRun: server === 'postgres' ? sent / n : null,
  };
}

/** Tock's `Worker`: `workers` Workers, each on a pool of its own, sharing `concurrency`. */
function tockWorkers({ workers, concurrency, poolMax, pollIntervalMs, prefetch = 0 }) {
  const each = concurrency / workers;
  const held =
    prefetch === 'auto' ? ', prefetch auto (the default)' : prefetch ? `, prefetch ${prefetch}` : '';
  let url;
  let admin;
  return {
    name: `tock-${workers}x${each}${prefetch ? `-prefetch${prefetch}` : ''}`,
    label: `Tock Worker, ${workers} × ${each}${held}`,
    database: 'bench_tock',
    settings: {
      workers,
      concurrencyEach: each,
      prefetchEach: prefetch,
      poolMaxEach: poolMax,
      pollIntervalMs,
      leaseMs: 30_000,
    },
    async setup(databaseUrl) {
      url = databaseUrl;
      admin = createPool(url, { max: 2, applicationName: 'tock-bench-admin' });
      await migrate(admin);
      await new PostgresStore(admin).upsertJobs({
        tenantId: 'bench',
        jobs: [{ jobId: 'noop', schedule: '@every 1h', handler: 'noop' }],
        now: clock.nowMs(),
      });
    },
    async round(n, timeoutMs) {
      await seedBacklog(admin, n);
      await admin.query('CHECKPOINT');
      const running = [];
      const errors = [];
      const figures = await measure({
        n,
        timeoutMs,
        start: async (drain) => {
          for (let i = 0; i < workers; i++) {
            const pool = createPool(url, { max: poolMax });
            const worker = new Worker({
              store: new PostgresStore(pool),
              clock,
              logger: silent,
              handlers: { noop: () => drain.hit() },
              concurrency: each,
              prefetch,
              pollIntervalMs,
              workerId: `bench-${i}`,
            });
            worker.on('error', (err) => errors.push(err));
            running.push({ pool, worker });
          }
          for (const { worker } of running) worker.start();
        },
        walBytes: () => walPosition((sql) => admin.query(sql)),
        countDone: async () =>
          (await admin.query(`SELECT count(*)::int AS n FROM runs WHERE state = 'succeeded'`)).rows[0].n,
        stop: async () => {
          await Promise.all(running.map(({ worker }) => worker.stop(1000)));
          await Promise.all(running.map(({ pool }) => pool.end()));
        },
      });
      if (errors.length > 0) throw errors[0];
      return figures;
    },
    async teardown() {
      await admin?.end();
    },
  };
}

/**
 * The issue's reference: a bare loop of claim-100 + batched complete on `connections`
 * connections, with Tock's own claim and complete statements on Tock's schema. No handler, no
 * Worker bookkeeping: the ceiling of the SQL itself.
 */
function bareSql({ connections, batch }) {
  let url;
  let admin;
  return {
    name: 'sql-loop',
    label: `bare SQL loop, ${connections} conn × claim ${batch}`,
    database: 'bench_sql',
    settings: {
      connections,
      batch,
      statements: 'runClaim (src/store/queries/claims.ts) + runCompleteMany (src/store/queries/runs.ts)',
    },
    async setup(databaseUrl) {
      url = databaseUrl;
      admin = createPool(url, { max: 2, applicationName: 'tock-bench-admin' });
      await migrate(admin);
    },
    async round(n, timeoutMs) {
      await seedBacklog(admin, n);
      await admin.query('CHECKPOINT');
      let pool;
      let loops;
      return measure({
        n,
        timeoutMs,
        start: async (drain) => {
          pool = createPool(url, { max: connections });
          const loop = async (i) => {
            for (;;) {
              const { rows } = await pool.query(runClaim, [
                'default',
                new Date(),
                batch,
                `sql-${i}`,
                30_000,
                null,
                null,
                0, // claim ahead: only runs already due
                null, // claim id: none
                null, // tenants: every tenant
              ]);
              if (rows.length === 0) return;
              drain.hit(rows.length);
              await pool.query(runCompleteMany, [
                rows.map((r) => r.run_id),
                rows.map((r) => r.lease_token),
                new Date(),
                null,
                rows.map(() => null), // outputs
                rows.map(() => null), // handler starts: unreported
                null, // reports: none
              ]);
            }
          };
          loops = Promise.all(Array.from({ length: connections }, (_, i) => loop(i)));
          loops.catch(() => {});
        },
        walBytes: () => walPosition((sql) => admin.query(sql)),
        countDone: async () =>
          (await admin.query(`SELECT count(*)::int AS n FROM runs WHERE state = 'succeeded'`)).rows[0].n,
        stop: async () => {
          await loops;
          await pool.end();
        },
      });
    },
    async teardown() {
      await admin?.end();
    },
  };
}

/**
 * pg-boss 12: one `work()` call runs `localConcurrency` loops; each fetches up to `batchSize` jobs,
 * hands the batch to the handler (we run them all at once), completes the batch in one statement,
 * then fetches again: at once while its fetches come back full (`burstWhenBatchFull`), otherwise
 * after `pollingIntervalSeconds` (0.5 s is its minimum). In-flight jobs are at most
 * `localConcurrency × batchSize`. The queue gets a table of its own (`partition: true`, which its
 * docs advise for a queue that builds a backlog); `deleteQueue` drops it, so each round starts on a
 * fresh one. `role` says why the row is there (its label shows it).
 */
function pgBoss({ localConcurrency, batchSize, burstWhenBatchFull, pollingIntervalSeconds, max, role }) {
  let url;
  return {
    name: `pg-boss-${localConcurrency}x${batchSize}${burstWhenBatchFull ? '-burst' : ''}`,
    label:
      `pg-boss, localConcurrency ${localConcurrency} × batchSize ${batchSize}` +
      `${burstWhenBatchFull ? ', burstWhenBatchFull' : `, polling ${pollingIntervalSeconds} s`} (${role})`,
    database: 'bench_pgboss',
    settings: {
      localConcurrency,
      batchSize,
      burstWhenBatchFull,
      pollingIntervalSeconds,
      max,
      supervise: false,
      schedule: false,
      queue: { policy: 'standard', partition: true },
      addJobs: 'boss.insert, 5,000 a call',
    },
    async setup(databaseUrl) {
      url = databaseUrl;
    },
    async round(n, timeoutMs) {
      const boss = new PgBoss({ connectionString: url, max, supervise: false, schedule: false });
      const errors = [];
      boss.on('error', (err) => errors.push(err));
      await boss.start();
      try {
        // Drops the queue's table with its jobs (12 deletes a queue's jobs itself).
        await boss.deleteQueue('noop');
        await boss.createQueue('noop', { partition: true });
        for (let i = 0; i < n; i += 5000) {
          await boss.insert(
            'noop',
            Array.from({ length: Math.min(5000, n - i) }, () => ({ data: {} })),
          );
        }
        const db = boss.getDb();
        await db.executeSql('VACUUM ANALYZE pgboss.job', []);
        await db.executeSql('CHECKPOINT', []);
        const figures = await measure({
          n,
          timeoutMs,
          start: async (drain) => {
            await boss.work(
              'noop',
              { localConcurrency, batchSize, burstWhenBatchFull, pollingIntervalSeconds },
              async (jobs) => {
                drain.hit(jobs.length);
                await Promise.all(jobs.map(async () => {}));
              },
            );
          },
          walBytes: () => walPosition((sql) => db.executeSql(sql, [])),
          countDone: async () =>
            (
              await db.executeSql(
                `SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'noop' AND state = 'completed'`,
                [],
              )
            ).rows[0].n,
          stop: async () => {
            await boss.offWork('noop');
          },
        });
        if (errors.length > 0) throw errors[0];
        return figures;
      } finally {
        await boss.stop({ graceful: false, timeout: 2000 });
      }
    },
    async teardown() {},
  };
}

/**
 * graphile-worker 0.18 with the batching its performance page recommends for a high-throughput
 * queue (https://worker.graphile.org/docs/performance#batching): a local queue (one fetch locks a
 * batch for the pool's workers) and batched completions (`completeJobBatchDelay`,
 * `failJobBatchDelay`). `role` says why the row is there (its label shows it).
 */
function graphile({ concurrency, localQueueSize, maxPoolSize, completeJobBatchDelay, pollInterval, role }) {
  let url;
  let utils;
  const logger = new GraphileLogger(() => () => {});
  const worker = {
    concurrentJobs: concurrency,
    maxPoolSize,
    pollInterval,
    localQueue: { size: localQueueSize },
    completeJobBatchDelay,
    failJobBatchDelay: completeJobBatchDelay,
    preparedStatements: true,
    useNodeTime: false,
  };
  return {
    name: `graphile-${concurrency}-queue${localQueueSize}`,
    label: `graphile-worker, concurrency ${concurrency}, local queue ${localQueueSize}, maxPoolSize ${maxPoolSize} (${role})`,
    database: `bench_graphile_${concurrency}_queue${localQueueSize}`,
    settings: { ...worker, addJobs: 'workerUtils.addJobs, 5,000 a call' },
    async setup(databaseUrl) {
      url = databaseUrl;
      await runMigrations({ connectionString: url, logger });
      utils = await makeWorkerUtils({ connectionString: url, logger });
    },
    async round(n, timeoutMs) {
      await utils.withPgClient((c) => c.query('DELETE FROM graphile_worker._private_jobs'));
      for (let i = 0; i < n; i += 5000) {
        await utils.addJobs(
          Array.from({ length: Math.min(5000, n - i) }, () => ({ identifier: 'noop', payload: {} })),
        );
      }
      await utils.withPgClient(async (c) => {
        await c.query('VACUUM ANALYZE graphile_worker._private_jobs');
        await c.query('CHECKPOINT');
      });
      let runner;
      return measure({
        n,
        timeoutMs,
        start: async (drain) => {
          runner = await runGraphile({
            connectionString: url,
            noHandleSignals: true,
            logger,
            taskList: { noop: async () => drain.hit() },
            preset: { worker },
          });
        },
        walBytes: () => walPosition((sql) => utils.withPgClient((c) => c.query(sql))),
        countDone: async () =>
          n -
          (
            await utils.withPgClient((c) =>
              c.query('SELECT count(*)::int AS n FROM graphile_worker._private_jobs'),
            )
          ).rows[0].n,
        stop: async () => {
          await runner?.stop();
        },
      });
    },
    async teardown() {
      await utils?.release();
    },
  };
}

/**
 * BullMQ on Redis, the issue's third reference: one `Worker` with the same concurrency (each slot
 * takes its next job as it completes one, in the same Redis call; 100 is within the 100–300 its
 * docs call standard, https://docs.bullmq.io/guide/parallelism-and-concurrency), jobs added with
 * `addBulk`, 5,000 a call; completed jobs are kept (its default, as Tock keeps its runs). Not
 * PostgreSQL: its server CPU is redis-server's. Each round starts from an obliterated queue.
 */
function bullmq({ concurrency }) {
  let queue;
  const queueName = 'tock-bench-throughput';
  return {
    name: `bullmq-${concurrency}`,
    label: `BullMQ on Redis, concurrency ${concurrency}`,
    database: null,
    server: 'redis-server',
    settings: {
      concurrency,
      redis: redisUrl(),
      removeOnComplete: false,
      addJobs: 'queue.addBulk, 5,000 a call',
    },
    async setup() {
      queue = await openBullQueue(queueName);
    },
    async round(n, timeoutMs) {
      await queue.obliterate({ force: true });
      for (let i = 0; i < n; i += 5000) {
        await queue.addBulk(
          Array.from({ length: Math.min(5000, n - i) }, () => ({ name: 'noop', data: {} })),
        );
      }
      let worker;
      const errors = [];
      const figures = await measure({
        n,
        timeoutMs,
        server: 'redis-server',
        start: async (drain) => {
          worker = new BullWorker(queueName, async () => drain.hit(), {
            connection: redisConnection(),
            concurrency,
          });
          worker.on('error', (err) => errors.push(err));
        },
        countDone: () => queue.getCompletedCount(),
        stop: async () => {
          await worker?.close();
        },
      });
      if (errors.length > 0) throw errors[0];
      return figures;
    },
    async teardown() {
      await closeBullQueue(queue);
    },
  };
}

/**
 * Runs per drain (`--runs` sets another): long enough for a steady state (each system drains for
 * seconds, past its JIT's and its pools' warm-up), which a drain of 20,000 (half a second) is not.
 */
export const RUNS = 100_000;

/** Builds the contestants for a concurrency; `only` filters them by name prefix. */
export function contestants({ concurrency, only }) {
  const all = [
    tockWorkers({ workers: 1, concurrency, poolMax: 10, pollIntervalMs: 100 }),
    tockWorkers({ workers: 2, concurrency, poolMax: 10, pollIntervalMs: 100 }),
    tockWorkers({ workers: 4, concurrency, poolMax: 10, pollIntervalMs: 100 }),
    // graphile-worker's local queue, the Tock way: the next batch claimed while this one runs.
    tockWorkers({ workers: 1, concurrency, poolMax: 10, pollIntervalMs: 100, prefetch: concurrency }),
    tockWorkers({ workers: 1, concurrency, poolMax: 10, pollIntervalMs: 100, prefetch: 3 * concurrency }),
    // What a Worker does untuned (prefetch defaults to auto): at this concurrency, and at its
    // default concurrency (10), which is not the peers' and so not compared with them.
    tockWorkers({ workers: 1, concurrency, poolMax: 10, pollIntervalMs: 100, prefetch: 'auto' }),
    {
      ...tockWorkers({ workers: 1, concurrency: 10, poolMax: 10, pollIntervalMs: 100, prefetch: 'auto' }),
      comparable: false,
    },
    graphile({ ...PEER_SETTINGS.graphilePerformancePage, pollInterval: 2000 }),
    // At Tock's concurrency, with the local queue its docs suggest (concurrency + 1): the like-for-like
    // with the Tock rows (same handler concurrency), which the row above is not. maxPoolSize 25: its
    // docs' rule (the larger of 10 and concurrency + 2) would pass the server's max_connections (100),
    // and with a local queue its workers hold no connection while they wait.
    graphile({
      concurrency,
      localQueueSize: concurrency + 1,
      maxPoolSize: 25,
      completeJobBatchDelay: 0,
      pollInterval: 2000,
      role: 'Tock’s concurrency, its docs’ local queue size',
    }),
    pgBoss(PEER_SETTINGS.pgBossBacklog(concurrency)),
    // Not the same concurrency: how far larger batches (fewer statements a job) take pg-boss.
    {
      ...pgBoss({
        localConcurrency: 4,
        batchSize: 1000,
        burstWhenBatchFull: true,
        pollingIntervalSeconds: 0.5,
        max: 10,
        role: `${(4 * 1000) / concurrency}× the concurrency`,
      }),
      comparable: false,
    },
    bareSql({ connections: 8, batch: 100 }),
    bullmq({ concurrency }),
  ];
  return only ? all.filter((c) => only.some((o) => c.name.startsWith(o))) : all;
}

/** Runs `systems` for `rounds` rounds, interleaved (round 1 of each, then round 2…), after `ctx.options.warmup` unrecorded ones. */
export async function compete(ctx, systems, { n, timeoutMs }) {
  // One fresh database per system kind and server; configurations of one system share it.
  const fresh = new Map();
  for (const s of systems) {
    if (s.database) {
      const server = s.serverUrl ?? ctx.databaseUrl;
      const key = `${server} ${s.database}`;
      if (!fresh.has(key)) fresh.set(key, await recreateDatabase(server, s.database));
      s.url = fresh.get(key);
    }
    await s.setup(s.url);
    s.rounds = [];
  }
  try {
    // Unrecorded drains first (`--warmup`, default 1): every system's rounds then run on a warm
    // process, whichever runs first.
    for (let w = 1; w <= (ctx.options.warmup ?? 0); w++) {
      for (const s of systems) {
        const figures = await s.round(n, timeoutMs);
        ctx.log(`warm-up ${w} ${s.label}: ${fmt(figures.runsPerSecond)} runs/s (not recorded)`);
      }
    }
    for (let r = 1; r <= ctx.rounds; r++) {
      for (const s of systems) {
        const figures = await s.round(n, timeoutMs);
        s.rounds.push(figures);
        ctx.log(
          `round ${r}/${ctx.rounds} ${s.label}: ${fmt(figures.runsPerSecond)} runs/s ` +
            `(${figures.seconds.toFixed(2)} s, first handler after ${figures.startupMs.toFixed(0)} ms)`,
        );
      }
    }
  } finally {
    for (const s of systems) await s.teardown();
  }
  return systems.map((s) => ({
    name: s.name,
    label: s.label,
    comparable: s.comparable !== false,
    database: s.database,
    settings: s.settings,
    rounds: s.rounds,
    runsPerSecond: summarise(s.rounds.map((f) => f.runsPerSecond)),
    nodeCpuUsPerRun: summarise(s.rounds.map((f) => f.nodeCpuUsPerRun)),
    walBytesPerRun: summariseKnown(s.rounds, 'walBytesPerRun'),
    serverCpuUsPerRun: summariseKnown(s.rounds, 'serverCpuUsPerRun'),
    statementsPerRun: summariseKnown(s.rounds, 'statementsPerRun'),
  }));
}

/** The summary of `key` over the rounds, or null when a round has none (a figure the system lacks). */
const summariseKnown = (rounds, key) =>
  rounds.some((f) => f[key] === null || f[key] === undefined) ? null : summarise(rounds.map((f) => f[key]));

export default {
  name: 'throughput',
  description: 'a backlog of ready runs drained by in-process workers (no-op handler), runs/s',
  async run(ctx) {
    const n = ctx.smoke ? 500 : (ctx.options.runs ?? RUNS);
    const concurrency = ctx.options.concurrency ?? 100;
    const systems = contestants({ concurrency, only: ctx.options.only });
    const settings = {
      runs: n,
      concurrency,
      handler: 'no-op',
      rounds: ctx.rounds,
      warmup: ctx.options.warmup ?? 0,
    };
    for (const s of systems) ctx.log(`${s.label}: ${JSON.stringify(s.settings)}`);
    const results = await compete(ctx, systems, { n, timeoutMs: ctx.smoke ? 60_000 : 600_000 });
    const tock = results.filter((r) => r.name.startsWith('tock-') && r.comparable);
    const best = tock.reduce((a, b) => (b.runsPerSecond.median > a.runsPerSecond.median ? b : a), tock[0]);
    const ratio = (r) => (best ? best.runsPerSecond.median / r.runsPerSecond.median : null);
    const ratioPerRound = (r) => (best ? summarise(roundRatios(best, r)) : null);
    const pct = (x) => fmt(x * 100);
    const rows = results.map((r) => {
      // With --only leaving Tock out there is no best Tock, and so no ratio.
      const peer = best !== undefined && !r.name.startsWith('tock-') && r.comparable;
      const perRound = peer ? ratioPerRound(r) : null;
      return [
        r === best ? `**${r.label}** (best Tock)` : r.label,
        fmtRange(r.runsPerSecond),
        peer ? `${pct(ratio(r))} %` : '',
        perRound ? `${pct(perRound.median)} % (${pct(perRound.min)}–${pct(perRound.max)})` : '',
        fmt(r.nodeCpuUsPerRun.median, 1),
        r.serverCpuUsPerRun ? fmt(r.serverCpuUsPerRun.median, 1) : '–',
        r.walBytesPerRun ? fmt(r.walBytesPerRun.median) : '–',
        r.statementsPerRun ? fmt(r.statementsPerRun.median * 1000, 1) : '–',
      ];
    });
    const table = markdownTable(
      [
        `system (total concurrency ${concurrency})`,
        'runs/s, median (min–max)',
        'best Tock ÷ this',
        'same, per round: median (min–max)',
        'this process, CPU µs/run',
        'database server, CPU µs/run',
        'WAL bytes/run',
        'statements per 1,000 runs',
      ],
      rows,
    );
    const targets = [];
    const sqlResult = results.find((r) => r.name.startsWith('sql-'));
    for (const g of results.filter((r) => r.name.startsWith('graphile-'))) {
      if (best)
        targets.push(
          `Tock ÷ ${g.label}: ${pct(ratio(g))} % of the medians, ${pct(ratioPerRound(g).median)} % per round (target ≥ 100 %)`,
        );
    }
    if (best && sqlResult)
      targets.push(
        `Tock ÷ bare SQL loop: ${pct(ratio(sqlResult))} % of the medians, ${pct(ratioPerRound(sqlResult).median)} % per round (target ≥ 75 %)`,
      );
    for (const t of targets) ctx.log(t);
    return {
      settings,
      systems: results,
      best: best?.name,
      table,
      notes: [
        ...targets,
        `Rounds are interleaved (round 1 of each system, then round 2…), each a drain of a backlog seeded before it, after ${settings.warmup} unrecorded drain${settings.warmup === 1 ? '' : 's'} of each system (\`--warmup\`): every system is measured in a warm process, not only those that run after the first (which find the code they share with it, such as the \`pg\` driver, compiled, and the heap grown).`,
        'Tock keeps every run, with its lease (owner, token, expiry) checked on every write; a succeeded run keeps its attempt (worker, start, finish, output) on its row, and a failed, released or expired attempt gets a row of its own. graphile-worker deletes a job when it succeeds; pg-boss keeps completed jobs in its job table (deleteAfterSeconds, 7 days by default); BullMQ keeps completed jobs in Redis (its default), in memory, with no fsync.',
        'Prefetch: a Tock Worker holds up to that many claimed runs beyond its concurrency, leased and waiting for a slot (the counterpart of graphile-worker’s local queue). Its claims then take up to concurrency + prefetch runs a statement. graphile-worker runs with its performance page’s settings (concurrency 24, maxPoolSize 25, local queue 500, completeJobBatchDelay and failJobBatchDelay 0: the configuration its quick stats were taken with, there on 4 worker processes sharing an i9-14900K with the database) and at Tock’s concurrency with the local queue its docs suggest as a starting point (concurrency + 1).',
        'Peers run at the settings their own docs give for speed. pg-boss: burstWhenBatchFull (its docs: while each fetch returns a full batch, the worker fetches again with no delay); without it a work() loop waits out pollingIntervalSeconds (at least 0.5 s) between batches: two batches a second a loop, 200 runs/s with 100 jobs in flight. Its docs give no batch size or localConcurrency, so the concurrency is split into 2 loops (the fastest of 1, 2, 4 and 5 loops measured here). BullMQ: concurrency 100 is within the 100–300 its docs call a standard setting for IO-bound jobs.',
        'The bare SQL loop has no handler and no Worker: 8 connections, each claiming 100 and completing them in one statement.',
        'CPU per run is over the measured span: this process (the workers, and the polls that confirm completion) and every process of the database server on the machine (PostgreSQL: backends, WAL writer, checkpointer; BullMQ: redis-server). Both share the 2 cores. CPU time per run moves with the machine (a busy spell raises every system’s): compare within a round. WAL bytes per run (the server’s WAL position before the workers start and when the last completion is confirmed) do not depend on the machine’s speed.',
        'Statements per 1,000 runs: what the system’s `pg` clients sent over the drain (each a round trip: claims or fetches, completions, and any BEGIN/COMMIT), counted in this process, less the polls that confirm completion.',
      ],
    };
  },
};
