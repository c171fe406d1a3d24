// Scenario 6 of issue 7: a thundering herd. 100,000 jobs (smoke: 2,000) share one slot, like a
// `0 0 * * *` fleet at midnight. Tock's tick loop (batch 1,000: the herd is materialised over a
// hundred ticks in next_run_at order) and two Workers × 100 run in this process, on the database's
// clock. Measured: when the last run was materialised, when the last one started (both from the
// slot), and start − due (due = available_at: the slot, plus the job's jitter offset when
// `jitterSeconds` spreads the herd). Twice: without jitter, and with `jitterSeconds: 60`, which
// spreads the same herd evenly over a minute.
import { createPool, migrate, PostgresStore } from '../../dist/store/index.js';
import { fmt, fmtRange, markdownTable, recreateDatabase } from '../lib.mjs';
import {
  Delays,
  databaseTime,
  fmtDelays,
  overRounds,
  registerJobs,
  sleep,
  startTock,
  waitFor,
} from '../timing.mjs';

const TENANT = 'bench';
const TICK = { intervalMs: 500, lookaheadMs: 1000, batchSize: 1000 };
const WORKERS = 2;
const CONCURRENCY = 200; // 2 Workers × 100

/** (Re-)registers the herd with `jitterSeconds`; the definitions change, so each is an update. */
async function registerHerd(admin, { n, jitterSeconds, now }) {
  const jobs = Array.from({ length: n }, (_, i) => ({
    jobId: `herd-${i}`,
    schedule: '0 0 * * *',
    handler: 'noop',
    jitterSeconds,
  }));
  return registerJobs(new PostgresStore(admin), { tenantId: TENANT, jobs, now });
}

/** One herd: every job's next_run_at set to one slot a few seconds ahead, then drained. */
async function measureRound({ url, admin, time, n, jitterSeconds, timeoutMs }) {
  await admin.query('TRUNCATE runs, attempts, attempt_progress, run_queue, run_claims');
  const slot = Math.ceil((time.dbNow() + 3000) / 1000) * 1000;
  await admin.query('UPDATE jobs SET next_run_at = $1', [new Date(slot)]);
  await admin.query('VACUUM ANALYZE jobs, runs, attempts');
  const delays = new Delays(n);
  let lastStart = null;
  let lastDue = null;
  const stack = startTock({
    url,
    time,
    workers: WORKERS,
    concurrency: CONCURRENCY,
    tick: TICK,
    onStart: (run, at) => {
      if (run.scheduledFor.getTime() !== slot) return;
      const due = run.availableAt.getTime();
      delays.add(at - due);
      lastStart = at;
      if (lastDue === null || due > lastDue) lastDue = due;
    },
  });
  const deadline = slot + jitterSeconds * 1000 + timeoutMs;
  try {
    await waitFor(() => delays.count >= n || stack.errors.length > 0, {
      dbNow: time.dbNow,
      deadlineMs: deadline,
      everyMs: 50,
    });
  } finally {
    await stack.stop();
  }
  if (stack.errors.length > 0) throw stack.errors[0];
  if (delays.count < n) {
    throw new Error(
      `${fmt(delays.count)} of ${fmt(n)} herd runs started by ${fmt((deadline - slot) / 1000)} s after the slot`,
    );
  }
  const herdTicks = stack.ticks.filter((t) => t.created > 0);
  const lastTick = herdTicks[herdTicks.length - 1];
  return {
    n,
    jitterSeconds,
    started: delays.count,
    // From the slot: the last run materialised (its tick's end), the last run started.
    materialisedMs: lastTick ? lastTick.at + lastTick.ms - slot : null,
    allStartedMs: lastStart - slot,
    lastDueMs: lastDue - slot,
    runsPerSecond: n / ((lastStart - slot) / 1000),
    ticks: herdTicks.length,
    tickMs: overRounds(herdTicks, 'ms'),
    ...delays.summary(),
  };
}

export default {
  name: 'herd',
  description: '100,000 jobs due on one slot, with and without jitter: time until all started, start − due',
  async run(ctx) {
    const n = ctx.smoke ? 2000 : 100_000;
    const variants = ctx.smoke ? [0, 2] : [0, 60];
    const timeoutMs = ctx.smoke ? 30_000 : 300_000;
    const url = await recreateDatabase(ctx.databaseUrl, 'bench_herd');
    const admin = createPool(url, { max: 2, applicationName: 'tock-bench-admin' });
    const results = variants.map((jitterSeconds) => ({ jitterSeconds, rounds: [] }));
    try {
      await migrate(admin);
      const time = await databaseTime(url);
      ctx.log(
        `${fmt(n)} jobs '0 0 * * *', each round armed to one slot; tick ${JSON.stringify(TICK)}, ` +
          `${WORKERS} Workers × ${CONCURRENCY / WORKERS}; database clock offset ${fmt(time.offsetMs, 2)} ms`,
      );
      for (const res of results) {
        const ms = await registerHerd(admin, {
          n,
          jitterSeconds: res.jitterSeconds,
          now: time.clock.nowMs(),
        });
        ctx.log(
          `registered ${fmt(n)} jobs with jitterSeconds ${res.jitterSeconds} in ${fmt(ms / 1000, 1)} s`,
        );
        for (let r = 1; r <= ctx.rounds; r++) {
          const f = await measureRound({ url, admin, time, n, jitterSeconds: res.jitterSeconds, timeoutMs });
          res.rounds.push(f);
          ctx.log(
            `round ${r}/${ctx.rounds} jitter ${res.jitterSeconds} s: all materialised at +${fmt(f.materialisedMs)} ms ` +
              `(${f.ticks} ticks, median ${fmt(f.tickMs.median, 1)} ms), all started at +${fmt(f.allStartedMs)} ms ` +
              `(${fmt(f.runsPerSecond)} runs/s); start − due ${fmtDelays(f, 0)}`,
          );
          await sleep(500);
        }
      }
    } finally {
      await admin.end();
    }
    const out = results.map((res) => ({
      jitterSeconds: res.jitterSeconds,
      rounds: res.rounds,
      materialisedMs: overRounds(res.rounds, 'materialisedMs'),
      allStartedMs: overRounds(res.rounds, 'allStartedMs'),
      runsPerSecond: overRounds(res.rounds, 'runsPerSecond'),
      tickMs: overRounds(res.rounds, (f) => f.tickMs.median),
      p50: overRounds(res.rounds, 'p50'),
      p99: overRounds(res.rounds, 'p99'),
      max: overRounds(res.rounds, 'max'),
    }));
    const table = markdownTable(
      [
        `${fmt(n)} jobs on one slot`,
        'all materialised, s',
        'tick (batch 1,000), ms',
        'all started, s',
        'start − due p50 ms',
        'p99 ms',
        'max ms',
      ],
      out.map((o) => {
        const s = (x) => ({ median: x.median / 1000, min: x.min / 1000, max: x.max / 1000 });
        return [
          o.jitterSeconds === 0 ? 'no jitter' : `jitterSeconds ${o.jitterSeconds}`,
          fmtRange(s(o.materialisedMs), 2),
          fmtRange(o.tickMs, 1),
          fmtRange(s(o.allStartedMs), 2),
          fmtRange(o.p50, 0),
          fmtRange(o.p99, 0),
          fmtRange(o.max, 0),
        ];
      }),
    );
    return {
      settings: {
        jobs: n,
        schedule: '0 0 * * *, next_run_at set to one slot',
        variants: variants.map((j) => ({ jitterSeconds: j })),
        tick: TICK,
        workers: WORKERS,
        concurrencyEach: CONCURRENCY / WORKERS,
        pollIntervalMs: 500,
        rounds: ctx.rounds,
      },
      systems: out,
      table,
      notes: [
        'Times are from the slot, on the database server’s clock; start − due uses each run’s available_at (slot + jitter offset). Median (min–max) over rounds.',
        'Without jitter every run is due at the slot, so start − due is the herd’s queueing: it grows with the position in the drain. With jitter the due instants are spread over the window and the workers keep pace.',
        `All materialised: end of the last tick that inserted herd runs (${fmt(n / TICK.batchSize)} full ticks back to back, each ${fmt(TICK.batchSize)} jobs).`,
      ],
    };
  },
};
