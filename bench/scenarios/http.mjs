// Issue 19, item 3: what working through `tock server` costs a worker, against working on the
// database. Every process is the real binary of this tree (`bin/tock.js`, built), on a database of
// its own (`bench_http`, recreated at the start and dropped at the end), with one worker key of
// tenant `bench` made by `tock keys create`, and the no-op handler of bench/noop-handlers.mjs.
// The servers run at their defaults, the tenant's request quotas included (per server process:
// `--api-rate`/`--api-burst`, and since batched results `--worker-rate`/`--worker-burst` for lease
// requests), with their scheduler and reaper, which have nothing else to do.
//
// Throughput: a backlog of ready runs (`seedBacklog`, direct inserts) drained by
//   database  one `tock worker --database-url`, concurrency C, prefetch 3 C (the best Tock
//             layout of the throughput scenario);
//   http-1    one `tock worker --url` through one `tock server`, the same settings;
//   http-2    two `tock worker --url`, C/2 and prefetch 3 C/2 each, each through a server of its
//             own (two `tock server` processes): the same total concurrency.
// Runs/s = runs succeeded ÷ (last finished_at − first started_at) of those runs, read from the
// database after the drain. Rounds are interleaved (database, http-1, http-2 per round); the ratio
// to the database worker is taken within each round. A drain still going after its cap is stopped
// and measured over the runs it finished (marked capped). Requests per run and the 429s the quota
// answered come from each server's /metrics (`--metrics-port`), before and after the drain. CPU per
// run (the workers, the servers, every PostgreSQL process on the machine) is taken from the first
// poll that sees a finished run to the last, over the runs finished in between.
//
// Start latency: R jobs `@every 1s` with `jitterSeconds: 1` (as the latency scenario: together R
// runs a second, evenly spread), scheduled by one `tock server` and worked by one `tock worker`
// (concurrency C, its defaults otherwise) through that server (`--url`) or on the database. Delay =
// the handler's start as it stamped it (handler `stamp` returns its clock, kept as the run's
// output; the processes share this machine's clock, put on the database's) − the run's
// available_at, for the runs of the slots in the measured window, after a warm-up. The run's
// started_at (the start as the worker reported it; over HTTP an estimate of the server's clock)
// and claimed_at are summarised beside it.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
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
} from '../lib.mjs';
import { freePort, processCpuMs, runTockSync, TockProcesses } from '../processes.mjs';
import { databaseTime, durationOption, overRounds, percentiles, registerJobs, sleep } from '../timing.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const HANDLERS = path.join(here, '..', 'noop-handlers.mjs');
const DATABASE = 'bench_http';
const TENANT = 'bench';
/** Runs of the measured window still unfinished this long after it ends: the worker did not keep up. */
const DRAIN_MS = 5000;
/** The first slot of a latency window is at least this far ahead when its jobs are enabled. */
const LEAD_MS = 2000;
const POLL_MS = 250;

/** Sizes: `TOCK_BENCH_HTTP_RUNS` sets the backlog, `TOCK_BENCH_DURATION` the latency window. */
function sizes(ctx) {
  const runs = Number(process.env.TOCK_BENCH_HTTP_RUNS || (ctx.smoke ? 500 : 100_000));
  if (!Number.isInteger(runs) || runs < 100) throw new Error('TOCK_BENCH_HTTP_RUNS must be an integer ≥ 100');
  const duration = durationOption(ctx, ctx.smoke ? 3000 : 30_000);
  return {
    runs,
    capMs: ctx.smoke ? 45_000 : 180_000,
    concurrency: ctx.options.concurrency ?? 100,
    latency: {
      rate: ctx.smoke ? 200 : 1000,
      warmupS: ctx.smoke ? 1 : 5,
      seconds: Math.round(duration.ms / 1000),
      durationGiven: duration.given,
    },
  };
}

/** `tock_http_request_duration_seconds_count` of a server, by `METHOD route status`. */
async function requestCounts(server) {
  const res = await fetch(server.metrics, { signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`${server.metrics}: ${res.status}`);
  const counts = new Map();
  for (const line of (await res.text()).split('\n')) {
    const m = /^tock_http_request_duration_seconds_count\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const key = `${labels.method} ${labels.route} ${labels.status}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(m[2]));
  }
  return counts;
}

/** The requests the servers answered between two `requestCounts` readings of each, summed over servers. */
function requestsBetween(before, after) {
  const out = {};
  after.forEach((counts, i) => {
    for (const [k, v] of counts) {
      const d = v - (before[i].get(k) ?? 0);
      if (d > 0) out[k] = (out[k] ?? 0) + d;
    }
  });
  return out;
}

/** The requests by route and status, for a progress line: `POST /v1/leases 200 × 12, …`. */
const breakdown = (requests) =>
  Object.entries(requests)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} × ${fmt(v)}`)
    .join(', ');

const total = (requests) => Object.values(requests).reduce((a, b) => a + b, 0);
const rateLimited = (requests) =>
  Object.entries(requests)
    .filter(([k]) => k.endsWith(' 429'))
    .reduce((a, [, v]) => a + v, 0);

/** One `tock server` on `url`: API on a free port, /metrics without a key on another. */
async function startServer(procs, name, url) {
  const metricsPort = await freePort();
  const child = procs.start(
    name,
    ['server', '--host', '127.0.0.1', '--port', '0', '--metrics-port', String(metricsPort)],
    { DATABASE_URL: url, TOCK_LOG_LEVEL: 'warn', TOCK_LOG_FORMAT: 'json' },
  );
  const base = (await procs.waitForOutput(child, /tock listening on (\S+)/))[1];
  const server = { name, child, base, metrics: `http://127.0.0.1:${metricsPort}/metrics` };
  // The metrics listener may come up just after the announcement.
  for (let i = 0; ; i++) {
    try {
      await requestCounts(server);
      return server;
    } catch (err) {
      procs.check(child);
      if (i >= 100) throw err;
      await sleep(100);
    }
  }
}

/**
 * One `tock worker` process: through `server` (`--url`, with `key`) or, without one, on the
 * database at `url`. Logs at warn: at info a worker logs two lines per run.
 */
function startWorker(procs, { name, url, server, key, concurrency, prefetch }) {
  const args = [
    'worker',
    '--handlers',
    HANDLERS,
    '--concurrency',
    String(concurrency),
    '--prefetch',
    String(prefetch),
    '--grace',
    '2s',
    '--worker-id',
    name,
  ];
  const env = { TOCK_LOG_LEVEL: 'warn', TOCK_LOG_FORMAT: 'json' };
  if (server) Object.assign(env, { TOCK_URL: server.base, TOCK_KEY: key });
  else env.DATABASE_URL = url;
  return procs.start(name, args, env);
}

/** The throughput layouts at total concurrency `c`. `server` is an index into the running servers. */
function layouts(c) {
  const half = { concurrency: c / 2, prefetch: (3 * c) / 2 };
  return [
    {
      name: 'database',
      label: `tock worker --database-url, 1 × ${c}, prefetch ${3 * c}`,
      workers: [{ server: null, concurrency: c, prefetch: 3 * c }],
    },
    {
      name: 'http-1',
      label: `tock worker --url, 1 × ${c}, prefetch ${3 * c}, through 1 tock server`,
      workers: [{ server: 0, concurrency: c, prefetch: 3 * c }],
    },
    {
      name: 'http-2',
      label: `2 tock worker --url × ${c / 2}, prefetch ${(3 * c) / 2}, each through its own tock server`,
      workers: [
        { server: 0, ...half },
        { server: 1, ...half },
      ],
    },
  ];
}

const succeeded = async (admin) =>
  (await admin.query(`SELECT count(*)::int AS n FROM runs WHERE state = 'succeeded'`)).rows[0].n;

/** CPU ms so far of the workers and of the servers, and every PostgreSQL process's. */
async function cpuSample(workers, servers) {
  const sum = (children) => children.reduce((a, c) => a + (processCpuMs(c.pid) ?? Number.NaN), 0);
  return {
    workers: sum(workers),
    servers: sum(servers.map((s) => s.child)),
    postgres: await postgresCpu(),
  };
}

/** One drain of `n` ready runs by `layout`'s workers; its figures. */
async function drain({ procs, admin, url, key, servers, layout, n, capMs, round }) {
  await seedBacklog(admin, n);
  await admin.query('CHECKPOINT');
  const before = await Promise.all(servers.map(requestCounts));
  const workers = layout.workers.map((w, i) =>
    startWorker(procs, {
      name: `bench-${layout.name}-${round}-${i}`,
      url,
      key,
      server: w.server === null ? null : servers[w.server],
      concurrency: w.concurrency,
      prefetch: w.prefetch,
    }),
  );
  const deadline = performance.now() + capMs;
  let first = null; // { done, cpu } at the first poll that saw a finished run
  let last = null;
  try {
    for (;;) {
      await sleep(POLL_MS);
      for (const w of workers) procs.check(w);
      const done = await succeeded(admin);
      if (done > 0) {
        const sample = { done, cpu: await cpuSample(workers, servers) };
        if (first === null) first = sample;
        last = sample;
      }
      if (done >= n || performance.now() > deadline) break;
    }
  } finally {
    await Promise.all(workers.map((w) => procs.stop(w)));
  }
  const requests = requestsBetween(before, await Promise.all(servers.map(requestCounts)));
  const { rows } = await admin.query(
    `SELECT count(*)::int AS n,
       extract(epoch FROM max(finished_at) - min(started_at))::float8 AS seconds
     FROM runs WHERE state = 'succeeded'`,
  );
  const done = rows[0].n;
  if (done === 0) throw new Error(`${layout.label}: no run finished in ${capMs / 1000} s`);
  const perRun = (ms) =>
    first !== null && last.done > first.done && ms !== null ? (ms * 1000) / (last.done - first.done) : null;
  const httpRequests = layout.workers.some((w) => w.server !== null);
  return {
    runs: n,
    succeeded: done,
    capped: done < n,
    seconds: rows[0].seconds,
    runsPerSecond: done / rows[0].seconds,
    requests,
    requestsPerRun: httpRequests ? total(requests) / done : null,
    rateLimited: httpRequests ? rateLimited(requests) : null,
    workerCpuUsPerRun: perRun(last && last.cpu.workers - first.cpu.workers),
    serverCpuUsPerRun: httpRequests ? perRun(last && last.cpu.servers - first.cpu.servers) : null,
    postgresCpuUsPerRun: perRun(last && cpuDelta(first.cpu.postgres, last.cpu.postgres)),
  };
}

/** The latency jobs: `rate` jobs `@every 1s`, jitter 1 s, registered disabled. */
async function registerLatencyJobs(admin, rate) {
  const jobs = Array.from({ length: rate }, (_, i) => ({
    jobId: `lat-${i}`,
    schedule: '@every 1s',
    handler: 'stamp',
    jitterSeconds: 1,
  }));
  await registerJobs(new PostgresStore(admin), { tenantId: TENANT, jobs, now: Date.now() });
}

/**
 * One latency window: a worker (`via` 'http' through `server`, or 'database'), the jobs enabled
 * from a whole second LEAD_MS ahead, `warmupS` seconds not counted, then `seconds` measured.
 */
async function latencyWindow({ procs, admin, url, key, server, via, time, concurrency, w, round }) {
  await admin.query('TRUNCATE runs, attempts, run_queue, run_claims, attempt_progress');
  const before = await requestCounts(server);
  const worker = startWorker(procs, {
    name: `bench-latency-${via}-${round}`,
    url,
    key,
    server: via === 'http' ? server : null,
    concurrency,
    prefetch: 0,
  });
  const t0 = Math.ceil((time.dbNow() + LEAD_MS) / 1000) * 1000;
  const from = t0 + w.warmupS * 1000;
  const to = from + w.seconds * 1000;
  const expected = w.rate * w.seconds;
  const inWindow = `FROM runs WHERE scheduled_for >= $1 AND scheduled_for < $2`;
  const window = [new Date(from), new Date(to)];
  let finished = 0;
  try {
    await admin.query(`UPDATE jobs SET enabled = true, next_run_at = $1 WHERE job_id LIKE 'lat-%'`, [
      new Date(t0),
    ]);
    while (time.dbNow() < to) {
      procs.check(worker);
      await sleep(Math.min(500, to - time.dbNow()));
    }
    await admin.query(`UPDATE jobs SET enabled = false WHERE job_id LIKE 'lat-%'`);
    for (;;) {
      procs.check(worker);
      finished = (await admin.query(`SELECT count(*)::int AS n ${inWindow} AND state = 'succeeded'`, window))
        .rows[0].n;
      if (finished >= expected || time.dbNow() > to + DRAIN_MS) break;
      await sleep(100);
    }
  } finally {
    await admin.query(`UPDATE jobs SET enabled = false WHERE job_id LIKE 'lat-%'`);
    await procs.stop(worker);
  }
  const requests = requestsBetween([before], [await requestCounts(server)]);
  // Delay: the handler's own stamp (its clock is this machine's, as ours) on the database's clock,
  // minus available_at. Beside it, started_at as the worker reported it, and the server's claim.
  const { rows } = await admin.query(
    `SELECT output::float8 + $3::float8 - extract(epoch FROM available_at)::float8 * 1000 AS ms,
       extract(epoch FROM started_at - available_at)::float8 * 1000 AS recorded,
       extract(epoch FROM claimed_at - available_at)::float8 * 1000 AS claimed,
       extract(epoch FROM finished_at)::float8 * 1000 AS finished
     ${inWindow} AND state = 'succeeded'`,
    [...window, time.offsetMs],
  );
  const delays = percentiles(rows.map((r) => r.ms));
  const recorded = percentiles(rows.map((r) => r.recorded));
  const claimed = percentiles(rows.map((r) => r.claimed));
  const lastFinish = rows.reduce((a, r) => Math.max(a, r.finished), Number.NEGATIVE_INFINITY);
  return {
    via,
    rate: w.rate,
    seconds: w.seconds,
    expected,
    started: rows.length,
    keptUp: rows.length >= expected && lastFinish <= to + DRAIN_MS,
    ...delays,
    recordedP50: recorded.p50,
    recordedP99: recorded.p99,
    claimedP50: claimed.p50,
    claimedP99: claimed.p99,
    requests,
    requestsPerSecond: total(requests) / (w.warmupS + w.seconds),
    rateLimited: rateLimited(requests),
  };
}

/** Median, min and max of `key` over the rounds that have it (failed rounds have none). */
const over = (rounds, key) => overRounds(rounds, (f) => (f.error ? null : f[key]));
const failures = (rounds) => rounds.filter((f) => f.error).length;
/** `cell`, or how many rounds failed beside it. */
const withFailures = (rounds, cell) =>
  failures(rounds) === 0 ? cell : `${cell} (${failures(rounds)} of ${rounds.length} failed)`;

/** The throughput table and its per-layout summaries. */
function throughputReport(results, concurrency) {
  const base = results.find((r) => r.name === 'database');
  const out = results.map((r) => ({
    ...r,
    runsPerSecond: over(r.rounds, 'runsPerSecond'),
    // Within each round, against that round's database drain.
    ratio: overRounds(
      r.rounds.map((f, i) => ({
        ratio: f.error || base.rounds[i].error ? null : f.runsPerSecond / base.rounds[i].runsPerSecond,
      })),
      'ratio',
    ),
  }));
  const table = markdownTable(
    [
      `throughput (total concurrency ${concurrency})`,
      'runs/s, median (min–max)',
      '÷ database worker, per round: median (min–max)',
      'requests/run',
      '429s',
      'worker CPU µs/run',
      'server CPU µs/run',
      'PostgreSQL CPU µs/run',
      'drained',
    ],
    out.map((r) => {
      const http = r.name !== 'database';
      return [
        r.label,
        withFailures(r.rounds, fmtRange(r.runsPerSecond)),
        http && r.ratio.median !== null
          ? `${fmt(r.ratio.median * 100)} % (${fmt(r.ratio.min * 100)}–${fmt(r.ratio.max * 100)})`
          : '',
        http ? fmt(over(r.rounds, 'requestsPerRun').median, 3) : '',
        http ? r.rounds.map((f) => (f.error ? '–' : fmt(f.rateLimited))).join(', ') : '',
        fmt(over(r.rounds, 'workerCpuUsPerRun').median, 1),
        http ? fmt(over(r.rounds, 'serverCpuUsPerRun').median, 1) : '',
        fmt(over(r.rounds, 'postgresCpuUsPerRun').median, 1),
        r.rounds
          .map((f) =>
            f.error ? 'failed' : f.capped ? `${fmt(f.succeeded)} of ${fmt(f.runs)} (capped)` : 'all',
          )
          .join(', '),
      ];
    }),
  );
  return { out, table };
}

/** The latency table and its per-path summaries. */
function latencyReport(results, concurrency, w) {
  const out = results.map((r) => ({
    ...r,
    p50: over(r.rounds, 'p50'),
    p95: over(r.rounds, 'p95'),
    p99: over(r.rounds, 'p99'),
    max: over(r.rounds, 'max'),
    recordedP99: over(r.rounds, 'recordedP99'),
    claimedP99: over(r.rounds, 'claimedP99'),
    keptUpRounds: r.rounds.filter((f) => f.keptUp).length,
  }));
  const table = markdownTable(
    [
      `start latency (concurrency ${concurrency})`,
      'runs/s × s',
      'p50 ms',
      'p95 ms',
      'p99 ms',
      'max ms',
      'p99 of started_at ms',
      'p99 of claimed_at ms',
      'started / due',
      'kept up',
      'requests/s',
      '429s',
    ],
    out.map((o) => [
      o.label,
      `${fmt(w.rate)}/s × ${w.seconds} s`,
      withFailures(o.rounds, fmtRange(o.p50, 1)),
      fmtRange(o.p95, 1),
      fmtRange(o.p99, 1),
      fmtRange(o.max, 0),
      fmtRange(o.recordedP99, 1),
      fmtRange(o.claimedP99, 1),
      `${fmt(over(o.rounds, 'started').median)} / ${fmt(w.rate * w.seconds)}`,
      `${o.keptUpRounds}/${o.rounds.length}`,
      fmt(over(o.rounds, 'requestsPerSecond').median),
      o.rounds.map((f) => (f.error ? '–' : fmt(f.rateLimited))).join(', '),
    ]),
  );
  return { out, table };
}

/** `measure()`'s figures, or `{ error }` when it throws: one failed drain does not end the scenario. */
async function attempt(ctx, what, measure) {
  try {
    return await measure();
  } catch (err) {
    ctx.log(`${what}: FAILED: ${String(err?.message ?? err).slice(0, 3000)}`);
    return { error: String(err?.message ?? err) };
  }
}

/** The throughput rounds, interleaved: database, http-1, http-2 in each. */
async function throughputRounds(ctx, { procs, admin, url, key, s }) {
  // Two servers up throughout (the database layout runs beside them too).
  const servers = [await startServer(procs, 'server-1', url), await startServer(procs, 'server-2', url)];
  const results = layouts(s.concurrency).map((l) => ({ ...l, rounds: [] }));
  for (let r = 1; r <= ctx.rounds; r++) {
    for (const layout of results) {
      const what = `round ${r}/${ctx.rounds} ${layout.label}`;
      const f = await attempt(ctx, what, () =>
        drain({ procs, admin, url, key, servers, layout, n: s.runs, capMs: s.capMs, round: r }),
      );
      layout.rounds.push(f);
      if (f.error) continue;
      ctx.log(
        `${what}: ${fmt(f.runsPerSecond)} runs/s ` +
          `(${fmt(f.succeeded)} runs in ${f.seconds.toFixed(2)} s${f.capped ? ', CAPPED' : ''})` +
          (f.requestsPerRun === null
            ? ''
            : `; ${fmt(f.requestsPerRun, 3)} requests/run (${breakdown(f.requests)})`),
      );
    }
  }
  for (const server of servers) await procs.stop(server.child);
  return results;
}

/** The latency rounds: one server schedules; the worker goes through it or to the database. */
async function latencyRounds(ctx, { procs, admin, url, key, s }) {
  const c = s.concurrency;
  const server = await startServer(procs, 'server-latency', url);
  const time = await databaseTime(url);
  const results = [
    { via: 'database', label: `tock worker --database-url, ${c}`, rounds: [] },
    { via: 'http', label: `tock worker --url, ${c}, through 1 tock server`, rounds: [] },
  ];
  for (let r = 1; r <= ctx.rounds; r++) {
    for (const l of results) {
      const what = `round ${r}/${ctx.rounds} ${fmt(s.latency.rate)}/s × ${s.latency.seconds} s, ${l.label}`;
      const f = await attempt(ctx, what, () =>
        latencyWindow({
          procs,
          admin,
          url,
          key,
          server,
          via: l.via,
          time,
          concurrency: c,
          w: s.latency,
          round: r,
        }),
      );
      l.rounds.push(f);
      if (f.error) continue;
      ctx.log(
        `${what}: p50 ${fmt(f.p50, 1)} / p99 ${fmt(f.p99, 1)} / max ${fmt(f.max, 1)} ms ` +
          `(started_at p99 ${fmt(f.recordedP99, 1)}, claimed_at p50/p99 ${fmt(f.claimedP50, 1)}/${fmt(f.claimedP99, 1)}); ` +
          `started ${fmt(f.started)}/${fmt(f.expected)}${f.keptUp ? '' : ' — did NOT keep up'}; ` +
          `${fmt(f.requestsPerSecond)} requests/s (${breakdown(f.requests) || 'none'})`,
      );
    }
  }
  await procs.stop(server.child);
  return results;
}

/** The targets of issue 19 item 3, and what the figures rest on. */
function scenarioNotes(s, tp, lt) {
  const notes = [];
  for (const r of tp.out.filter((x) => x.name !== 'database')) {
    const ratio = r.ratio.median;
    notes.push(
      `${r.label}: ${ratio === null ? '–' : fmt(ratio * 100, 1)} % of the database worker's runs/s, median per round (target ≥ 50 %: ${ratio !== null && ratio >= 0.5 ? 'met' : 'NOT met'})`,
    );
  }
  const http = lt.out.find((o) => o.via === 'http');
  const p99 = http.p99.median;
  const met = p99 !== null && p99 <= 25 && http.keptUpRounds === http.rounds.length;
  notes.push(
    `${http.label} at ${fmt(s.latency.rate)}/s: p99 ${fmt(p99, 1)} ms (target ≤ 25 ms at 1,000/s: ${
      s.latency.rate < 1000 ? 'not measured at 1,000/s' : met ? 'met' : 'NOT met'
    })`,
  );
  if ([...tp.out, ...lt.out].some((r) => r.rounds.some((f) => f.rateLimited > 0)))
    notes.push(
      'The tenant request quota (per server process, at its default) answered 429 in some drains or windows (the 429s column): those figures are bounded by the quota.',
    );
  return notes;
}

const SETUP_NOTES = (s) => [
  `Throughput: ${fmt(s.runs)} ready runs a drain (TOCK_BENCH_HTTP_RUNS), no-op handler; runs/s = runs succeeded ÷ (last finished_at − first started_at), from the database. A drain still going after ${s.capMs / 1000} s is stopped and measured over the runs it finished.`,
  'Workers are real `tock worker` processes (`--log-level warn`: at info a worker logs two lines a run); servers real `tock server` processes at their defaults, the scheduler and reaper idle. http-2: one worker per server, each with half the concurrency and prefetch. Requests and 429s from the servers’ /metrics (--metrics-port).',
  'CPU per run: from the first poll that saw a finished run to the last, over the runs finished in between. PostgreSQL CPU counts every postgres process on the machine.',
  `Start latency: ${fmt(s.latency.rate)} jobs @every 1s with jitterSeconds 1 scheduled by one tock server (tick 500 ms, lookahead 1 s); one worker, concurrency ${s.concurrency}, prefetch 0, claim-ahead 250 ms (its defaults). Delay = the handler's start (its own clock, this machine's, put on the database's by the offset measured once) − the run's available_at, for the runs of the measured slots. Beside it, the p99 of started_at − available_at (the start as the worker reported it: over HTTP, its estimate of the server's clock) and of claimed_at − available_at (when the server claimed the run; negative: ahead of its instant). ${s.latency.warmupS} s warm-up, then ${s.latency.seconds} s (${s.latency.durationGiven ? 'TOCK_BENCH_DURATION' : 'the default; TOCK_BENCH_DURATION sets it'}). Kept up: every run of the window finished within ${DRAIN_MS / 1000} s of its end.`,
];

export default {
  name: 'http',
  description:
    'workers through tock server (--url) against on the database: backlog runs/s through 1 and 2 servers, start latency at 1,000/s (issue 19)',
  async run(ctx) {
    const s = sizes(ctx);
    if (s.concurrency % 2 !== 0)
      throw new Error('--concurrency must be even (http-2 splits it over two workers)');
    const url = await recreateDatabase(ctx.databaseUrl, DATABASE);
    const admin = createPool(url, { max: 2, applicationName: 'tock-bench-admin' });
    const procs = new TockProcesses();
    try {
      await migrate(admin);
      await new PostgresStore(admin).upsertJobs({
        tenantId: TENANT,
        jobs: [{ jobId: 'noop', schedule: '@every 1h', handler: 'noop' }],
        now: Date.now(),
      });
      await registerLatencyJobs(admin, s.latency.rate);
      // Nothing for the schedulers to do until a latency window enables its jobs.
      await admin.query('UPDATE jobs SET enabled = false');
      const key = runTockSync(['keys', 'create', '--tenant', TENANT, '--role', 'worker'], {
        DATABASE_URL: url,
      });
      ctx.log(
        `${fmt(s.runs)} runs a drain (cap ${s.capMs / 1000} s), concurrency ${s.concurrency}; latency ` +
          `${fmt(s.latency.rate)}/s, ${s.latency.warmupS} s warm-up + ${s.latency.seconds} s; ` +
          'servers at their defaults (request quotas included)',
      );
      const env = { procs, admin, url, key, s };
      const tp = throughputReport(await throughputRounds(ctx, env), s.concurrency);
      const lt = latencyReport(await latencyRounds(ctx, env), s.concurrency, s.latency);
      const notes = scenarioNotes(s, tp, lt);
      for (const n of notes) ctx.log(n);
      const table = `${tp.table}\n\n${lt.table}`;
      const failed = [...tp.out, ...lt.out].flatMap((r) =>
        r.rounds.filter((f) => f.error).map((f) => `${r.label}: ${f.error.split('\n')[0]}`),
      );
      // A failed drain or window fails the scenario (the harness exits non-zero), with the figures
      // of the others in the message.
      if (failed.length > 0)
        throw new Error(`${failed.length} drains or windows failed:\n${failed.join('\n')}\n\n${table}`);
      return {
        settings: { ...s, rounds: ctx.rounds, database: DATABASE },
        systems: [
          ...tp.out.map((r) => ({ kind: 'throughput', ...r })),
          ...lt.out.map((r) => ({ kind: 'latency', ...r })),
        ],
        table,
        notes: [...notes, ...SETUP_NOTES(s)],
      };
    } finally {
      await procs.close();
      await admin.end();
      await dropDatabase(ctx.databaseUrl);
    }
  },
};

/** Drops the scenario's database (closing what is left of its sessions). */
async function dropDatabase(url) {
  const pool = createPool(databaseUrl(url, 'postgres'), { max: 1, applicationName: 'tock-bench-admin' });
  try {
    await pool.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
  } finally {
    await pool.end();
  }
}
