// Issue 14, item 7: what scraping `/metrics` costs everybody else. A real `tock server` (the
// built `bin/tock.js` of TOCK_BENCH_TREE, default this tree: point it at an unfixed checkout to
// measure "before") on a database of its own with `runs` history (30,000 runs; smoke 2,000).
// Four phases on the same server, in this order:
//   idle         nothing but the server's own loops: its statements per second (the baseline);
//   scrapes      `GET /metrics` 100 times a second (open loop, at most 50 in flight, from a
//                worker thread of its own), alone;
//   tenant       another tenant reads its runs (`GET /v1/runs?limit=10`, one request at a
//                time, one every 10 ms): its p50/p99 latency;
//   tenant+scr.  the same tenant traffic while the scrapes go on.
// "Statements/s caused by scrapes" = (statements in the scrapes phase − in the idle phase) / its
// duration, from pg_stat_database.xact_commit of the server's database (each of Tock's statements
// outside a transaction is one; that includes the key lookup of an authenticated scrape), and the
// same for the scans of the run tables (what a sample of the run counts reads). Backends report those counts when idle, up to 10 s late, so both
// windows end after a SETTLE_MS pause with no load and are read from another database.
// The scraper uses a cluster-admin key when the tree's `tock keys create` knows that role, else an
// admin key (a tree where /metrics needs no key ignores it). With TOCK_BENCH_METRICS_PORT=1 it
// scrapes `tock server --metrics-port` instead (loopback, no key: no key lookup per scrape).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { databaseUrl, fmt, markdownTable, recreateDatabase, seedBacklog } from '../lib.mjs';
import { freePort } from '../processes.mjs';
import { percentiles, sleep } from '../timing.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const DATABASE = 'bench_metrics_scrape';
const SCRAPES_PER_SECOND = 100;
const MAX_SCRAPES_IN_FLIGHT = 50;
const TENANT_EVERY_MS = 10;
/** Longest a backend keeps its statistics before reporting them (PostgreSQL's idle interval), plus margin. */
const SETTLE_MS = 11_000;

function run(cmd, args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A key made on the database by the tree's own CLI; null when it refuses the role. */
async function makeKey(bin, url, tenant, role) {
  const out = await run(process.execPath, [bin, 'keys', 'create', '--tenant', tenant, '--role', role], {
    DATABASE_URL: url,
  });
  if (out.code !== 0) return null;
  return out.stdout.trim().split('\n').pop();
}

/**
 * Counters of database `name`: its committed transactions (read from the `postgres` database, so
 * the reading is not counted) and the scans of the run tables (`runs`, `run_queue`, `run_claims`:
 * what a sample of run counts reads; read on `local`, a connection to that database).
 */
async function counters(admin, local, name) {
  await admin.query('SELECT pg_stat_clear_snapshot()');
  await local.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await admin.query(
    'SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = $1',
    [name],
  );
  const scans = await local.query(
    `SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0)::bigint AS n FROM pg_stat_user_tables
     WHERE relname IN ('runs', 'run_queue', 'run_claims')`,
  );
  return { statements: Number(rows[0].n), runScans: Number(scans.rows[0].n) };
}

/** Scrapes at `perSecond` in a worker thread (bench/scrape-worker.mjs) until `stop()`, which gives its counts. */
function startScrapes(base, key, perSecond) {
  const worker = new Worker(path.join(here, '..', 'scrape-worker.mjs'), {
    workerData: { base, key, perSecond, maxInFlight: MAX_SCRAPES_IN_FLIGHT },
  });
  const counts = new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    async stop() {
      worker.postMessage('stop');
      const c = await counts;
      await worker.terminate();
      return c;
    },
  };
}

/** The tenant's requests for `ms`, one at a time, one every TENANT_EVERY_MS: latencies in ms. */
async function tenantTraffic(base, key, ms) {
  const latencies = [];
  const end = performance.now() + ms;
  let failed = 0;
  while (performance.now() < end) {
    const start = performance.now();
    const r = await fetch(`${base}/v1/runs?limit=10`, { headers: { authorization: `Bearer ${key}` } });
    await r.text();
    if (r.status !== 200) failed += 1;
    latencies.push(performance.now() - start);
    await sleep(start + TENANT_EVERY_MS - performance.now());
  }
  if (failed > 0) throw new Error(`${failed} tenant requests failed`);
  return percentiles(latencies);
}

async function measure(ctx, { tree, runs, phaseMs, settleMs, viaMetricsPort }) {
  const bin = path.join(tree, 'bin', 'tock.js');
  if (!existsSync(path.join(tree, 'dist', 'cli', 'main.js')))
    throw new Error(`${tree} has no dist/: build it`);
  const url = await recreateDatabase(ctx.databaseUrl, DATABASE);
  const migrated = await run(process.execPath, [bin, 'migrate'], { DATABASE_URL: url });
  if (migrated.code !== 0) throw new Error(`tock migrate failed: ${migrated.stderr}`);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  await seedBacklog(pool, runs);
  await pool.end();
  const scrapeKey =
    (await makeKey(bin, url, 'ops', 'cluster-admin')) ?? (await makeKey(bin, url, 'ops', 'admin'));
  const tenantKey = await makeKey(bin, url, 'bench', 'reader');
  if (!scrapeKey || !tenantKey) throw new Error('tock keys create failed');

  const port = await freePort();
  const metricsPort = viaMetricsPort ? await freePort() : null;
  const args = ['server', '--host', '127.0.0.1', '--port', String(port)];
  if (metricsPort !== null) args.push('--metrics-port', String(metricsPort));
  const server = spawn(process.execPath, [bin, ...args], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      TOCK_API_RATE: '100000',
      TOCK_API_BURST: '100000',
      TOCK_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let serverErr = '';
  server.stderr.on('data', (d) => (serverErr += d));
  const base = `http://127.0.0.1:${port}`;
  const scrapeBase = metricsPort === null ? base : `http://127.0.0.1:${metricsPort}`;
  const scrapeAs = metricsPort === null ? scrapeKey : null;
  const admin = new pg.Client({ connectionString: databaseUrl(ctx.databaseUrl, 'postgres') });
  await admin.connect();
  const local = new pg.Client({ connectionString: url });
  await local.connect();
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ok = await fetch(`${base}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline || server.exitCode !== null)
        throw new Error(`server not ready: ${serverErr}`);
      await sleep(50);
    }
    // Warm up: the first scrape (and its sample) and the tenant's first requests.
    await tenantTraffic(base, tenantKey, Math.min(1000, phaseMs));
    const warm = startScrapes(scrapeBase, scrapeAs, 10);
    await sleep(500);
    if ((await warm.stop()).ok === 0) throw new Error('no scrape succeeded');
    await sleep(settleMs);

    const c0 = await counters(admin, local, DATABASE);
    await sleep(phaseMs + settleMs);
    const c1 = await counters(admin, local, DATABASE);
    const scrapes = startScrapes(scrapeBase, scrapeAs, SCRAPES_PER_SECOND);
    await sleep(phaseMs);
    const scraped = await scrapes.stop();
    await sleep(settleMs);
    const c2 = await counters(admin, local, DATABASE);
    // Per second of scraping: the scrape window's count minus the idle window's (same length).
    const fromScrapes = (k) => ((c2[k] - c1[k] - (c1[k] - c0[k])) * 1000) / phaseMs;
    const idlePerS = ((c1.statements - c0.statements) * 1000) / (phaseMs + settleMs);
    const scrapeStatementsPerS = fromScrapes('statements');
    const scrapeRunScansPerS = fromScrapes('runScans');

    const alone = await tenantTraffic(base, tenantKey, phaseMs);
    const loaded = startScrapes(scrapeBase, scrapeAs, SCRAPES_PER_SECOND);
    const underScrapes = await tenantTraffic(base, tenantKey, phaseMs);
    const scrapedUnderLoad = await loaded.stop();
    if (scraped.failed + scrapedUnderLoad.failed > 0) throw new Error('some scrapes failed');
    return {
      tree,
      runs,
      idleStatementsPerS: idlePerS,
      scrapesPerS: (scraped.ok * 1000) / phaseMs,
      scrapesUnderLoadPerS: (scrapedUnderLoad.ok * 1000) / phaseMs,
      scrapesSkipped: scraped.skipped + scrapedUnderLoad.skipped,
      scrapeStatementsPerS,
      scrapeRunScansPerS,
      tenantAlone: alone,
      tenantUnderScrapes: underScrapes,
    };
  } finally {
    await admin.end();
    await local.end();
    server.kill('SIGTERM');
    await new Promise((r) => (server.exitCode !== null ? r() : server.once('exit', r)));
  }
}

export default {
  name: 'metrics-scrape',
  description:
    "another tenant's latency and the database statements/s while /metrics is scraped 100 times a second (issue 14 item 7)",
  async run(ctx) {
    const tree = path.resolve(process.env.TOCK_BENCH_TREE ?? path.join(here, '..', '..'));
    const settings = {
      tree,
      runs: ctx.smoke ? 2000 : 30_000,
      phaseMs: ctx.smoke ? 1000 : 10_000,
      settleMs: ctx.smoke ? 0 : SETTLE_MS,
      scrapesPerSecond: SCRAPES_PER_SECOND,
      viaMetricsPort: process.env.TOCK_BENCH_METRICS_PORT === '1',
    };
    const rounds = [];
    for (let r = 0; r < (ctx.smoke ? 1 : ctx.rounds); r++) {
      const m = await measure(ctx, settings);
      ctx.log(
        `round ${r + 1}: tenant p50/p99 ${fmt(m.tenantAlone.p50, 1)}/${fmt(m.tenantAlone.p99, 1)} ms alone, ` +
          `${fmt(m.tenantUnderScrapes.p50, 1)}/${fmt(m.tenantUnderScrapes.p99, 1)} ms under scrapes; ` +
          `${fmt(m.scrapeStatementsPerS, 1)} statements/s and ${fmt(m.scrapeRunScansPerS, 1)} run-table scans/s from ${fmt(m.scrapesPerS)} scrapes/s`,
      );
      rounds.push(m);
    }
    const table = markdownTable(
      [
        'round',
        'scrapes/s',
        'statements/s from scrapes',
        'run-table scans/s from scrapes',
        'idle statements/s',
        'tenant p50 / p99 alone (ms)',
        'tenant p50 / p99 under scrapes (ms)',
      ],
      rounds.map((m, i) => [
        i + 1,
        fmt(m.scrapesPerS),
        fmt(m.scrapeStatementsPerS, 1),
        fmt(m.scrapeRunScansPerS, 1),
        fmt(m.idleStatementsPerS, 1),
        `${fmt(m.tenantAlone.p50, 1)} / ${fmt(m.tenantAlone.p99, 1)}`,
        `${fmt(m.tenantUnderScrapes.p50, 1)} / ${fmt(m.tenantUnderScrapes.p99, 1)}`,
      ]),
    );
    return {
      settings,
      systems: [{ name: `tock (${tree})`, rounds }],
      table,
      notes: [
        `Tree measured: ${tree} (TOCK_BENCH_TREE). ${settings.runs} runs in the database. Scraped: ${settings.viaMetricsPort ? 'the --metrics-port listener (no key)' : "the API's /metrics"}.`,
        'Statements: pg_stat_database.xact_commit of the server database; run-table scans: seq_scan + idx_scan of runs, run_queue and run_claims; both as the scrape window minus the idle window, per second of scraping.',
      ],
    };
  },
};
