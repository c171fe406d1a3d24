// Scenario 5 of issue 7: 10,000 runs hold leases, and the leases are renewed the way a Worker
// renews them (all at once when they are a third of the way through) for a fixed window. Three
// ways of renewing the same leases:
//   batched:  one `heartbeatRuns` call for every lease (one statement: what one Worker does);
//   by 1,000: one call per 1,000 leases (what ten Workers of concurrency 1,000, the most one
//             Worker allows, would send);
//   per run:  one `heartbeatRuns` call per lease (one statement per run), 8 in flight.
// Measured over the window: statements and transactions per second, rows updated per second in
// runs and run_claims (pg_stat_user_tables.n_tup_upd, and how many of those were HOT), WAL bytes,
// and the CPU time of this process and of the PostgreSQL server. Since migration 0007 a lease is
// a claim row for every run one claim took (here, claims of 1,000), and a renewal updates that row.
import { SystemClock } from '../../dist/core/index.js';
import { createPool, migrate, PostgresStore } from '../../dist/store/index.js';
import {
  cpuDelta,
  databaseUrl,
  fmt,
  fmtRange,
  markdownTable,
  postgresCpu,
  recreateDatabase,
  seedBacklog,
  summarise,
  withClient,
} from '../lib.mjs';

const clock = new SystemClock();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const MODES = [
  {
    name: 'batched',
    label: 'batched: 1 statement for all leases',
    chunk: Number.POSITIVE_INFINITY,
    inFlight: 1,
  },
  { name: 'by-1000', label: 'batched by 1,000 (10 Workers × 1,000)', chunk: 1000, inFlight: 1 },
  { name: 'per-run', label: 'per run: 1 statement per lease, 8 in flight', chunk: 1, inFlight: 8 },
];

/**
 * Reads the counters. Commits and WAL come from the `postgres` database; row updates must come
 * from the benchmark's database, and each such reading commits there itself (a connection's
 * start-up counts too): `readingCommits` of them, measured once by `calibrate`. `commits` leaves
 * out the readings made so far, whose statistics are in by the next reading (they have exited).
 */
const readings = { count: 0, commits: 0 };

async function counters(url) {
  const database = new URL(url).pathname.slice(1);
  const db = await withClient(databaseUrl(url, 'postgres'), async (c) => {
    const { rows } = await c.query(
      `SELECT xact_commit::float8 AS xact_commit, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal_bytes
       FROM pg_stat_database WHERE datname = $1`,
      [database],
    );
    return rows[0];
  });
  const commits = db.xact_commit - readings.count * readings.commits;
  readings.count += 1;
  const table = await withClient(url, async (c) => {
    const { rows } = await c.query(
      `SELECT sum(n_tup_upd)::float8 AS n_tup_upd, sum(n_tup_hot_upd)::float8 AS n_tup_hot_upd
       FROM pg_stat_user_tables WHERE relname IN ('runs', 'run_claims')`,
    );
    return rows[0];
  });
  return { commits, walBytes: db.wal_bytes, ...table };
}

/**
 * Counters once every backend has reported. A backend flushes its statistics when it exits, and
 * otherwise at most once a second (an idle one within ten): the pools that wrote are closed before
 * this is called, and it reads until two readings a second apart agree.
 */
async function settledCounters(url) {
  let last = await counters(url);
  for (let i = 0; i < 10; i++) {
    await sleep(1100);
    const now = await counters(url);
    if (now.commits === last.commits && now.n_tup_upd === last.n_tup_upd) return now;
    last = now;
  }
  throw new Error('the statistics counters did not settle within 11 s');
}

/** Measures how many commits one reading of the benchmark's database adds to its count. */
async function calibrate(url) {
  readings.commits = 0;
  const sample = async () => {
    await sleep(1100);
    const c = await counters(url);
    return c.commits + readings.count * readings.commits; // raw: nothing subtracted
  };
  let a = await sample();
  for (let i = 0; i < 5; i++) {
    const b = await sample();
    const c = await sample();
    if (c - b === b - a) {
      readings.commits = c - b;
      readings.count = 0;
      return readings.commits;
    }
    a = c;
  }
  throw new Error('could not measure the commits of one statistics reading');
}

/**
 * Seeds `n` runs and claims them all, 1,000 a claim, on a pool closed afterwards. The lease is
 * long (ten minutes) so that it outlives the setup; a renewal extends a claim by its own length,
 * so every renewal of the window writes the same rows whatever that length is.
 */
async function holdLeases(url, n) {
  const pool = createPool(url, { max: 1, applicationName: 'tock-bench-admin' });
  try {
    await seedBacklog(pool, n);
    const store = new PostgresStore(pool, { leaseMs: 600_000 });
    const leases = [];
    while (leases.length < n) {
      const claimed = await store.claimRuns({
        workerId: 'bench-holder',
        pool: 'default',
        max: Math.min(1000, n - leases.length),
        now: clock.nowMs(),
      });
      if (claimed.length === 0) throw new Error(`claimed ${leases.length} of ${n} runs`);
      for (const r of claimed) leases.push({ runId: r.runId, leaseToken: r.leaseToken });
    }
    await pool.query('VACUUM ANALYZE runs, run_claims');
    await pool.query('CHECKPOINT');
    return leases;
  } finally {
    await pool.end();
  }
}

/** One renewal of every lease in `mode`'s way; returns statements sent and leases renewed. */
async function renew(store, leases, mode) {
  let statements = 0;
  let renewed = 0;
  let lost = 0;
  let next = 0;
  const chunk = Math.min(mode.chunk, leases.length);
  const lane = async () => {
    while (next < leases.length) {
      const slice = leases.slice(next, next + chunk);
      next += chunk;
      const r = await store.heartbeatRuns({ leases: slice, now: clock.nowMs() });
      statements += 1;
      renewed += r.renewed.length;
      lost += r.lost.length;
    }
  };
  await Promise.all(Array.from({ length: mode.inFlight }, lane));
  return { statements, renewed, lost };
}

/** One measured window of `mode`: renewals at 0, W/3 and 2W/3, counters around the window. */
async function measureMode(url, mode, { n, windowMs }) {
  const leaseMs = windowMs; // renewed every third of its length, like the Worker does
  const leases = await holdLeases(url, n);
  const pool = createPool(url, { max: mode.inFlight + 1, applicationName: 'tock-bench-heartbeats' });
  const store = new PostgresStore(pool, { leaseMs });
  // Connect before the window, without a statement: a connection's start-up commits once, and
  // that is reported at once, while a statement's commit right after it would be held back (a
  // backend reports at most once a second) and land inside the window.
  const clients = await Promise.all(Array.from({ length: mode.inFlight }, () => pool.connect()));
  for (const c of clients) c.release();
  const before = await settledCounters(url);
  const pg0 = await postgresCpu();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const renewals = [];
  for (let k = 0; k < 3; k++) {
    const due = t0 + (k * windowMs) / 3;
    if (performance.now() < due) await sleep(due - performance.now());
    const s = performance.now();
    const r = await renew(store, leases, mode);
    renewals.push({ ...r, ms: performance.now() - s });
    if (r.renewed !== n)
      throw new Error(`${mode.name}: renewed ${r.renewed} of ${n} leases (${r.lost} lost)`);
  }
  const rest = t0 + windowMs - performance.now();
  if (rest > 0) await sleep(rest);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const pg1 = await postgresCpu();
  await pool.end(); // a backend flushes its statistics when it exits
  const after = await settledCounters(url);
  const statements = renewals.reduce((a, r) => a + r.statements, 0);
  return {
    seconds,
    statements,
    statementsPerSecond: statements / seconds,
    transactionsPerSecond: (after.commits - before.commits) / seconds,
    rowsUpdatedPerSecond: (after.n_tup_upd - before.n_tup_upd) / seconds,
    hotShare: (after.n_tup_hot_upd - before.n_tup_hot_upd) / Math.max(1, after.n_tup_upd - before.n_tup_upd),
    walBytesPerSecond: (after.walBytes - before.walBytes) / seconds,
    workerCpuMs: (cpu.user + cpu.system) / 1000,
    postgresCpuMs: cpuDelta(pg0, pg1),
    renewalMs: renewals.map((r) => r.ms),
  };
}

export default {
  name: 'heartbeats',
  description: '10,000 held leases renewed in one statement vs one statement per run: writes/s and CPU',
  async run(ctx) {
    const n = ctx.smoke ? 1000 : 10_000;
    const windowMs = ctx.smoke ? 3000 : 30_000;
    const url = await recreateDatabase(ctx.databaseUrl, 'bench_tock');
    const admin = createPool(url, { max: 1, applicationName: 'tock-bench-admin' });
    try {
      await migrate(admin);
      await new PostgresStore(admin).upsertJobs({
        tenantId: 'bench',
        jobs: [{ jobId: 'noop', schedule: '@every 1h', handler: 'noop' }],
        now: clock.nowMs(),
      });
    } finally {
      await admin.end();
    }
    const perReading = await calibrate(url);
    const results = MODES.map((m) => ({ name: m.name, label: m.label, rounds: [] }));
    ctx.log(
      `${n} leases of ${windowMs / 1000} s, renewed every ${windowMs / 3000} s, window ${windowMs / 1000} s ` +
        `(one statistics reading commits ${perReading} times: left out)`,
    );
    for (let r = 1; r <= ctx.rounds; r++) {
      for (const [i, mode] of MODES.entries()) {
        const f = await measureMode(url, mode, { n, windowMs });
        results[i].rounds.push(f);
        ctx.log(
          `round ${r}/${ctx.rounds} ${mode.name}: ${fmt(f.statementsPerSecond, 1)} statements/s, ` +
            `${fmt(f.transactionsPerSecond, 1)} commits/s, ${fmt(f.rowsUpdatedPerSecond)} rows/s ` +
            `(${fmt(f.hotShare * 100)} % HOT), ${fmt(f.walBytesPerSecond / 1024)} KiB WAL/s, ` +
            `CPU ${fmt(f.workerCpuMs)} ms here + ${fmt(f.postgresCpuMs)} ms PostgreSQL; ` +
            `one renewal of all leases ${f.renewalMs.map((ms) => fmt(ms)).join('/')} ms`,
        );
      }
    }
    const keys = [
      'statementsPerSecond',
      'transactionsPerSecond',
      'rowsUpdatedPerSecond',
      'hotShare',
      'walBytesPerSecond',
      'workerCpuMs',
      'postgresCpuMs',
    ];
    for (const res of results) {
      for (const k of keys) res[k] = summarise(res.rounds.map((f) => f[k] ?? 0));
      res.renewalMs = summarise(res.rounds.flatMap((f) => f.renewalMs));
    }
    const table = markdownTable(
      [
        `${fmt(n)} leases, ${windowMs / 1000} s window`,
        'statements/s',
        'commits/s',
        'rows updated/s',
        'HOT %',
        'WAL KiB/s',
        'worker CPU ms',
        'PostgreSQL CPU ms',
        'one renewal, ms',
      ],
      results.map((r) => [
        r.label,
        fmtRange(r.statementsPerSecond, 1),
        fmtRange(r.transactionsPerSecond, 1),
        fmtRange(r.rowsUpdatedPerSecond),
        fmtRange({ median: r.hotShare.median * 100, min: r.hotShare.min * 100, max: r.hotShare.max * 100 }),
        fmtRange({
          median: r.walBytesPerSecond.median / 1024,
          min: r.walBytesPerSecond.min / 1024,
          max: r.walBytesPerSecond.max / 1024,
        }),
        fmtRange(r.workerCpuMs),
        fmtRange(r.postgresCpuMs),
        fmtRange(r.renewalMs),
      ]),
    );
    return {
      settings: { leases: n, windowMs, leaseMs: windowMs, renewEveryMs: windowMs / 3, renewalsPerWindow: 3 },
      systems: results,
      table,
      notes: [
        'A renewal updates claim rows, one per claim (here 10 claims of 1,000 runs), not run rows: a batched heartbeat of every lease is one statement, one commit and 10 row versions; one statement per run renews the claim of that run, 10,000 times a round.',
        'HOT %: a renewal rewrites run_claims.lease_expires_at, which the reaper’s index covers, so it is an ordinary update (one new version with an entry in each of the two indexes of run_claims) unless the expiry does not move.',
        'CPU is over the whole window (ms): this process, and every postgres process on the machine. WAL is the whole server’s. Commits/s comes from pg_stat_database, rows from pg_stat_user_tables.',
      ],
    };
  },
};
