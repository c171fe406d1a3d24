// Issue 21, item 4: the soak. The design's daily shape, compressed into `--minutes` (default 60;
// smoke 1): a steady stream of runs with a herd on one slot every few minutes, leases held for
// minutes and kept by heartbeats, first attempts failing and retried, retention pruning, all
// worked by real processes for the whole time, sampled every 10 s. Only when named (`npm run bench
// -- soak --minutes N`); `--smoke` runs it for one minute at smaller sizes.
//
// Processes (the built tree): one `tock server` (scheduler, reaper, API, and the pruner where this
// build has one: `--prune-interval 10s`), /metrics on a port of its own; two worker processes,
// bench/soak/worker.mjs, each `tock worker` composed from ../dist on the database, two `Worker`s
// apiece: pool `default` (steady and herd runs) and pool `long` (the long runs). Every process runs
// with the NODE_OPTIONS docs/operations.md recommends for long-lived processes (`--node-options`
// sets others, `''` none; `--worker1-env NAME=value` sets a variable for worker 1 alone, to compare
// two settings in one run). The jobs, tenant
// `bench`, registered through the store before the processes start:
//   steady-<i>  300 jobs `@every 1s`, jitterSeconds 1: 300 runs/s, each at a fixed offset in its
//               second; a first attempt fails for 2 % of run ids (max_attempts 3, backoff ~1 s).
//   herd-<i>    10,000 jobs `*/10 * * * *` (shorter soaks: every 5, 2 or 1 minutes; the smoke: one
//               `@at` 30 s in): one slot.
//   long-<i>    2,000 jobs `@every 2m`, jitterSeconds 120, whose handler sleeps 110 s: ~1,830
//               leases held at any time, renewed by the workers' heartbeats.
// Retention of the tenant (tenant_retention): succeeded, cancelled and skipped 5m, dead 10m (smoke
// 20s each). The soak needs the server's autovacuum, as production has it: when DATABASE_URL's
// server has it off, the soak runs on an embedded PostgreSQL of its own (as `npm start` runs it:
// autovacuum on, a 10 s naptime) in a temporary directory. The `vacuumed` column names the tables
// the autovacuum vacuumed since the previous row.
//
// Every 10 s a row (bench/results/soak-<date>.csv; smoke: a temporary file): runs/s the handlers
// finished (their own logs: `runs` rows are pruned), start − due p50/p99 of the steady runs started
// in the window (due: the run's available_at; database clock), tick duration (the server's
// histogram, mean and p99 bucket of the window), claim and heartbeat call time (the workers' store
// calls), total table + index size and dead rows of each of runs, attempts, run_queue, run_claims
// and attempt_progress, and the RSS and event-loop delay p99 of each process. The same series are
// drawn as an SVG beside the CSV. At the end, the checks of the issue: p99 of the last sixth (10 of
// 60 minutes) ÷ the first; total size growth over the last half; each process's RSS trend over the
// last half (least squares, per hour, relative to its mean); and, offline from the handlers' logs,
// no (job, slot) succeeded twice and every steady and herd slot inside the span (from 30 s after
// the start to 30 s before the end; a sixth of a shorter soak) succeeded. A lost or doubled run
// fails the scenario.
//
// Its parts in bench/soak/: worker.mjs (a worker process), history.mjs (the handlers' logs and the
// offline check), samples.mjs (what a row reads), report.mjs (CSV columns, checks, table, notes),
// chart.mjs (the SVG).
import { spawnSync } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPool, migrate, PostgresStore, startEmbedded } from '../../dist/store/index.js';
import { fmt, recreateDatabase, redact, withClient } from '../lib.mjs';
import { freePort, TOCK_BIN, TockProcesses } from '../processes.mjs';
import { HandlerLog, jobKind } from '../soak/history.mjs';
import { COLUMNS, checksOf, csvCell, mean, notesOf, pictureOf, tableOf } from '../soak/report.mjs';
import { mergeReports, scrape, TABLES, tableStats, tickWindow, WORKERS } from '../soak/samples.mjs';
import { Delays, databaseTime, percentiles, registerJobs, sleep } from '../timing.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const WORKER = path.join(here, '..', 'soak', 'worker.mjs');
const DATABASE = 'bench_soak';
const TENANT = 'bench';
const SAMPLE_MS = 10_000;
/** A row is taken this long after its window ends: the handlers' logs are flushed every 500 ms. */
const ROW_GRACE_MS = 1500;
/**
 * The offline check leaves out the slots this close to the start and the end (a sixth of a short
 * soak), and the herds this close to the end (a quarter of a short soak).
 */
const CHECK_MARGIN_MS = 30_000;
const HERD_MARGIN_MS = 90_000;
const MiB = 2 ** 20;
/**
 * NODE_OPTIONS of every Tock process the soak starts, unless `--node-options` says otherwise: what
 * docs/operations.md recommends for long-lived processes (a young generation of 16 MiB semi-spaces).
 */
const RECOMMENDED_NODE_OPTIONS = '--max-semi-space-size=16';

/** The soak's shape at `minutes` (full) or smoke size. */
function shape(ctx) {
  const minutes = ctx.options.minutes ?? (ctx.smoke ? 1 : 60);
  // The herd every 10 minutes in an hour; a shorter soak gets a few herds all the same. The smoke's
  // minute gets one herd at an instant of its own (`@at`, set at registration), 30 s in.
  const herdEvery = [10, 5, 2, 1].find((m) => m <= minutes / 2) ?? 1;
  const small = ctx.smoke;
  return {
    minutes,
    steady: { jobs: small ? 100 : 300 },
    herd: {
      jobs: small ? 1000 : 10_000,
      everyMinutes: small ? null : herdEvery,
      schedule: small ? null : `*/${herdEvery} * * * *`,
      atMs: null,
    },
    long: small
      ? { jobs: 200, every: '20s', everyMs: 20_000, sleepMs: 15_000 }
      : { jobs: 2000, every: '2m', everyMs: 120_000, sleepMs: 110_000 },
    failPerMille: 20,
    retention: small
      ? { succeeded: '20s', dead: '20s', cancelled: '20s', skipped: '20s' }
      : { succeeded: '5m', dead: '10m', cancelled: '5m', skipped: '5m' },
    fastConcurrency: 100,
  };
}

/** Long-pool concurrency per worker: the long runs running at once (on average), a quarter more. */
function longConcurrency(long) {
  const running = (long.jobs * long.sleepMs) / long.everyMs / WORKERS;
  return Math.min(1000, Math.ceil((running * 1.25) / 10) * 10);
}

/** The soak's job definitions: steady, herd and long jobs, each failing run retried about 1 s later. */
function jobsOf(s) {
  const retry = { maxAttempts: 3, backoffBaseSeconds: 1.1, backoffCapSeconds: 1 };
  return [
    ...Array.from({ length: s.steady.jobs }, (_, i) => ({
      jobId: `steady-${i}`,
      schedule: '@every 1s',
      handler: 'soak-fast',
      jitterSeconds: 1,
      ...retry,
    })),
    ...Array.from({ length: s.herd.jobs }, (_, i) => ({
      jobId: `herd-${i}`,
      schedule: s.herd.schedule,
      handler: 'soak-herd',
      ...retry,
    })),
    ...Array.from({ length: s.long.jobs }, (_, i) => ({
      jobId: `long-${i}`,
      schedule: `@every ${s.long.every}`,
      handler: 'soak-long',
      pool: 'long',
      jitterSeconds: Math.round(s.long.everyMs / 1000),
      payload: { sleepMs: s.long.sleepMs },
      ...retry,
    })),
  ];
}

/** Whether the server at `url` runs the autovacuum. */
async function autovacuumOn(url) {
  return withClient(
    url,
    async (c) => (await c.query(`SELECT current_setting('autovacuum') AS v`)).rows[0].v === 'on',
  );
}

/** Whether this build's `tock server` has the pruner's `--prune-interval`. */
function serverHasPruner() {
  const r = spawnSync(process.execPath, [TOCK_BIN, 'server', '--help'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return r.status === 0 && r.stdout.includes('--prune-interval');
}

/** One `tock server` on `url`, /metrics on a port of its own; resolves once /metrics answers. */
async function startServer(procs, url, prune, s) {
  const metricsPort = await freePort();
  // The soak does not call the API, which listens on 127.0.0.1 only: no key needed.
  const args = [
    'server',
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--metrics-port',
    String(metricsPort),
    '--insecure',
  ];
  if (prune) args.push('--prune-interval', '10s');
  const child = procs.start('tock server', args, {
    DATABASE_URL: url,
    NODE_OPTIONS: s.nodeOptions,
    TOCK_LOG_LEVEL: 'warn',
    TOCK_LOG_FORMAT: 'json',
  });
  await procs.waitForOutput(child, /tock listening on (\S+)/);
  const metrics = `http://127.0.0.1:${metricsPort}/metrics`;
  for (let i = 0; ; i++) {
    try {
      await scrape(metrics);
      return { child, metrics };
    } catch (err) {
      procs.check(child);
      if (i >= 100) throw err;
      await sleep(100);
    }
  }
}

/** Worker process `index`; resolves once it is ready. Its 10 s reports collect in `inbox`; `last` is the latest. */
async function startWorker(procs, { url, index, log, s }) {
  const settings = {
    index,
    log,
    fastConcurrency: s.fastConcurrency,
    longConcurrency: s.longConcurrency,
    failPerMille: s.failPerMille,
  };
  const child = procs.startScript(`soak worker ${index}`, WORKER, [JSON.stringify(settings)], {
    DATABASE_URL: url,
    NODE_OPTIONS: s.nodeOptions,
    ...(index === 1 ? s.worker1Env : {}),
  });
  const handle = { child, inbox: [], last: null };
  let buf = '';
  child.stdout.on('data', (chunk) => {
    buf += chunk;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        const report = JSON.parse(line);
        if (!report.ready) {
          handle.inbox.push(report);
          handle.last = report;
        }
      } catch {
        // not a report
      }
    }
  });
  await procs.waitForOutput(child, /"ready":true/, 30_000);
  return handle;
}

/** What the handlers did in one 10 s window: finished calls by kind, and the starts' delays. */
const emptyWindow = () => ({ ok: { steady: 0, herd: 0, long: 0 }, fail: 0, abort: 0, steady: [], herd: [] });

/** The herd's slots in [fromMs, toMs]: its one instant, or every `everyMinutes` minutes (UTC). */
function herdSlots({ atMs, everyMinutes }, fromMs, toMs) {
  if (atMs !== null) return atMs >= fromMs && atMs <= toMs ? [atMs] : [];
  const step = everyMinutes * 60_000;
  const slots = [];
  for (let t = Math.ceil(fromMs / step) * step; t <= toMs; t += step) slots.push(t);
  return slots;
}

/**
 * Runs the soak on `url` with the processes in `procs`: registers the jobs, starts the processes,
 * samples a row every 10 s for `s.minutes`, stops the workers and reads the handlers' logs to
 * their end. Returns the rows, the check of the history, and the figures the checks need.
 */
async function soak(ctx, { s, url, admin, procs, dir, csvPath }) {
  const time = await databaseTime(url);
  const prune = serverHasPruner();
  await admin.query(
    `INSERT INTO tenant_retention (tenant_id, retention, updated_at) VALUES ($1, $2, now())
     ON CONFLICT (tenant_id) DO UPDATE SET retention = excluded.retention, updated_at = now()`,
    [TENANT, JSON.stringify(s.retention)],
  );
  if (s.herd.schedule === null) {
    s.herd.atMs = Math.ceil((time.dbNow() + 30_000) / 1000) * 1000;
    s.herd.schedule = `@at ${new Date(s.herd.atMs).toISOString().replace('.000Z', 'Z')}`;
  }
  const jobs = jobsOf(s);
  const ms = await registerJobs(new PostgresStore(admin), {
    tenantId: TENANT,
    jobs,
    now: time.clock.nowMs(),
  });
  ctx.log(
    `${fmt(jobs.length)} jobs registered in ${fmt(ms / 1000, 1)} s: ${s.steady.jobs} @every 1s, ` +
      `${fmt(s.herd.jobs)} '${s.herd.schedule}', ${fmt(s.long.jobs)} @every ${s.long.every} sleeping ` +
      `${s.long.sleepMs / 1000} s; retention ${JSON.stringify(s.retention)}; pruner ${prune ? 'on (--prune-interval 10s)' : 'NOT in this build'}`,
  );

  const server = await startServer(procs, url, prune, s);
  const logs = Array.from({ length: WORKERS }, (_, i) => path.join(dir, `handlers-${i}.log`));
  const workers = [];
  for (let i = 0; i < WORKERS; i++)
    workers.push(await startWorker(procs, { url, index: i, log: logs[i], s }));
  const children = [server.child, ...workers.map((w) => w.child)];

  const t0 = Math.ceil(time.dbNow() / 1000) * 1000;
  const tEnd = t0 + s.minutes * 60_000;
  const sixth = (tEnd - t0) / 6;
  const history = new HandlerLog(logs, t0);
  const windows = new Map();
  let emitted = 0; // windows before this one have their row
  const segments = { first: new Delays(), last: new Delays(), all: new Delays() };
  const herds = new Map(); // slot → { delays, lastStart }
  const totals = { ok: 0, fail: 0, abort: 0, retriedOk: 0 };
  const windowOf = (t) => Math.floor((t - t0) / SAMPLE_MS);
  const at = (w) => {
    if (w < emitted) return null;
    if (!windows.has(w)) windows.set(w, emptyWindow());
    return windows.get(w);
  };
  const onCall = (call) => {
    const { kind } = jobKind(call.jobId);
    totals[call.outcome] = (totals[call.outcome] ?? 0) + 1;
    if (call.outcome === 'ok' && call.attempt > 1) totals.retriedOk += 1;
    const ended = call.end >= t0 ? at(windowOf(call.end)) : null;
    if (ended) {
      if (call.outcome === 'ok') ended.ok[kind] += 1;
      else ended[call.outcome] += 1;
    }
    if (call.due === null || call.start < t0) return;
    const delay = call.start - call.due;
    const started = at(windowOf(call.start));
    if (kind === 'steady') {
      started?.steady.push(delay);
      if (call.start < tEnd) segments.all.add(delay);
      if (call.start < t0 + sixth) segments.first.add(delay);
      else if (call.start >= tEnd - sixth && call.start < tEnd) segments.last.add(delay);
    } else if (kind === 'herd') {
      started?.herd.push(delay);
      if (!herds.has(call.slot)) herds.set(call.slot, { delays: new Delays(), lastStart: 0 });
      const h = herds.get(call.slot);
      h.delays.add(delay);
      h.lastStart = Math.max(h.lastStart, call.start);
    }
  };

  await writeFile(csvPath, `${COLUMNS.join(',')}\n`);
  const rows = [];
  let before = await scrape(server.metrics);
  let autovacuums = await tableStats(admin);
  const samples = Math.round((s.minutes * 60_000) / SAMPLE_MS);
  ctx.log(
    `processes up (tock server pid ${server.child.pid}, workers ${workers.map((w) => w.child.pid).join(', ')}); ` +
      `${samples} rows of 10 s to ${csvPath}`,
  );
  for (let k = 1; k <= samples; k++) {
    await sleep(t0 + k * SAMPLE_MS + ROW_GRACE_MS - time.dbNow());
    for (const c of children) procs.check(c);
    await history.read(onCall);
    const w = windows.get(k - 1) ?? emptyWindow();
    windows.delete(k - 1);
    emitted = k;
    const after = await scrape(server.metrics);
    const ticks = tickWindow(before, after);
    before = after;
    const reports = workers.map((wk) => mergeReports(wk.inbox.splice(0)));
    const stats = await tableStats(admin);
    const vacuumed = TABLES.filter((t) => (stats[t]?.autovacuums ?? 0) > (autovacuums[t]?.autovacuums ?? 0));
    autovacuums = stats;
    const steady = percentiles(w.steady);
    const claimed = reports.filter((r) => r && r.claim.count > 0);
    const claims = claimed.reduce((a, r) => a + r.claim.count, 0);
    const sizeOf = (t) => (stats[t]?.bytes ?? 0) / MiB;
    const row = {
      elapsed_s: (k * SAMPLE_MS) / 1000,
      runs_per_s: (w.ok.steady + w.ok.herd + w.ok.long) / (SAMPLE_MS / 1000),
      steady_per_s: w.ok.steady / (SAMPLE_MS / 1000),
      herd_runs: w.ok.herd,
      long_runs: w.ok.long,
      failed_attempts: w.fail,
      steady_p50_ms: steady.p50,
      steady_p99_ms: steady.p99,
      herd_p99_ms: percentiles(w.herd).p99,
      ticks: ticks.count,
      tick_mean_ms: ticks.meanMs,
      tick_p99_ms: ticks.p99Ms,
      claims,
      claim_mean_ms:
        claims === 0 ? null : claimed.reduce((a, r) => a + r.claim.mean * r.claim.count, 0) / claims,
      claim_p99_ms: claims === 0 ? null : Math.max(...claimed.map((r) => r.claim.p99)),
      heartbeat_mean_ms: mean(reports.map((r) => r?.heartbeat.mean ?? null)),
      ...Object.fromEntries(TABLES.map((t) => [`${t}_mib`, sizeOf(t)])),
      total_mib: TABLES.reduce((a, t) => a + sizeOf(t), 0),
      ...Object.fromEntries(TABLES.map((t) => [`${t}_dead`, stats[t]?.dead ?? null])),
      dead_total: TABLES.reduce((a, t) => a + (stats[t]?.dead ?? 0), 0),
      rss_server_mib: after.rss === null ? null : after.rss / MiB,
      ...Object.fromEntries(reports.map((r, i) => [`rss_worker${i}_mib`, r ? r.rss / MiB : null])),
      heap_server_mib: after.heapUsed === null ? null : after.heapUsed / MiB,
      ...Object.fromEntries(reports.map((r, i) => [`heap_worker${i}_mib`, r ? r.heapUsed / MiB : null])),
      heap_total_server_mib: after.heapTotal === null ? null : after.heapTotal / MiB,
      ...Object.fromEntries(
        reports.map((r, i) => [`heap_total_worker${i}_mib`, r ? r.heapTotal / MiB : null]),
      ),
      external_server_mib: after.external === null ? null : after.external / MiB,
      ...Object.fromEntries(
        reports.map((r, i) => [`external_worker${i}_mib`, r?.external == null ? null : r.external / MiB]),
      ),
      young_server_mib: after.young === null ? null : after.young / MiB,
      ...Object.fromEntries(
        reports.map((r, i) => [`young_worker${i}_mib`, r?.young == null ? null : r.young / MiB]),
      ),
      rss_less_young_server_mib:
        after.rss === null || after.young === null ? null : (after.rss - after.young) / MiB,
      ...Object.fromEntries(
        reports.map((r, i) => [
          `rss_less_young_worker${i}_mib`,
          r?.young == null ? null : (r.rss - r.young) / MiB,
        ]),
      ),
      // The workers only (the server's /metrics has no such figures).
      ...Object.fromEntries(
        reports.map((r, i) => [
          `v8_resident_worker${i}_mib`,
          r?.v8Resident == null ? null : r.v8Resident / MiB,
        ]),
      ),
      ...Object.fromEntries(
        reports.map((r, i) => [
          `rss_less_v8_worker${i}_mib`,
          r?.v8Resident == null ? null : (r.rss - r.v8Resident) / MiB,
        ]),
      ),
      ...Object.fromEntries(
        reports.map((r, i) => [`malloced_worker${i}_mib`, r?.malloced == null ? null : r.malloced / MiB]),
      ),
      ...Object.fromEntries(
        reports.map((r, i) => [`anon_worker${i}_mib`, r?.anon == null ? null : r.anon / MiB]),
      ),
      ...Object.fromEntries(
        reports.map((r, i) => [`file_worker${i}_mib`, r?.file == null ? null : r.file / MiB]),
      ),
      lag_server_p99_ms: after.lagP99 === null ? null : after.lagP99 * 1000,
      ...Object.fromEntries(reports.map((r, i) => [`lag_worker${i}_p99_ms`, r?.lagP99Ms ?? null])),
      long_running: reports.every((r) => r) ? reports.reduce((a, r) => a + r.running[1], 0) : null,
      vacuumed: vacuumed.join(' '),
    };
    rows.push(row);
    await appendFile(csvPath, `${COLUMNS.map((c) => csvCell(row[c])).join(',')}\n`);
    if (s.minutes <= 5 || k % 6 === 0) {
      ctx.log(
        `${fmt(row.elapsed_s)} s: ${fmt(row.runs_per_s)} runs/s (steady ${fmt(row.steady_per_s)}, herd ${fmt(row.herd_runs)}, ` +
          `failed ${fmt(row.failed_attempts)}); steady p50/p99 ${fmt(row.steady_p50_ms, 1)}/${fmt(row.steady_p99_ms, 1)} ms; ` +
          `tick ${fmt(row.tick_mean_ms, 1)} ms; claim ${fmt(row.claim_mean_ms, 1)} ms; ${fmt(row.total_mib, 1)} MiB, ` +
          `${fmt(row.dead_total)} dead; RSS ${[row.rss_server_mib, ...reports.map((r) => (r ? r.rss / MiB : null))].map((x) => fmt(x)).join('/')} MiB; ` +
          `${fmt(row.long_running)} long running`,
      );
    }
  }

  // Stop the workers (their logs flushed), then read the logs to their end.
  await Promise.all(workers.map((wk) => procs.stop(wk.child, 15_000)));
  await history.read(onCall);
  await procs.stop(server.child);
  const margin = Math.min(CHECK_MARGIN_MS, (tEnd - t0) / 6);
  const herdMargin = Math.min(HERD_MARGIN_MS, (tEnd - t0) / 4);
  const from = t0 + margin;
  const to = tEnd - margin;
  const slots = herdSlots(s.herd, from, tEnd - herdMargin);
  const check = history.lostAndDoubled({
    steadyJobs: s.steady.jobs,
    fromMs: from,
    toMs: to,
    herd: { jobs: s.herd.jobs, slots },
  });
  const { rows: dead } = await admin.query(`SELECT count(*)::int AS n FROM runs WHERE state = 'dead'`);
  return {
    rows,
    check,
    segments,
    herds: [...herds.entries()]
      .filter(([slot]) => slot >= t0 && slot < tEnd)
      .map(([slot, h]) => ({ slot, ...h.delays.summary(), allStartedMs: h.lastStart - slot })),
    totals,
    history,
    deadInTable: dead[0].n,
    prune,
    workerCounts: workers.map(
      (wk) => wk.last && { dropped: wk.last.dropped, leaseLost: wk.last.leaseLost, errors: wk.last.errors },
    ),
    span: { t0, tEnd, from, to, herdMargin, herdSlots: slots },
  };
}

export default {
  name: 'soak',
  explicitOnly: true,
  description:
    'the daily shape for --minutes (default 60): 300 runs/s, herds, 2,000 leases, retries, retention; a row every 10 s',
  async run(ctx) {
    const s = shape(ctx);
    s.longConcurrency = longConcurrency(s.long);
    s.nodeOptions = ctx.options.nodeOptions ?? RECOMMENDED_NODE_OPTIONS;
    s.worker1Env = ctx.options.worker1Env ?? {};
    if (Object.keys(s.worker1Env).length > 0)
      ctx.log(
        `worker 1 only: ${Object.entries(s.worker1Env)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}`,
      );
    const date = new Date().toISOString().slice(0, 10);
    const outDir = ctx.smoke ? os.tmpdir() : path.join(here, '..', 'results');
    await mkdir(outDir, { recursive: true });
    const csvPath = path.join(outDir, ctx.smoke ? 'tock-soak-smoke.csv' : `soak-${date}.csv`);
    const svgPath = csvPath.replace(/\.csv$/, '.svg');
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tock-soak-'));
    const embedded = (await autovacuumOn(ctx.databaseUrl))
      ? null
      : await startEmbedded({ dataDir: path.join(dir, 'postgres') });
    if (embedded)
      ctx.log(`autovacuum is off on ${redact(ctx.databaseUrl)}: the soak runs on embedded PostgreSQL`);
    const url = await recreateDatabase(embedded?.url ?? ctx.databaseUrl, DATABASE);
    const admin = createPool(url, { max: 2, applicationName: 'tock-bench-admin' });
    const procs = new TockProcesses();
    let r;
    try {
      await migrate(admin);
      r = await soak(ctx, { s, url, admin, procs, dir, csvPath });
      r.server = embedded ? `embedded PostgreSQL in ${embedded.dataDir}` : redact(url);
    } finally {
      await procs.close();
      await admin.end();
      await embedded?.stop();
      // A soak that did not get to its check leaves nothing behind; one that lost or doubled a run
      // keeps the handlers' logs (below).
      if (r === undefined) await rm(dir, { recursive: true, force: true });
    }
    const c = checksOf(s, r);
    await writeFile(svgPath, pictureOf(s, r.rows));
    const table = tableOf(s, r, c);
    if (c.history.holds) await rm(dir, { recursive: true, force: true });
    else {
      throw new Error(
        `${fmt(c.history.missing)} runs lost (e.g. ${c.history.missingExamples.join(', ') || '–'}) and ` +
          `${fmt(c.history.doubled)} run twice (e.g. ${c.history.doubledExamples.join(', ') || '–'}); ` +
          `the handlers' logs are kept in ${dir}\n${table}`,
      );
    }
    const notes = notesOf(s, r, { csvPath, svgPath, tenant: TENANT });
    return {
      settings: {
        ...s,
        tenant: TENANT,
        sampleMs: SAMPLE_MS,
        workers: WORKERS,
        pruner: r.prune,
        server: r.server,
      },
      systems: [{ name: 'tock', checks: c, herds: r.herds, totals: r.totals, rows: r.rows }],
      table,
      notes,
    };
  },
};
