// Scenario 4 of issue 7: what the number of job definitions costs. Jobs are registered through the
// bulk path (`upsertJobs`, 1,000 a statement) up to 10,000, 100,000 and 1,000,000 (smoke: 1,000 and
// 10,000), each with its next slot weeks away (`0 0 1 1 *`), so nothing is due. At each total:
// the time to register the increment, the size of `jobs` and its indexes, this process's RSS, the
// cost of an idle tick (nothing due), and the cost of a tick that materialises 1,000 due jobs: the
// same 1,000 jobs, spread over the whole id range and so over every shard, re-armed before each
// tick (`next_run_at` one second ago, their runs from the previous tick deleted). The target
// (issue 7) is a flat tick cost from 10,000 to 1,000,000 definitions.
import { SystemClock } from '../../dist/core/index.js';
import { createPool, MAX_BULK_JOBS, migrate, PostgresStore } from '../../dist/store/index.js';
import { jobDueLock } from '../../dist/store/queries/jobs.js';
import { fmt, fmtRange, markdownTable, recreateDatabase } from '../lib.mjs';
import { overRounds, rssMiB } from '../timing.mjs';

const TENANT = 'bench';
const DUE = 1000;
const TICKS_PER_ROUND = 5;
const TICK = { lookaheadMs: 1000, batchSize: 1000 };
const clock = new SystemClock();

const jobInput = (i) => ({ jobId: `def-${i}`, schedule: '0 0 1 1 *', handler: 'noop' });

/** Registers jobs `from` … `to − 1`, `MAX_BULK_JOBS` a statement, two statements in flight. */
async function registerRange(store, from, to, onProgress) {
  const t0 = performance.now();
  let next = from;
  let peakRss = rssMiB();
  const lane = async () => {
    while (next < to) {
      const start = next;
      const end = Math.min(to, start + MAX_BULK_JOBS);
      next = end;
      const jobs = [];
      for (let i = start; i < end; i++) jobs.push(jobInput(i));
      await store.upsertJobs({ tenantId: TENANT, jobs, now: clock.nowMs() });
      peakRss = Math.max(peakRss, rssMiB());
      onProgress?.(end);
    }
  };
  await Promise.all([lane(), lane()]);
  return { ms: performance.now() - t0, peakRss };
}

/** Sizes of `jobs` (heap + TOAST), its indexes, and the total, bytes. */
async function sizes(pool) {
  const { rows } = await pool.query(
    `SELECT pg_table_size('jobs')::float8 AS heap, pg_indexes_size('jobs')::float8 AS indexes,
            pg_total_relation_size('jobs')::float8 AS total,
            (SELECT pg_relation_size('jobs_due')::float8) AS jobs_due,
            (SELECT pg_relation_size('jobs_pkey')::float8) AS jobs_pkey`,
  );
  return rows[0];
}

/** The due scan's plan and buffers for the re-armed batch (in a rolled-back transaction). */
async function dueScanPlan(pool, shards) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${jobDueLock}`, [
      new Date(clock.nowMs() + TICK.lookaheadMs),
      TICK.batchSize,
      shards,
    ]);
    await client.query('ROLLBACK');
    const plan = rows[0]['QUERY PLAN'][0];
    const nodes = [];
    const walk = (p) => {
      nodes.push(p['Index Name'] ? `${p['Node Type']} (${p['Index Name']})` : p['Node Type']);
      for (const c of p.Plans ?? []) walk(c);
    };
    walk(plan.Plan);
    return {
      nodes: nodes.join(' → '),
      ms: plan['Execution Time'],
      buffers: plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'],
    };
  } finally {
    client.release();
  }
}

/** The ids of the batch made due: spread evenly over `total`, so over every shard. */
const dueIds = (total) => Array.from({ length: DUE }, (_, k) => `def-${Math.floor((k * total) / DUE)}`);

/** Makes the batch due one second ago and removes the runs an earlier tick made for it. */
async function rearm(pool, ids) {
  await pool.query('TRUNCATE runs, attempts, attempt_progress, run_queue, run_claims');
  const { rowCount } = await pool.query(
    'UPDATE jobs SET next_run_at = $1 WHERE tenant_id = $2 AND job_id = ANY($3::text[])',
    [new Date(clock.nowMs() - 1000), TENANT, ids],
  );
  if (rowCount !== ids.length) throw new Error(`re-armed ${rowCount} of ${ids.length} jobs`);
}

export default {
  name: 'definitions',
  description: 'jobs registered up to 10k/100k/1M (bulk path): tick cost for 1,000 due, table size, RSS',
  async run(ctx) {
    const totals = ctx.smoke ? [1000, 10_000] : [10_000, 100_000, 1_000_000];
    const url = await recreateDatabase(ctx.databaseUrl, 'bench_definitions');
    const pool = createPool(url, { max: 4, applicationName: 'tock-bench-definitions' });
    const store = new PostgresStore(pool);
    const shardIds = Array.from({ length: await migrateAndCount(pool) }, (_, i) => i);
    const results = [];
    try {
      let registered = 0;
      for (const total of totals) {
        let lastLog = performance.now();
        const reg = await registerRange(store, registered, total, (done) => {
          if (performance.now() - lastLog > 30_000) {
            lastLog = performance.now();
            ctx.log(`  registering: ${fmt(done)} of ${fmt(total)}`);
          }
        });
        const added = total - registered;
        registered = total;
        // What autovacuum would have done by now (it is off on some servers): fresh statistics; and
        // the registration's dirty pages written out, so the ticks do not pay for evicting them.
        await pool.query('VACUUM ANALYZE jobs');
        await pool.query('CHECKPOINT');
        const size = await sizes(pool);
        ctx.log(
          `${fmt(total)} jobs: registered ${fmt(added)} in ${fmt(reg.ms / 1000, 1)} s ` +
            `(${fmt(added / (reg.ms / 1000))} jobs/s); jobs ${fmt(size.total / 2 ** 20, 1)} MiB ` +
            `(heap ${fmt(size.heap / 2 ** 20, 1)}, indexes ${fmt(size.indexes / 2 ** 20, 1)}); RSS peak ${fmt(reg.peakRss)} MiB`,
        );
        const ids = dueIds(total);
        const res = { total, added, registerMs: reg.ms, peakRssMiB: reg.peakRss, size, rounds: [] };
        // One tick first, not counted: the schedule parsed and cached, the statements' plans warm.
        await rearm(pool, ids);
        await store.tick({ now: clock.nowMs(), ...TICK });
        for (let r = 1; r <= ctx.rounds; r++) {
          const idle = [];
          const due = [];
          for (let k = 0; k < TICKS_PER_ROUND; k++) {
            let t = performance.now();
            const none = await store.tick({ now: clock.nowMs(), ...TICK });
            idle.push(performance.now() - t);
            if (none.jobs !== 0) throw new Error(`an idle tick found ${none.jobs} due jobs`);
            await rearm(pool, ids);
            t = performance.now();
            const tick = await store.tick({ now: clock.nowMs(), ...TICK });
            due.push(performance.now() - t);
            if (tick.created.length !== DUE)
              throw new Error(`the tick materialised ${tick.created.length} of ${DUE} due jobs`);
          }
          await rearm(pool, ids);
          const plan = await dueScanPlan(pool, shardIds);
          await pool.query(
            'UPDATE jobs SET next_run_at = $1 WHERE tenant_id = $2 AND job_id = ANY($3::text[])',
            [new Date('2027-01-01T00:00:00Z'), TENANT, ids],
          );
          const f = {
            idleTickMs: overRounds(idle, (x) => x).median,
            dueTickMs: overRounds(due, (x) => x).median,
            dueTicks: due,
            dueScan: plan,
            rssMiB: rssMiB(),
          };
          res.rounds.push(f);
          ctx.log(
            `round ${r}/${ctx.rounds} ${fmt(total)} jobs: tick with ${fmt(DUE)} due ${fmt(f.dueTickMs, 1)} ms ` +
              `(median of ${TICKS_PER_ROUND}: ${due.map((x) => fmt(x, 0)).join('/')}), idle tick ${fmt(f.idleTickMs, 2)} ms; ` +
              `due scan ${fmt(plan.ms, 2)} ms, ${fmt(plan.buffers)} buffers: ${plan.nodes}`,
          );
        }
        res.dueTickMs = overRounds(res.rounds, 'dueTickMs');
        res.idleTickMs = overRounds(res.rounds, 'idleTickMs');
        res.dueScanMs = overRounds(res.rounds, (f) => f.dueScan.ms);
        res.dueScanBuffers = overRounds(res.rounds, (f) => f.dueScan.buffers);
        res.rssMiB = overRounds(res.rounds, 'rssMiB');
        results.push(res);
      }
    } finally {
      await pool.end();
    }
    const first = results[0];
    const last = results[results.length - 1];
    const ratio = last.dueTickMs.median / first.dueTickMs.median;
    const flat = ratio <= 1.5;
    const table = markdownTable(
      [
        'jobs',
        'register (increment)',
        'jobs table + indexes',
        `tick, ${fmt(DUE)} due, ms`,
        'idle tick, ms',
        'due scan ms (buffers)',
        'RSS MiB',
      ],
      results.map((r) => [
        fmt(r.total),
        `${fmt(r.registerMs / 1000, 1)} s (${fmt(r.added / (r.registerMs / 1000))}/s)`,
        `${fmt(r.size.total / 2 ** 20, 1)} MiB (${fmt(r.size.heap / 2 ** 20, 1)} + ${fmt(r.size.indexes / 2 ** 20, 1)})`,
        fmtRange(r.dueTickMs, 1),
        fmtRange(r.idleTickMs, 2),
        `${fmtRange(r.dueScanMs, 2)} (${fmt(r.dueScanBuffers.median)})`,
        `${fmt(r.rssMiB.median)} (peak ${fmt(r.peakRssMiB)})`,
      ]),
    );
    const verdict = `Tick with ${fmt(DUE)} due: ${fmt(last.dueTickMs.median, 1)} ms at ${fmt(last.total)} jobs vs ${fmt(first.dueTickMs.median, 1)} ms at ${fmt(first.total)} (× ${fmt(ratio, 2)}; ${ctx.smoke ? 'smoke sizes, not the target’s 10,000 → 1,000,000' : `flat from 10,000 to 1,000,000, target: ${flat ? 'met' : 'NOT met'}`}, taking ≤ × 1.5 as flat)`;
    ctx.log(verdict);
    return {
      settings: {
        totals,
        schedule: '0 0 1 1 * (next slot weeks away)',
        bulk: `upsertJobs, ${MAX_BULK_JOBS} a statement, 2 in flight`,
        due: DUE,
        ticksPerRound: TICKS_PER_ROUND,
        tick: TICK,
        rounds: ctx.rounds,
      },
      systems: results,
      table,
      notes: [
        verdict,
        `Tick: one PostgresStore.tick over all shards (as TickLoop without a fence), lookahead ${TICK.lookaheadMs} ms, batch ${TICK.batchSize}; median of ${TICKS_PER_ROUND} ticks a round, then median (min–max) over rounds. The idle tick is the one that runs every interval when nothing is due.`,
        'Due scan: EXPLAIN ANALYZE of jobDueLock with the batch armed, its plan and the buffers it touched. After each registration step: VACUUM ANALYZE jobs (autovacuum may be off on the server), CHECKPOINT, and one uncounted tick.',
        'Sizes: pg_table_size (heap + TOAST) + pg_indexes_size of jobs. RSS: this process (it registers in chunks of 1,000 and keeps no job list).',
      ],
    };
  },
};

/** Migrates and returns the shard count. */
async function migrateAndCount(pool) {
  await migrate(pool);
  const { rows } = await pool.query('SELECT count(*)::int AS n FROM shards');
  return rows[0].n;
}
