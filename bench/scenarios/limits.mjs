// Backlog control (issue 18): what limits and caps cost the claim, and how a rate limit paces.
//
// 1. Throughput: the same backlog of ready runs (200,000, so that each drain lasts 10 s or more;
//    smoke 2,000) drained by the same Workers (2 × 50, pollIntervalMs 100), once with no limit
//    defined anywhere and once with limits and caps in play: the runs' job names a limit `api`
//    (rate 1,000,000/s, burst 1,000,000, max_concurrency 100,000), has a cap of its own
//    (max_concurrency 100,000), and its tenant has a limit (the same figures). None of them ever
//    binds: the figure is what the gates cost (the locked limit rows or the credits, the tokens and
//    slots taken at claim, the slots given back at completion).
//    Both variants run in every round, one after the other; the ratio is given of the medians and
//    per round (target ≥ 0.8).
// 2. Pacing: 1,000 ready runs (smoke 100) of a job naming a limit of 50/s, burst 50, drained by the
//    same Workers: when the last one started (from the first start) against the ideal (the burst
//    at once, then 950 at 50/s: 19 s; the round figure is 1,000 / 50 = 20 s), and the most
//    starts in any one-second window after the burst (ideal 50).
import pino from 'pino';
import { SystemClock } from '../../dist/core/index.js';
import { createPool, migrate, PostgresStore } from '../../dist/store/index.js';
import { Worker } from '../../dist/worker/index.js';
import {
  fmt,
  fmtRange,
  markdownTable,
  recreateDatabase,
  roundRatios,
  summarise,
  waitUntil,
} from '../lib.mjs';

const clock = new SystemClock();
const silent = pino({ level: 'silent' });
const TENANT = 'bench';
const WORKERS = 2;
const POLL_MS = 100;
/** Never the bottleneck: the largest rate, burst and concurrency a limit may have. */
const WIDE = { rate: 1_000_000, burst: 1_000_000, cap: 100_000 };
const PACE = { rate: 50, burst: 50 };

/** Defines (or redefines) limit `key` of the tenant with SQL, its bucket full, its window empty and no slot in use. */
async function defineLimit(admin, key, { rate = null, burst = null, cap = null }) {
  const now = new Date(clock.nowMs());
  await admin.query(
    `INSERT INTO limits (tenant_id, key, rate, burst, tokens, refilled_at, max_concurrency, created_at, updated_at)
     VALUES ($1, $2, $3, $4, COALESCE($4, 0), $5, $6, $5, $5)
     ON CONFLICT (tenant_id, key) DO UPDATE SET rate = $3, burst = $4, tokens = COALESCE($4, 0),
       refilled_at = $5, max_concurrency = $6, in_use = 0, busy_from = NULL, freed_at = NULL,
       recent_at = NULL, recent_n = NULL`,
    [TENANT, key, rate, burst, now, cap],
  );
}

/** Job `jobId` (handler noop) with `limits` and `maxConcurrency`; the limits it names must exist. */
async function defineJob(admin, jobId, { limits = [], maxConcurrency = null } = {}) {
  await new PostgresStore(admin).upsertJobs({
    tenantId: TENANT,
    jobs: [{ jobId, schedule: '@yearly', handler: 'noop', limits, maxConcurrency }],
    now: clock.nowMs(),
  });
}

/**
 * Empties runs, the queue, claims and slots; then `n` ready runs of `jobId` at distinct past slots,
 * queued, taking the named limits `gates` (as a run of a job listing them does); every limit's
 * bucket full again and its window empty.
 */
async function seed(admin, { n, jobId, gates }) {
  await admin.query('TRUNCATE runs, attempts, attempt_progress, run_queue, run_claims, limit_releases');
  await admin.query(
    `INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
       backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, gates)
     SELECT $2, $3, t, 3, 'noop', '{}', 'default', 0, 2, 3600, t, t, t, $4::text[]
     FROM generate_series(1, $1::int) AS i, LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 ms' AS t) s`,
    [n, TENANT, jobId, gates.length > 0 ? gates.map((g) => `${TENANT}/${g}`) : null],
  );
  await admin.query(
    `INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates)
     SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates FROM runs`,
  );
  await admin.query(
    `UPDATE limits SET in_use = 0, released = 0, tokens = COALESCE(burst, 0), refilled_at = $1, busy_from = NULL, freed_at = NULL,
       recent_at = NULL, recent_n = NULL`,
    [new Date(clock.nowMs())],
  );
  await admin.query('VACUUM ANALYZE runs, run_queue, run_claims, limits, limit_releases');
  await admin.query('CHECKPOINT');
}

/**
 * Drains the queue with `WORKERS` Workers sharing `concurrency`. Resolves with the first handler
 * call and the instant the database shows all `n` runs succeeded (performance.now()).
 */
async function drain(url, admin, { n, concurrency, timeoutMs }) {
  const running = [];
  const errors = [];
  let first = null;
  let started = 0;
  for (let i = 0; i < WORKERS; i++) {
    const pool = createPool(url, { max: 10, applicationName: 'tock-bench-worker' });
    const worker = new Worker({
      store: new PostgresStore(pool),
      clock,
      logger: silent,
      concurrency: concurrency / WORKERS,
      pollIntervalMs: POLL_MS,
      workerId: `bench-${i}`,
      handlers: {
        noop: () => {
          const at = performance.now();
          if (first === null) first = at;
          started += 1;
        },
      },
    });
    worker.on('error', (err) => errors.push(err));
    running.push({ pool, worker });
  }
  let done = 0;
  let end;
  try {
    for (const { worker } of running) worker.start();
    await waitUntil(() => started >= n || errors.length > 0, {
      intervalMs: 2,
      timeoutMs,
      what: `${n} handler calls (${started} so far)`,
    });
    await waitUntil(
      async () => {
        done = (await admin.query(`SELECT count(*)::int AS n FROM runs WHERE state = 'succeeded'`)).rows[0].n;
        return done >= n || errors.length > 0;
      },
      {
        intervalMs: 5,
        timeoutMs: 30_000,
        what: `the database to show ${n} runs succeeded (it shows ${done})`,
      },
    );
    end = performance.now();
  } finally {
    await Promise.all(running.map(({ worker }) => worker.stop(1000)));
    await Promise.all(running.map(({ pool }) => pool.end()));
  }
  if (errors.length > 0) throw errors[0];
  if (done !== n) throw new Error(`completed ${done} of ${n}`);
  return { first, end };
}

/** The two variants of the throughput part: how each sets the database up. */
const VARIANTS = [
  {
    name: 'without',
    label: 'no limit defined',
    jobId: 'free',
    gates: [],
    async prepare(admin) {
      // The gated job goes too, so that the next in-play round creates it (and its own gate) again.
      await admin.query('DELETE FROM limits');
      await admin.query(`DELETE FROM jobs WHERE tenant_id = $1 AND job_id = 'gated'`, [TENANT]);
    },
  },
  {
    name: 'in-play',
    label: 'limit `api` + job cap + tenant limit, none binding',
    jobId: 'gated',
    gates: ['api'],
    async prepare(admin) {
      await admin.query('DELETE FROM limits');
      await defineLimit(admin, 'api', WIDE);
      await defineLimit(admin, `tenant:${TENANT}`, WIDE);
      await defineJob(admin, 'gated', { limits: ['api'], maxConcurrency: WIDE.cap });
      const { rows } = await admin.query('SELECT key FROM limits ORDER BY key');
      const keys = rows.map((r) => r.key).join(', ');
      if (keys !== `api, job:gated, tenant:${TENANT}`) throw new Error(`limits in play: ${keys}`);
    },
  },
];

/** The starts after the first `burst` (ms, sorted): the most within any window [t, t + 1 s). */
function maxPerSecond(starts, burst) {
  const after = starts.slice(burst);
  let best = 0;
  let j = 0;
  for (let i = 0; i < after.length; i++) {
    while (j < after.length && after[j] < after[i] + 1000) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

export default {
  name: 'limits',
  description:
    'backlog control: claim throughput with limits and caps in play against none (ratio), and a 50/s limit pacing 1,000 runs',
  async run(ctx) {
    const n = ctx.smoke ? 2000 : 200_000;
    const paced = ctx.smoke ? 100 : 1000;
    const concurrency = ctx.options.concurrency ?? 100;
    const timeoutMs = ctx.smoke ? 60_000 : 300_000;
    const url = await recreateDatabase(ctx.databaseUrl, 'bench_limits');
    const admin = createPool(url, { max: 2, applicationName: 'tock-bench-admin' });
    const through = VARIANTS.map((v) => ({ ...v, rounds: [] }));
    const pacing = [];
    try {
      await migrate(admin);
      await defineJob(admin, 'free');
      ctx.log(
        `${fmt(n)} ready runs, ${WORKERS} Workers × ${concurrency / WORKERS} (poll ${POLL_MS} ms); in play: ${JSON.stringify(WIDE)}`,
      );
      for (let r = 1; r <= ctx.rounds; r++) {
        for (const v of through) {
          await v.prepare(admin);
          await seed(admin, { n, jobId: v.jobId, gates: v.gates });
          const { first, end } = await drain(url, admin, { n, concurrency, timeoutMs });
          const figures = { runsPerSecond: n / ((end - first) / 1000), seconds: (end - first) / 1000 };
          const leftover = (
            await admin.query(
              'SELECT (SELECT COALESCE(sum(in_use), 0)::int FROM limit_states) AS in_use, (SELECT count(*)::int FROM run_claims WHERE gates IS NOT NULL) AS holds',
            )
          ).rows[0];
          if (leftover.in_use !== 0 || leftover.holds !== 0)
            throw new Error(`slots not given back after the drain: ${JSON.stringify(leftover)}`);
          v.rounds.push(figures);
          ctx.log(
            `round ${r}/${ctx.rounds} ${v.label}: ${fmt(figures.runsPerSecond)} runs/s (${figures.seconds.toFixed(2)} s)`,
          );
        }
        const [without, inPlay] = through;
        ctx.log(
          `round ${r}/${ctx.rounds} ratio in play ÷ without: ${(inPlay.rounds[r - 1].runsPerSecond / without.rounds[r - 1].runsPerSecond).toFixed(2)}`,
        );
      }

      // Pacing: a limit of 50/s, burst 50, the only one.
      await admin.query('DELETE FROM limits');
      await defineLimit(admin, 'paced', PACE);
      await defineJob(admin, 'paced', { limits: ['paced'] });
      for (let r = 1; r <= ctx.rounds; r++) {
        await seed(admin, { n: paced, jobId: 'paced', gates: ['paced'] });
        await drain(url, admin, { n: paced, concurrency, timeoutMs: timeoutMs + (paced / PACE.rate) * 1000 });
        // On the claims' clock, from the database: when each run's tokens were taken (claimed_at,
        // the claim's now) and when its handler started (started_at, as its worker reported it).
        const { rows } = await admin.query(
          `SELECT extract(epoch FROM claimed_at) * 1000 AS c, extract(epoch FROM started_at) * 1000 AS s
           FROM runs WHERE job_id = 'paced' AND state = 'succeeded'`,
        );
        if (rows.length !== paced) throw new Error(`${rows.length} of ${paced} paced runs succeeded`);
        const claims = rows.map((x) => Number(x.c)).sort((x, y) => x - y);
        const starts = rows.map((x) => Number(x.s)).sort((x, y) => x - y);
        const f = {
          lastClaimS: (claims[claims.length - 1] - claims[0]) / 1000,
          lastStartS: (starts[starts.length - 1] - starts[0]) / 1000,
          idealS: (paced - PACE.burst) / PACE.rate,
          burst: claims.filter((t) => t === claims[0]).length,
          maxClaimsPerSecond: maxPerSecond(claims, PACE.burst),
          maxStartsPerSecond: maxPerSecond(starts, PACE.burst),
        };
        pacing.push(f);
        ctx.log(
          `round ${r}/${ctx.rounds} pacing: ${paced} runs, the last claimed ${f.lastClaimS.toFixed(2)} s after the first ` +
            `(ideal ${f.idealS} s; last start ${f.lastStartS.toFixed(2)} s after the first), ${f.burst} in the first claim, ` +
            `at most ${f.maxClaimsPerSecond} claimed (${f.maxStartsPerSecond} started) in a second after the burst`,
        );
      }
    } finally {
      await admin.end();
    }

    const [without, inPlay] = through.map((v) => ({
      name: v.name,
      label: v.label,
      rounds: v.rounds,
      runsPerSecond: summarise(v.rounds.map((f) => f.runsPerSecond)),
    }));
    const perRound = summarise(roundRatios(inPlay, without));
    const ofMedians = inPlay.runsPerSecond.median / without.runsPerSecond.median;
    const pace = {
      lastClaimS: summarise(pacing.map((f) => f.lastClaimS)),
      lastStartS: summarise(pacing.map((f) => f.lastStartS)),
      maxClaimsPerSecond: summarise(pacing.map((f) => f.maxClaimsPerSecond)),
      maxStartsPerSecond: summarise(pacing.map((f) => f.maxStartsPerSecond)),
      burst: summarise(pacing.map((f) => f.burst)),
    };
    const idealS = (paced - PACE.burst) / PACE.rate;
    const table = [
      markdownTable(
        [
          `${fmt(n)} ready runs, ${WORKERS} Workers × ${concurrency / WORKERS}`,
          'runs/s, median (min–max)',
          'in play ÷ without',
        ],
        [
          [without.label, fmtRange(without.runsPerSecond), ''],
          [
            inPlay.label,
            fmtRange(inPlay.runsPerSecond),
            `${ofMedians.toFixed(2)} of the medians; per round ${fmtRange(perRound, 2)} (target ≥ 0.8)`,
          ],
        ],
      ),
      '',
      markdownTable(
        [`${fmt(paced)} runs on a limit of ${PACE.rate}/s, burst ${PACE.burst}`, 'median (min–max)', 'ideal'],
        [
          ['claimed in the first claim', fmtRange(pace.burst), `${PACE.burst}`],
          [
            'last claim after the first, s',
            fmtRange(pace.lastClaimS, 2),
            `${idealS} (${fmt(paced - PACE.burst)} after the burst, at ${PACE.rate}/s)`,
          ],
          ['last handler start after the first, s', fmtRange(pace.lastStartS, 2), `${idealS}`],
          ['most claims in a second after the burst', fmtRange(pace.maxClaimsPerSecond), `${PACE.rate}`],
          [
            'most handler starts in a second after the burst',
            fmtRange(pace.maxStartsPerSecond),
            `${PACE.rate}`,
          ],
        ],
      ),
    ].join('\n');
    return {
      settings: {
        runs: n,
        pacedRuns: paced,
        workers: WORKERS,
        concurrencyEach: concurrency / WORKERS,
        pollIntervalMs: POLL_MS,
        inPlay: { limit: WIDE, tenantLimit: WIDE, jobMaxConcurrency: WIDE.cap },
        pace: PACE,
        rounds: ctx.rounds,
      },
      systems: [without, inPlay, { name: 'pacing', rounds: pacing, ...pace }],
      ratio: { ofMedians, perRound },
      table,
      notes: [
        `In play ÷ without: ${ofMedians.toFixed(2)} of the medians, ${perRound.median.toFixed(2)} per round (${perRound.min.toFixed(2)}–${perRound.max.toFixed(2)}); target ≥ 0.8.`,
        'Throughput: runs/s from the first handler call until the database shows every run succeeded; both variants in every round, back to back, on the same database, the same seeded backlog (distinct past slots, one job) and the same Workers. Without: no row in `limits` at all (claims skip the gates). In play: a claim either locks the three limit rows (and sets credits aside for its connection for the next 200 ms) or takes from those credits without locking them; it takes tokens and slots and records on its claim row the gates it took slots of; every completion gives them back.',
        `Pacing, from the database after each drain: claimed_at (the claim's now, when the tokens were taken) and started_at (the handler's start as its worker reported it) of every run. The ideal is the burst at once, then the rest at the rate: ${idealS} s from the first claim to the last (the issue's ${paced / PACE.rate} s counts the burst's second too). The windows are [t, t + 1 s) from each claim (start) after the first ${PACE.burst}.`,
      ],
    };
  },
};
