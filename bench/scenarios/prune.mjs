// Issue 21: pruning beside the hot path. A tenant has `--runs` finished runs past their retention
// (default 1,000,000; smoke 5,000: 98 % succeeded, 2 % dead with an attempt each, slots a month
// and more ago) and a ready backlog that four loops claim and complete at a steady pace (50 runs
// per claim, every 100 ms each: 2,000 runs/s), as workers would. Each round: a window of the load
// alone, then a window of the same load with the pruner (the `Pruner` of dist/, as `tock server`
// runs it) deleting the expired runs. Measured in each window: the claim and completion statement
// times (p50 / p99 / max), and claims that waited for a lock (sampled from pg_locks every 10 ms);
// with the pruner: runs deleted per second and its batches' times. After the rounds: the runs
// table and its indexes, and the dead tuples, before and after a VACUUM.
import { randomUUID } from 'node:crypto';
import { SystemClock } from '../../dist/core/index.js';
import { Pruner } from '../../dist/scheduler/index.js';
import { createPool, migrate, PostgresStore } from '../../dist/store/index.js';
import { fmt, markdownTable, recreateDatabase } from '../lib.mjs';
import { Delays, overRounds, silent, sleep } from '../timing.mjs';

const TENANT = 'bench';
const LOOPS = 4;
const PER_CLAIM = 50;
const EVERY_MS = 100;

/** `n` runs that ended a month and more ago (2 % dead, with an attempt), and `ready` queued runs of the last hour. */
async function seed(pool, { n, ready }) {
  const store = new PostgresStore(pool);
  const now = Date.now();
  await store.upsertJobs({
    tenantId: TENANT,
    jobs: [{ jobId: 'noop', schedule: '@every 1h', handler: 'noop' }],
    now,
  });
  for (let from = 0; from < n; from += 500_000) {
    const count = Math.min(500_000, n - from);
    await pool.query(
      `INSERT INTO runs (tenant_id, job_id, scheduled_for, state, parked, max_attempts, handler, payload, pool,
         priority, backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, started_at,
         finished_at, lease_owner, lease_token, output)
       SELECT $1, 'noop', t, s, CASE WHEN s = 'dead' THEN 'dead' END, 3, 'noop', '{}', 'default', 0, 2, 3600, t, t, t,
         t, t + interval '5 ms', 'w', gen_random_uuid(), NULL
       FROM generate_series($2::int, $3::int) AS i,
         LATERAL (SELECT $4::timestamptz - interval '40 days' - i * interval '1 s' AS t,
                         CASE WHEN i % 50 = 0 THEN 'dead' ELSE 'succeeded' END AS s) x`,
      [TENANT, from + 1, from + count, new Date(now)],
    );
  }
  await pool.query(
    `INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at, finished_at, outcome, error)
     SELECT gen_random_uuid(), run_id, 1, 'w', finished_at, finished_at, 'failed', 'boom' FROM runs WHERE state = 'dead'`,
  );
  await pool.query(
    `WITH r AS (
       INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
         backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at)
       SELECT $1, 'noop', t, 3, 'noop', '{}', 'default', 0, 2, 3600, t, t, t
       FROM generate_series(1, $2::int) AS i, LATERAL (SELECT $3::timestamptz - interval '1 hour' + i * interval '1 ms' AS t) x
       RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
     INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
     SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key FROM r`,
    [TENANT, ready, new Date(now)],
  );
  await pool.query('VACUUM ANALYZE');
}

/** Four claim → complete loops at a steady pace for `ms`; each statement's time. */
async function load(store, ms) {
  const clock = new SystemClock();
  const claims = new Delays();
  const completions = new Delays();
  let runs = 0;
  const end = performance.now() + ms;
  const loop = async (i) => {
    const workerId = `loop-${i}-${randomUUID().slice(0, 8)}`;
    while (performance.now() < end) {
      const t0 = performance.now();
      const claimed = await store.claimRuns({
        workerId,
        pool: 'default',
        max: PER_CLAIM,
        now: clock.nowMs(),
      });
      const t1 = performance.now();
      claims.add(t1 - t0);
      if (claimed.length > 0) {
        await store.completeRuns({ leases: claimed, now: clock.nowMs() });
        completions.add(performance.now() - t1);
        runs += claimed.length;
      }
      await sleep(EVERY_MS - (performance.now() - t0));
    }
  };
  await Promise.all(Array.from({ length: LOOPS }, (_, i) => loop(i)));
  return { claims: claims.summary(), completions: completions.summary(), runs };
}

/** Samples, every 10 ms until `stop()`, how many of the loops' sessions wait for a lock. */
function lockWaits(pool) {
  let max = 0;
  let samples = 0;
  let waiting = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = 'tock'`,
      );
      samples += 1;
      if (rows[0].n > 0) waiting += 1;
      max = Math.max(max, rows[0].n);
      await sleep(10);
    }
  })();
  return async () => {
    running = false;
    await done;
    return { samples, waiting, max };
  };
}

async function sizes(pool) {
  const { rows } = await pool.query(
    `SELECT pg_relation_size('runs')::float8 AS heap, pg_indexes_size('runs')::float8 AS indexes,
       (SELECT n_dead_tup::float8 FROM pg_stat_user_tables WHERE relname = 'runs') AS dead,
       (SELECT count(*)::float8 FROM runs) AS rows`,
  );
  return rows[0];
}

async function round({ pool, store, windowMs, log }) {
  const alone = await load(store, windowMs);
  const pruner = new Pruner({
    store,
    clock: new SystemClock(),
    logger: silent,
    owner: `bench-${randomUUID()}`,
    intervalMs: 1000,
  });
  const batches = new Delays();
  let deleted = 0;
  let last = performance.now();
  pruner.on('batch', (b) => {
    const now = performance.now();
    batches.add(now - last);
    last = now;
    for (const n of Object.values(b.byState)) deleted += n ?? 0;
  });
  const watch = lockWaits(pool);
  const t0 = performance.now();
  pruner.start();
  const pruning = await load(store, windowMs);
  await pruner.stop();
  const seconds = (performance.now() - t0) / 1000;
  const waits = await watch();
  const figures = {
    alone,
    pruning,
    deleted,
    deletedPerSecond: deleted / seconds,
    batches: batches.summary(),
    waits,
  };
  log(
    `claim p99 ${fmt(alone.claims.p99, 1)} → ${fmt(pruning.claims.p99, 1)} ms (max ${fmt(pruning.claims.max, 1)}); ` +
      `deleted ${fmt(figures.deletedPerSecond)} runs/s; lock waits in ${waits.waiting} of ${waits.samples} samples`,
  );
  return figures;
}

export default {
  name: 'prune',
  description: 'issue 21: the pruner deleting a million expired runs beside a steady claim/complete load',
  async run(ctx) {
    const n = ctx.smoke ? 5000 : Number(ctx.options.runs ?? 1_000_000);
    const windowMs = ctx.smoke ? 2000 : 20_000;
    const url = await recreateDatabase(ctx.databaseUrl, 'bench_prune');
    const pool = createPool(url, { max: 12 });
    try {
      await migrate(pool);
      const rounds = ctx.smoke ? 1 : ctx.rounds;
      await seed(pool, {
        n,
        ready: Math.ceil((2 * windowMs * rounds * LOOPS * PER_CLAIM) / EVERY_MS) + 10_000,
      });
      const before = await sizes(pool);
      const store = new PostgresStore(pool);
      const figures = [];
      for (let i = 0; i < rounds; i++) figures.push(await round({ pool, store, windowMs, log: ctx.log }));
      const after = await sizes(pool);
      await pool.query('VACUUM runs, attempts');
      const vacuumed = await sizes(pool);
      const deleted = figures.reduce((a, f) => a + f.deleted, 0);
      if (deleted === 0) throw new Error('the pruner deleted nothing');
      const cell = (key, pick, digits = 1) => {
        const s = overRounds(figures, (f) => pick(f[key]));
        return s.median === null
          ? '–'
          : `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;
      };
      const table = markdownTable(
        ['per window, median (min–max) of rounds', 'load alone', 'load + pruner'],
        [
          ['claim, p50 ms', cell('alone', (w) => w.claims.p50), cell('pruning', (w) => w.claims.p50)],
          ['claim, p99 ms', cell('alone', (w) => w.claims.p99), cell('pruning', (w) => w.claims.p99)],
          ['claim, max ms', cell('alone', (w) => w.claims.max), cell('pruning', (w) => w.claims.max)],
          [
            'completion, p99 ms',
            cell('alone', (w) => w.completions.p99),
            cell('pruning', (w) => w.completions.p99),
          ],
          [
            'runs completed / s',
            cell('alone', (w) => w.runs / (windowMs / 1000), 0),
            cell('pruning', (w) => w.runs / (windowMs / 1000), 0),
          ],
          ['runs pruned / s', '', `${fmt(overRounds(figures, 'deletedPerSecond').median)}`],
          [
            'pruner batch, p50 / max ms (with its pause)',
            '',
            `${fmt(overRounds(figures, (f) => f.batches.p50).median, 1)} / ${fmt(overRounds(figures, (f) => f.batches.max).max, 1)}`,
          ],
          [
            'samples (every 10 ms) with a session waiting for a lock',
            '',
            figures.map((f) => `${f.waits.waiting} of ${f.waits.samples}`).join(', '),
          ],
        ],
      );
      const mib = (b) => fmt(b / 2 ** 20);
      const notes = [
        `${fmt(n)} expired runs seeded; ${fmt(deleted)} pruned in ${rounds} windows of ${windowMs / 1000} s; ${fmt(after.rows)} runs left.`,
        `runs: heap ${mib(before.heap)} MiB + indexes ${mib(before.indexes)} MiB before; ${mib(after.heap)} + ${mib(after.indexes)} MiB and ${fmt(after.dead)} dead tuples after; after VACUUM ${mib(vacuumed.heap)} + ${mib(vacuumed.indexes)} MiB, ${fmt(vacuumed.dead)} dead tuples (the space is reused, not returned).`,
      ];
      return {
        settings: { expiredRuns: n, windowMs, loops: LOOPS, perClaim: PER_CLAIM, everyMs: EVERY_MS },
        systems: [{ name: 'tock-pruner', rounds: figures }],
        table,
        notes,
      };
    } finally {
      await pool.end();
    }
  },
};
