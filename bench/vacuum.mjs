#!/usr/bin/env node
// Autovacuum of the queue tables under a steady churn (issue 21, item 3): which per-table settings
// keep run_queue and run_claims small and their dead tuples few without vacuuming them constantly.
//
// Every run of a queue passes through both tables and leaves a dead tuple in each: a run is
// inserted into run_queue, claimed (deleted from run_queue, listed in a new run_claims row) and
// completed (its run_claims row shrunk, then deleted; the runs row updated). Dead tuples the
// autovacuum has not reclaimed yet make the tables and their indexes grow, and claims scan past them.
//
// What it does, on a private PostgreSQL 15 cluster (initdb in a temporary directory, removed at the
// end; the machine's shared server has autovacuum off):
//   - the server: autovacuum ON, everything else PostgreSQL's defaults (autovacuum_naptime 1 min,
//     as in production unless --naptime says otherwise: it is per database, not per table, so no
//     migration can change it), log_autovacuum_min_duration 0 (the log is kept in --log);
//   - Tock's migrations (dist/store migrate), then the candidate's settings for run_queue and
//     run_claims: every autovacuum option of both reset, then the candidate's set;
//   - --backlog ready runs of a pool no worker serves first (rows that stay in run_queue, out of
//     the busy pool's way), then VACUUM ANALYZE: the table's size is what a scale factor multiplies;
//   - a producer inserting --rate runs/s (in batches every 100 ms, runs and run_queue rows in one
//     statement, as the tick writes them), and a real Worker (dist/worker, concurrency 100) whose
//     handler takes 0–20 ms, so claims, heartbeats and batched completions are the worker's own;
//   - every 5 s: pg_total_relation_size (table + indexes + toast), n_live_tup, n_dead_tup, and the
//     autovacuum and autoanalyze counts of run_queue, run_claims and runs, and the claims' statement
//     time (claimRuns, timed around the store call) in those 5 s: count, p99 and max.
// At the end one JSON line (`result …`) with the figures at the end, the maxima and the counts.
//
// Usage (run `npm run build` first):
//   node bench/vacuum.mjs --candidate scale-0.02 [--seconds 210] [--rate 500] [--naptime 60] [--backlog 0]
//   node bench/vacuum.mjs --list          the candidates and their settings
// As root the server runs as the `postgres` user (PostgreSQL refuses root). PostgreSQL 15's initdb
// and postgres are looked for in PG_BIN, then /usr/lib/postgresql/15/bin, then the PATH.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { chmod, chown, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import pino from 'pino';
import { SystemClock } from '../dist/core/index.js';
import { createPool, migrate, PostgresStore } from '../dist/store/index.js';
import { freePort } from '../dist/store/postmaster.js';
import { Worker } from '../dist/worker/index.js';

/** The two tables every run passes through, whose settings are measured. */
const TABLES = ['run_queue', 'run_claims'];
/** Sampled too, for comparison (its settings are not changed here). */
const SAMPLED = [...TABLES, 'runs'];
/** Every per-table autovacuum option a candidate may set; all are reset first. */
const OPTIONS = [
  'autovacuum_vacuum_scale_factor',
  'autovacuum_vacuum_threshold',
  'autovacuum_vacuum_insert_scale_factor',
  'autovacuum_vacuum_insert_threshold',
  'autovacuum_analyze_scale_factor',
  'autovacuum_analyze_threshold',
  'autovacuum_vacuum_cost_delay',
  'autovacuum_vacuum_cost_limit',
];
/**
 * The candidates: per-table settings, a table's own or one set for both (`both`). Each name says
 * what it changes; the tables not named keep PostgreSQL's defaults.
 */
const SCALE_002 = { autovacuum_vacuum_scale_factor: 0.02, autovacuum_analyze_scale_factor: 0.02 };
/** A fixed number of dead (or inserted) rows, whatever the table's size, and no cost-based sleeps. */
const fixed = (rows) => ({
  autovacuum_vacuum_scale_factor: 0,
  autovacuum_vacuum_threshold: rows,
  autovacuum_vacuum_insert_scale_factor: 0,
  autovacuum_vacuum_insert_threshold: rows,
  autovacuum_analyze_scale_factor: 0.02,
  autovacuum_vacuum_cost_delay: 0,
});
const CANDIDATES = {
  // Migrations 0007's settings (PostgreSQL's defaults for the rest).
  'scale-0.02': { both: SCALE_002 },
  // PostgreSQL's defaults (0.2 / 0.1 scale factors, 50 rows, cost delay 2 ms).
  default: { both: {} },
  // 2000 rows on both, analyze on 2000 too, no cost-based sleeps: run_claims never reached 2000
  // dead rows in a minute at 500 runs/s (a claim is one row for a batch) and was never vacuumed.
  'threshold-2000-nodelay': {
    both: {
      autovacuum_vacuum_scale_factor: 0,
      autovacuum_vacuum_threshold: 2000,
      autovacuum_vacuum_insert_scale_factor: 0,
      autovacuum_vacuum_insert_threshold: 2000,
      autovacuum_analyze_scale_factor: 0,
      autovacuum_analyze_threshold: 2000,
      autovacuum_vacuum_cost_delay: 0,
    },
  },
  // Fixed thresholds sized by table: run_queue 1000 rows (2 s of churn at 500 runs/s), run_claims
  // 100 rows (one row per claim); analyze at 2 % as before; no cost-based sleeps.
  'fixed-1000-100': { run_queue: fixed(1000), run_claims: fixed(100) },
};

const { values: args } = parseArgs({
  options: {
    candidate: { type: 'string', default: 'scale-0.02' },
    seconds: { type: 'string', default: '210' },
    rate: { type: 'string', default: '500' },
    naptime: { type: 'string', default: '60' },
    backlog: { type: 'string', default: '0' },
    log: { type: 'string' },
    list: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    'node bench/vacuum.mjs --candidate <name> [--seconds 210] [--rate 500] [--naptime 60] [--backlog 0] [--log file]\n  Sizes and dead tuples of run_queue and run_claims under a steady churn on a private PostgreSQL 15\n  cluster with autovacuum on. --list: the candidates.\n',
  );
  process.exit(0);
}
if (args.list) {
  for (const [name, settings] of Object.entries(CANDIDATES))
    console.log(`${name}: ${JSON.stringify(settings)}`);
  process.exit(0);
}
const candidate = CANDIDATES[args.candidate];
if (!candidate) throw new Error(`no candidate ${args.candidate}: ${Object.keys(CANDIDATES).join(', ')}`);
const SECONDS = Number(args.seconds);
const RATE = Number(args.rate);
const NAPTIME = Number(args.naptime);
const BACKLOG = Number(args.backlog);
const SAMPLE_MS = 5000;
const clock = new SystemClock();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The directory of PostgreSQL 15's programs. */
function pgBin() {
  for (const dir of [process.env.PG_BIN, '/usr/lib/postgresql/15/bin']) {
    if (dir && existsSync(path.join(dir, 'postgres'))) return dir;
  }
  const found = spawnSync('sh', ['-c', 'command -v postgres'], { encoding: 'utf8' }).stdout.trim();
  if (!found) throw new Error('no PostgreSQL 15 postgres program: set PG_BIN');
  return path.dirname(found);
}

/** As root: the postgres user's ids (the server refuses to run as root). */
function serverUser() {
  if (process.getuid?.() !== 0) return {};
  const id = (flag) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** initdb and a started server with autovacuum on; returns its URL and a stop function. */
async function startCluster() {
  const bin = pgBin();
  const user = serverUser();
  const dir = mkdtempSync(path.join(tmpdir(), 'tock-vacuum-'));
  const data = path.join(dir, 'data');
  if (user.uid !== undefined) {
    await chmod(dir, 0o755);
    await chown(dir, user.uid, user.gid);
  }
  const init = spawnSync(
    path.join(bin, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'],
    {
      ...user,
      encoding: 'utf8',
      env: { ...process.env, LC_ALL: 'C' },
    },
  );
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const logFile = args.log ?? path.join(dir, 'server.log');
  if (args.log) {
    await writeFile(logFile, '');
    if (user.uid !== undefined) await chown(logFile, user.uid, user.gid);
  }
  const settings = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: dir,
    autovacuum: 'on',
    autovacuum_naptime: `${NAPTIME}s`,
    log_autovacuum_min_duration: '0',
    logging_collector: 'off',
    lc_messages: 'C',
  };
  const server = spawn(
    path.join(bin, 'postgres'),
    ['-D', data, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])],
    { ...user, stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  const logLines = [];
  server.stderr.on('data', (chunk) => logLines.push(chunk.toString('utf8')));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  for (let i = 0; ; i++) {
    try {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query('CREATE DATABASE tock');
      await c.end();
      break;
    } catch (err) {
      if (i > 200 || server.exitCode !== null)
        throw new Error(`server did not start: ${err}\n${logLines.join('')}`);
      await sleep(100);
    }
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/tock`,
    log: () => logLines.join(''),
    async stop() {
      if (server.exitCode === null) {
        const exited = new Promise((r) => server.once('exit', r));
        server.kill('SIGINT');
        await exited;
      }
      if (args.log) await writeFile(args.log, logLines.join(''));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resets every autovacuum option of the measured tables, then sets the candidate's. */
async function applyCandidate(pool) {
  for (const table of TABLES) {
    await pool.query(`ALTER TABLE ${table} RESET (${OPTIONS.join(', ')})`);
    const set = Object.entries(candidate[table] ?? candidate.both ?? {}).map(([k, v]) => `${k} = ${v}`);
    if (set.length > 0) await pool.query(`ALTER TABLE ${table} SET (${set.join(', ')})`);
  }
  const { rows } = await pool.query(
    'SELECT relname, reloptions FROM pg_class WHERE relname = ANY($1) ORDER BY relname',
    [SAMPLED],
  );
  for (const r of rows) console.log(`  ${r.relname}: ${(r.reloptions ?? []).join(', ') || '(defaults)'}`);
}

/**
 * $1 first slot number, $2 runs, $3 now, $4 pool: inserts ready runs of bench/noop (runs and
 * run_queue, one statement), at distinct slots.
 */
const PRODUCE = `
WITH r AS (
  INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
    backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at)
  SELECT 'bench', 'noop', timestamptz '2026-01-01' + (($1::bigint + i) * interval '1 ms'), 3, 'noop', '{}',
    $4, 0, 2, 3600, $3::timestamptz, $3::timestamptz, $3::timestamptz
  FROM generate_series(0, $2::int - 1) AS i
  RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key FROM r`;

const STATS = `
SELECT relname, pg_total_relation_size(relid) AS bytes, n_live_tup AS live, n_dead_tup AS dead,
  autovacuum_count AS vacuums, autoanalyze_count AS analyzes
FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = ANY($1)`;

const quantile = (xs, q) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const mb = (bytes) => (bytes / 1048576).toFixed(2);

async function main() {
  const cluster = await startCluster();
  const pool = createPool(cluster.url, { max: 12 });
  const producerPool = createPool(cluster.url, { max: 2 });
  let worker = null;
  try {
    await migrate(pool);
    console.log(
      `vacuum: candidate ${args.candidate}, ${RATE} runs/s for ${SECONDS} s, backlog ${BACKLOG}, autovacuum_naptime ${NAPTIME} s, PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version}`,
    );
    await applyCandidate(pool);
    const store = new PostgresStore(pool);
    await store.upsertJobs({
      tenantId: 'bench',
      jobs: [{ jobId: 'noop', schedule: '@every 1h', handler: 'noop' }],
      now: clock.nowMs(),
    });

    if (BACKLOG > 0) {
      // Ready runs of a pool no worker serves (its workers are down, or it is another pool than the
      // busy one): rows that stay in run_queue without slowing the busy pool's claims, which read
      // their own pool's part of the index. A scale factor multiplies the table's size.
      for (let done = 0; done < BACKLOG; done += 100_000) {
        const n = Math.min(100_000, BACKLOG - done);
        await pool.query(PRODUCE, [1_000_000_000 + done, n, new Date(clock.nowMs()), 'unserved']);
      }
      await pool.query('VACUUM ANALYZE runs, run_queue');
      console.log(`  backlog: ${BACKLOG} ready runs of a pool no worker serves, vacuumed and analyzed`);
    }

    // Claims timed around the store call: the statement and its round trip.
    let claimMs = [];
    let completed = 0;
    const timed = new Proxy(store, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== 'claimRuns') return typeof value === 'function' ? value.bind(target) : value;
        return async (p) => {
          const t0 = performance.now();
          try {
            return await value.call(target, p);
          } finally {
            claimMs.push(performance.now() - t0);
          }
        };
      },
    });
    worker = new Worker({
      store: timed,
      clock,
      logger: pino({ level: 'silent' }),
      handlers: { noop: () => sleep(Math.random() * 20) },
      concurrency: 100,
      pollIntervalMs: 50,
    });
    worker.on('run:succeeded', () => {
      completed += 1;
    });
    worker.start();

    const start = performance.now();
    const end = start + SECONDS * 1000;
    let seq = 0;
    let produced = 0;
    const producer = (async () => {
      const perTick = Math.round(RATE / 10);
      for (let tick = 1; performance.now() < end; tick++) {
        await producerPool.query(PRODUCE, [seq, perTick, new Date(clock.nowMs()), 'default']);
        seq += perTick;
        produced += perTick;
        const wait = start + tick * 100 - performance.now();
        if (wait > 0) await sleep(wait);
      }
    })();

    const samples = [];
    const header = ['t_s', 'done/s', 'claims', 'claim_p99_ms', 'claim_max_ms'];
    for (const t of SAMPLED) header.push(`${t}_MB`, `${t}_live`, `${t}_dead`, `${t}_av`);
    console.log(header.join('\t'));
    let lastCompleted = 0;
    for (let i = 1; i <= SECONDS / (SAMPLE_MS / 1000); i++) {
      const wait = start + i * SAMPLE_MS - performance.now();
      if (wait > 0) await sleep(wait);
      const { rows } = await producerPool.query(STATS, [SAMPLED]);
      const byTable = Object.fromEntries(rows.map((r) => [r.relname, r]));
      const window = claimMs;
      claimMs = [];
      const sample = {
        t: Math.round((performance.now() - start) / 1000),
        donePerSecond: Math.round((completed - lastCompleted) / (SAMPLE_MS / 1000)),
        claims: window.length,
        claimP99Ms: quantile(window, 0.99),
        claimMaxMs: window.length ? Math.max(...window) : 0,
        tables: Object.fromEntries(
          SAMPLED.map((t) => {
            const r = byTable[t];
            return [
              t,
              {
                bytes: Number(r.bytes),
                live: Number(r.live),
                dead: Number(r.dead),
                vacuums: Number(r.vacuums),
                analyzes: Number(r.analyzes),
              },
            ];
          }),
        ),
      };
      lastCompleted = completed;
      samples.push(sample);
      const line = [
        sample.t,
        sample.donePerSecond,
        sample.claims,
        sample.claimP99Ms.toFixed(1),
        sample.claimMaxMs.toFixed(1),
      ];
      for (const t of SAMPLED) {
        const s = sample.tables[t];
        line.push(mb(s.bytes), s.live, s.dead, s.vacuums);
      }
      console.log(line.join('\t'));
    }
    await producer;
    const last = samples.at(-1);
    const result = {
      candidate: args.candidate,
      settings: candidate,
      naptimeSeconds: NAPTIME,
      backlog: BACKLOG,
      rate: RATE,
      seconds: SECONDS,
      produced,
      completed,
      claimP99Ms: Number(
        quantile(
          samples.map((s) => s.claimP99Ms),
          0.5,
        ).toFixed(1),
      ),
      claimMaxMs: Number(Math.max(...samples.map((s) => s.claimMaxMs)).toFixed(1)),
      tables: Object.fromEntries(
        SAMPLED.map((t) => [
          t,
          {
            endMB: Number(mb(last.tables[t].bytes)),
            maxMB: Number(mb(Math.max(...samples.map((s) => s.tables[t].bytes)))),
            endDead: last.tables[t].dead,
            maxDead: Math.max(...samples.map((s) => s.tables[t].dead)),
            autovacuums: last.tables[t].vacuums,
            autoanalyzes: last.tables[t].analyzes,
          },
        ]),
      ),
    };
    // The autovacuum's own account (log_autovacuum_min_duration 0): how long its vacuums took.
    for (const t of SAMPLED) {
      const elapsed = cluster
        .log()
        .split('automatic vacuum of table')
        .filter((chunk) => chunk.startsWith(` "tock.public.${t}"`))
        .map((chunk) => Number(/elapsed: ([\d.]+) s/.exec(chunk)?.[1] ?? Number.NaN));
      result.tables[t].vacuumSecondsTotal = Number(elapsed.reduce((a, b) => a + b, 0).toFixed(2));
      result.tables[t].vacuumSecondsMax = elapsed.length ? Math.max(...elapsed) : 0;
    }
    console.log(`result ${JSON.stringify(result)}`);
  } finally {
    if (worker) await worker.stop(2000);
    await producerPool.end();
    await pool.end();
    await cluster.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
