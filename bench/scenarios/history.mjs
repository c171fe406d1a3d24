// Issue 21: a database with 10 million finished runs. The reads an operator makes answer in under
// 50 ms p99, and the tick and the claim cost what they cost on an empty database.
//
// Two databases of their own, each migrated and given the same jobs through `upsertJobs` (10,000 of
// tenant `bench` and 100 of a second, small tenant `small`, so that tenant filters matter; schedule
// `0 0 1 1 *`, so nothing falls due by itself): `bench_history_empty` keeps no runs,
// `bench_history` gets `--runs` finished runs (default 10,000,000; smoke 20,000), 99 % of them
// `bench`'s, 1 % `small`'s, inserted set-based (INSERT … SELECT generate_series, 1,000,000 rows a
// statement, a progress line each) over the last 30 days of slots, evenly spread over each
// tenant's jobs. Their states, by a hash of their index: 96 % succeeded, 2 % dead (3 failed
// attempts, each with its row in `attempts`), 1 % cancelled while queued, 1 % skipped; each run's
// columns as the statement that ended it writes them (runCompleteMany, runFail, runCancel,
// skipRuns). Then VACUUM ANALYZE and CHECKPOINT. TOCK_BENCH_HISTORY_REUSE=1 keeps a
// `bench_history` seeded earlier with the same sizes (it is then migrated and analysed again),
// so a fix can be measured without seeding again; the database is left in place at the end (a
// smoke run seeds `bench_history_smoke`, and leaves `bench_history` alone).
//
// Reads: the HTTP API in this process (`buildApp` on a loopback port, keys, the tenant quota out of
// the way) with an admin key of `bench` (a cluster-admin key for `/metrics`), one request at a
// time, after a warm-up: p50/p99/max of each (nearest rank). Pages deep in a cursor chain: pages 2
// to 50 of each chain, following `next_cursor`; pages at a random point of the history: after the
// cursor of a run sampled from the table (TABLESAMPLE), as a page ending on it would give. The `/metrics` scrapes each take a new sample of the
// run gauges (runs by state, over the whole table: what every scrape pays once the sample is 15 s
// old, i.e. every scrape at a usual scrape interval).
//
// Tick and claim, on the empty database and on the full one, interleaved: the tick that
// materialises 1,000 due jobs (spread over the job ids and so over every shard; re-armed before
// each tick, its runs deleted after), timed as `PostgresStore.tick` over every shard, and one
// `claimRuns` of 100 ready runs (inserted into the queue before each claim, deleted after). The
// median of 7 of each a round (after one not counted), then the median over rounds, and the ratio
// full ÷ empty.
import pino from 'pino';
import { buildApp, Metrics, RunGaugeSampler } from '../../dist/api/index.js';
import { SystemClock } from '../../dist/core/index.js';
import { encodeCursor } from '../../dist/store/cursor.js';
import { createPool, migrate, PostgresStore } from '../../dist/store/index.js';
import { fmt, markdownTable, recreateDatabase, databaseUrl as withDatabase } from '../lib.mjs';
import { overRounds, percentiles, registerJobs } from '../timing.mjs';

/** The seeded database; a smoke run seeds one of its own and leaves a full one in place. */
const fullName = (smoke) => (smoke ? 'bench_history_smoke' : 'bench_history');
const EMPTY = 'bench_history_empty';
const TENANT = 'bench';
const SMALL = 'small';
/** The share of the runs that are the small tenant's. */
const SMALL_SHARE = 0.01;
const CHUNK = 1_000_000;
const DAYS = 30;
const TARGET_MS = 50;
const DUE = 1000;
const CLAIM = 100;
const TIMED = 7;
const TICK = { lookaheadMs: 1000, batchSize: 1000 };
/** `skipRuns`'s reason (src/store/queries/gates.ts). */
const SKIPPED_REASON = 'overlap skip: the slot arrived while an earlier run of the job was running';
const clock = new SystemClock();

function sizes(ctx) {
  const smoke = ctx.smoke;
  return {
    runs: ctx.options.runs ?? (smoke ? 20_000 : 10_000_000),
    jobs: smoke ? 1000 : 10_000,
    smallJobs: smoke ? 10 : 100,
    requests: smoke ? 40 : 300,
    warmup: smoke ? 5 : 30,
    chainPages: 50,
    scrapes: smoke ? 3 : 10,
  };
}

const jobId = (prefix, i) => `${prefix}-${i}`;

/** Registers the jobs of both tenants through the bulk path. */
async function registerAll(store, s) {
  const now = clock.nowMs();
  const defs = (prefix, n) =>
    Array.from({ length: n }, (_, i) => ({
      jobId: jobId(prefix, i),
      schedule: '0 0 1 1 *',
      handler: 'noop',
    }));
  await registerJobs(store, { tenantId: TENANT, jobs: defs('hist', s.jobs), now });
  await registerJobs(store, { tenantId: SMALL, jobs: defs('small', s.smallJobs), now });
  // The job the claims' ready runs belong to.
  await store.upsertJobs({
    tenantId: TENANT,
    jobs: [{ jobId: 'claimed', schedule: '0 0 1 1 *', handler: 'noop' }],
    now,
  });
}

/**
 * Runs `lo` … `hi − 1` of a tenant whose `jobs` jobs are `<prefix>-<n>`: run i is job i mod jobs's
 * slot number ⌊i / jobs⌋, slots `stepMs` apart from `from`, the jobs' slots staggered within a
 * step. Its state by a hash of i: 96 % succeeded, 2 % dead, 1 % cancelled, 1 % skipped. A dead run
 * failed 3 attempts, 2 s and 4 s apart (backoff 2 s): each has its row in attempts, the last one's
 * token, worker and times are the run row's, as `runFail` writes them. A cancelled run was taken
 * off the queue before its slot (`runCancel`: no lease, no attempt); a skipped one at its slot
 * (`skipRuns`).
 */
const SEED = `
WITH src AS (
  SELECT i, t, st, ms,
    CASE WHEN st = 'dead' THEN t + interval '6 seconds' ELSE t END AS avail,
    st IN ('succeeded', 'dead') AS ran
  FROM (
    SELECT i, $6::timestamptz + (i / $3) * ($7::float8 * interval '1 ms')
             + (i % $3) * ($7::float8 / $3 * interval '1 ms') AS t,
      CASE WHEN h < 96 THEN 'succeeded' WHEN h < 98 THEN 'dead' WHEN h < 99 THEN 'cancelled' ELSE 'skipped' END AS st,
      20 + abs(hashint8(-i)) % 2000 AS ms
    FROM generate_series($4::bigint, $5::bigint - 1) AS i, LATERAL (SELECT abs(hashint8(i)) % 100 AS h) x
  ) g
), ins AS (
  INSERT INTO runs (tenant_id, job_id, scheduled_for, state, attempt, max_attempts, handler, payload, pool,
    priority, backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, lease_owner, lease_token,
    last_error, created_at, started_at, finished_at, parked, claimed_at)
  SELECT $1, $2 || '-' || (i % $3), t, st, CASE WHEN st = 'dead' THEN 3 ELSE 1 END, 3, 'noop', '{}', 'default',
    0, 2, 3600, avail, avail,
    CASE WHEN ran THEN 'worker-' || (i % 8) END,
    CASE WHEN ran THEN gen_random_uuid() END,
    CASE st WHEN 'dead' THEN 'boom (attempt 3 of 3)' WHEN 'skipped' THEN $8 END,
    t - interval '1 second',
    CASE WHEN ran THEN avail + interval '5 ms' END,
    CASE WHEN ran THEN avail + interval '5 ms' + ms * interval '1 ms'
      WHEN st = 'cancelled' THEN t - interval '10 minutes' ELSE t END,
    CASE WHEN st IN ('dead', 'cancelled', 'skipped') THEN st END,
    CASE WHEN ran THEN avail + interval '3 ms' END
  FROM src
  RETURNING run_id, state, scheduled_for, lease_token, lease_owner
)
INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at, claimed_at, finished_at, outcome, error)
SELECT CASE WHEN n = 3 THEN lease_token ELSE gen_random_uuid() END, run_id, n,
  CASE WHEN n = 3 THEN lease_owner ELSE 'worker-' || n END, a.at + interval '5 ms', a.at + interval '3 ms',
  a.at + interval '50 ms', 'failed', 'boom (attempt ' || n || ' of 3)'
FROM ins CROSS JOIN generate_series(1, 3) AS n
  CROSS JOIN LATERAL (SELECT scheduled_for + (CASE n WHEN 1 THEN 0 WHEN 2 THEN 2 ELSE 6 END) * interval '1 second' AS at) a
WHERE ins.state = 'dead'`;

/** Seeds `n` runs of a tenant's `jobs` jobs, CHUNK a statement; `log` gets a line a chunk. */
async function seedTenant(client, { tenantId, prefix, jobs, n, from, log }) {
  const perJob = Math.ceil(n / jobs);
  const stepMs = (DAYS * 86_400_000) / perJob;
  for (let lo = 0; lo < n; lo += CHUNK) {
    const hi = Math.min(n, lo + CHUNK);
    const t0 = performance.now();
    await client.query(SEED, [tenantId, prefix, jobs, lo, hi, from, stepMs, SKIPPED_REASON]);
    const s = (performance.now() - t0) / 1000;
    log(`  ${tenantId}: ${fmt(hi)} of ${fmt(n)} runs (${fmt((hi - lo) / s)} runs/s)`);
  }
}

/** The sizes a seeded database was seeded with (its comment), or null. */
async function seededAs(url, name) {
  const admin = createPool(withDatabase(url, 'postgres'), { max: 1 });
  try {
    const { rows } = await admin.query(
      `SELECT shobj_description(oid, 'pg_database') AS c FROM pg_database WHERE datname = $1`,
      [name],
    );
    return rows[0]?.c ?? null;
  } finally {
    await admin.end();
  }
}

async function prepareFull(ctx, s) {
  const FULL = fullName(ctx.smoke);
  const signature = `tock bench history: ${s.runs} runs, ${s.jobs} + ${s.smallJobs} jobs`;
  if (process.env.TOCK_BENCH_HISTORY_REUSE === '1' && (await seededAs(ctx.databaseUrl, FULL)) === signature) {
    const url = withDatabase(ctx.databaseUrl, FULL);
    const pool = createPool(url, { max: 4, applicationName: 'tock-bench-history' });
    await migrate(pool);
    ctx.log(`reusing ${FULL} (${signature}); migrated, VACUUM ANALYZE…`);
    await pool.query('VACUUM ANALYZE');
    await pool.end();
    return { url, seedSeconds: null, reused: true };
  }
  const url = await recreateDatabase(ctx.databaseUrl, FULL);
  const pool = createPool(url, { max: 4, applicationName: 'tock-bench-history' });
  try {
    await migrate(pool);
    await registerAll(new PostgresStore(pool), s);
    const t0 = performance.now();
    const from = new Date(clock.nowMs() - 3_600_000 - DAYS * 86_400_000);
    const small = Math.round(s.runs * SMALL_SHARE);
    ctx.log(`seeding ${fmt(s.runs)} finished runs over ${DAYS} days…`);
    const client = await pool.connect();
    try {
      await client.query('SET synchronous_commit = off');
      await seedTenant(client, {
        tenantId: TENANT,
        prefix: 'hist',
        jobs: s.jobs,
        n: s.runs - small,
        from,
        log: ctx.log,
      });
      await seedTenant(client, {
        tenantId: SMALL,
        prefix: 'small',
        jobs: s.smallJobs,
        n: small,
        from,
        log: ctx.log,
      });
    } finally {
      client.release();
    }
    ctx.log('VACUUM ANALYZE, CHECKPOINT…');
    await pool.query('VACUUM ANALYZE');
    await pool.query('CHECKPOINT');
    await pool.query(`COMMENT ON DATABASE ${FULL} IS '${signature}'`);
    return { url, seedSeconds: (performance.now() - t0) / 1000, reused: false };
  } finally {
    await pool.end();
  }
}

async function prepareEmpty(ctx, s) {
  const url = await recreateDatabase(ctx.databaseUrl, EMPTY);
  const pool = createPool(url, { max: 4, applicationName: 'tock-bench-history' });
  try {
    await migrate(pool);
    await registerAll(new PostgresStore(pool), s);
    await pool.query('VACUUM ANALYZE');
  } finally {
    await pool.end();
  }
  return url;
}

/** Sizes of runs and attempts and the counts by stored state. */
async function describe(pool) {
  const { rows } = await pool.query(
    `SELECT pg_total_relation_size('runs')::float8 AS runs_bytes, pg_total_relation_size('attempts')::float8 AS attempts_bytes,
       (SELECT count(*) FROM attempts)::float8 AS attempts`,
  );
  const states = await pool.query(
    'SELECT tenant_id, state, count(*)::float8 AS n FROM runs GROUP BY 1, 2 ORDER BY 1, 2',
  );
  return { ...rows[0], states: states.rows };
}

/**
 * A GET on the API (a `POST <path> <json>` path: a POST of that body): its latency in ms, and its
 * JSON.
 */
async function get(base, key, path) {
  const post = /^POST (\S+) (.*)$/.exec(path);
  const t = performance.now();
  const res = await fetch(`${base}${post ? post[1] : path}`, {
    method: post ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${key}`, ...(post ? { 'content-type': 'application/json' } : {}) },
    body: post ? post[2] : undefined,
  });
  const body = await res.text();
  const ms = performance.now() - t;
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${body.slice(0, 300)}`);
  return { ms, body };
}

/** Times `paths` one request at a time, after `warmup` requests not counted (the first paths again). */
async function timeAll(base, key, paths, warmup) {
  for (let i = 0; i < warmup; i++) await get(base, key, paths[i % paths.length]);
  const ms = [];
  for (const p of paths) ms.push((await get(base, key, p)).ms);
  return percentiles(ms);
}

/** Pages 2 … `pages` of the chain that starts at `path` (its first page not timed), each timed. */
async function chain(base, key, path, pages) {
  const ms = [];
  const sep = path.includes('?') ? '&' : '?';
  let next = JSON.parse((await get(base, key, path)).body).next_cursor;
  while (next && ms.length < pages - 1) {
    const r = await get(base, key, `${path}${sep}cursor=${encodeURIComponent(next)}`);
    ms.push(r.ms);
    next = JSON.parse(r.body).next_cursor;
  }
  return ms;
}

/** Deep pages of chains starting at `paths` (in turn) until `n` pages are timed. */
async function timeChains(base, key, paths, n, pages) {
  const ms = [];
  for (let i = 0; ms.length < n && i < paths.length * 4; i++)
    ms.push(...(await chain(base, key, paths[i % paths.length], pages)));
  return percentiles(ms.slice(0, n));
}

const pick = (xs, n) => Array.from({ length: n }, () => xs[Math.floor(Math.random() * xs.length)]);

/**
 * A sample of the tenant's runs (random pages of the table): `ids`, run ids of any state and ⅓
 * dead ones (with attempts); `cursors`, cursors at random points of the history (a run's slot and
 * id, as a page ending on it gives), of any run, of dead runs, and of a job's runs (with its job).
 */
async function sampleRuns(pool, total, n) {
  const pct = Math.min(100, (100 * 50_000) / total);
  const { rows } = await pool.query(
    `SELECT run_id, job_id, state, scheduled_for FROM runs TABLESAMPLE SYSTEM (${pct}) WHERE tenant_id = $1`,
    [TENANT],
  );
  const dead = rows.filter((r) => r.state === 'dead');
  if (dead.length === 0 || rows.length === 0) throw new Error('the sample of runs found none (dead)');
  const ids = [
    ...pick(rows, n - Math.floor(n / 3)).map((r) => r.run_id),
    ...pick(dead, Math.floor(n / 3)).map((r) => r.run_id),
  ].sort(() => Math.random() - 0.5);
  const cursor = (r) => encodeURIComponent(encodeCursor([r.scheduled_for.getTime(), r.run_id]));
  return {
    ids,
    anyCursors: pick(rows, n).map(cursor),
    deadCursors: pick(dead, n).map(cursor),
    jobCursors: pick(rows, n).map((r) => ({ jobId: r.job_id, cursor: cursor(r) })),
  };
}

async function measureReads(ctx, s, url) {
  const pool = createPool(url, { max: 10, applicationName: 'tock-bench-history-api' });
  const store = new PostgresStore(pool);
  const metrics = new Metrics({ processMetrics: false });
  const app = await buildApp({
    store,
    clock,
    logger: pino({ level: 'silent' }),
    metrics,
    auth: 'keys',
    quota: { perSecond: 1_000_000, burst: 1_000_000 },
    readiness: async () => ({ database: true, migrations: true }),
    // Every scrape takes a new sample: what a scrape pays when the last is older than 15 s.
    runGauges: new RunGaugeSampler({ store, clock, metrics, intervalMs: 0 }),
  });
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${app.server.address().port}`;
    const now = clock.nowMs();
    const admin = (await store.createApiKey({ tenantId: TENANT, role: 'admin', now })).secret;
    const ops = (await store.createApiKey({ tenantId: 'ops', role: 'cluster-admin', now })).secret;
    const n = s.requests;
    const jobs = () =>
      pick(
        Array.from({ length: s.jobs }, (_, i) => jobId('hist', i)),
        n,
      );
    const { ids, anyCursors, deadCursors, jobCursors } = await sampleRuns(pool, s.runs, n);
    const rows = [];
    const measure = async (endpoint, what, fn) => {
      const r = await fn();
      rows.push({ endpoint, what, ...r });
      ctx.log(
        `${endpoint} (${what}): p50 ${fmt(r.p50, 1)} / p99 ${fmt(r.p99, 1)} / max ${fmt(r.max, 1)} ms (${r.count})`,
      );
    };
    const first = (paths) => () => timeAll(base, admin, paths, s.warmup);
    const deep = (paths) => () => timeChains(base, admin, paths, n, s.chainPages);
    await measure(
      'GET /v1/runs/{id}',
      'random runs, ⅓ dead with 3 attempts',
      first(ids.map((id) => `/v1/runs/${id}`)),
    );
    await measure(
      'GET /v1/jobs/{id}/runs',
      'first page, random jobs',
      first(jobs().map((j) => `/v1/jobs/${j}/runs`)),
    );
    await measure(
      'GET /v1/jobs/{id}/runs',
      `pages 2–${s.chainPages} (cursor)`,
      deep(
        jobs()
          .slice(0, 20)
          .map((j) => `/v1/jobs/${j}/runs`),
      ),
    );
    await measure(
      'GET /v1/jobs/{id}/runs',
      'a page at a random point of its history',
      first(jobCursors.map((c) => `/v1/jobs/${c.jobId}/runs?cursor=${c.cursor}`)),
    );
    await measure(
      'GET /v1/runs?job_id=…&state=dead',
      "a job's dead runs (tock dlq --job), first page",
      first(jobs().map((j) => `/v1/runs?job_id=${j}&state=dead`)),
    );
    await measure(
      'GET /v1/runs?state=dead',
      'the DLQ, first page',
      first(Array(n).fill('/v1/runs?state=dead')),
    );
    await measure('GET /v1/runs?state=dead', `pages 2–${s.chainPages}`, deep(['/v1/runs?state=dead']));
    await measure(
      'GET /v1/runs?state=dead',
      'a page at a random point of the history',
      first(deadCursors.map((c) => `/v1/runs?state=dead&cursor=${c}`)),
    );
    await measure(
      'GET /v1/runs?state=cancelled',
      'first page',
      first(Array(n).fill('/v1/runs?state=cancelled')),
    );
    await measure(
      'GET /v1/runs?state=succeeded',
      'first page',
      first(Array(n).fill('/v1/runs?state=succeeded')),
    );
    await measure('GET /v1/runs', "the tenant's runs, first page", first(Array(n).fill('/v1/runs')));
    await measure('GET /v1/runs', `pages 2–${s.chainPages}`, deep(['/v1/runs']));
    await measure(
      'GET /v1/runs',
      'a page at a random point of the history',
      first(anyCursors.map((c) => `/v1/runs?cursor=${c}`)),
    );
    await measure('GET /v1/jobs', 'first page', first(Array(n).fill('/v1/jobs')));
    await measure('GET /v1/status', 'tenant admin (unserved runs)', first(Array(n).fill('/v1/status')));
    await measure('GET /v1/status', 'cluster-admin (+ backlog, shards)', () =>
      timeAll(base, ops, Array(n).fill('/v1/status'), s.warmup),
    );
    await measureConsoleViews(measure, first, pool, jobs);
    await measure('GET /metrics', 'tock_runs by state: a new sample each scrape', () =>
      timeAll(base, ops, Array(s.scrapes).fill('/metrics'), 1),
    );
    return rows;
  } finally {
    await app.close();
    await pool.end();
  }
}

/**
 * The console's own reads that the history pages above do not cover: who the key is, a job, the
 * limits, and the delay charts. The seeded slots end an hour before the seeding, so a chart is read
 * over the newest hour (the Cluster page's view) and day of the seeded history, and a job's over
 * its newest week (the most the API allows), not over the last hour of the clock, which is empty.
 */
async function measureConsoleViews(measure, first, pool, jobs) {
  const { rows } = await pool.query('SELECT max(scheduled_for) AS last FROM runs WHERE tenant_id = $1', [
    TENANT,
  ]);
  const end = rows[0].last.getTime() + 1;
  const range = (hours, step) =>
    `from=${new Date(end - hours * 3_600_000).toISOString()}&to=${new Date(end).toISOString()}&step=${step}`;
  await measure('GET /v1/whoami', 'the console at sign-in', first(Array(jobs().length).fill('/v1/whoami')));
  await measure('GET /v1/jobs/{id}', 'random jobs (the job page)', first(jobs().map((j) => `/v1/jobs/${j}`)));
  await measure('GET /v1/limits', 'the Limits page', first(Array(jobs().length).fill('/v1/limits')));
  await measure(
    'GET /v1/delay',
    'the tenant, newest hour of history, 1 m steps (Cluster chart)',
    first(Array(jobs().length).fill(`/v1/delay?${range(1, '1m')}`)),
  );
  await measure(
    'GET /v1/delay',
    'the tenant, newest day of history, 1 h steps',
    first(Array(Math.min(30, jobs().length)).fill(`/v1/delay?${range(24, '1h')}`)),
  );
  const some = (path) => first(Array(jobs().length).fill(path));
  await measure(
    'GET /v1/jobs?q=…',
    'the Jobs search: an id prefix (111 of 10,000 jobs)',
    some('/v1/jobs?q=hist-12'),
  );
  await measure(
    'GET /v1/jobs?handler=…',
    'the Jobs search: by handler (every job: the first page)',
    some('/v1/jobs?handler=noop'),
  );
  await measure(
    'GET /v1/schedule',
    'the schedule preview, 5 slots with daylight-saving notes',
    some('/v1/schedule?expression=30%202%20*%20*%20*&timezone=Europe%2FBerlin&count=5'),
  );
  await measure(
    'GET /v1/runs?state=pending',
    'Runs now: pending runs with why each waits (none queued here)',
    some('/v1/runs?state=pending'),
  );
  await measure(
    'POST /v1/runs/replay (dry_run)',
    "a job's dead runs counted before a bulk replay",
    first(jobs().map((j) => `POST /v1/runs/replay {"dry_run":true,"job_id":"${j}"}`)),
  );
  await measure(
    'POST /v1/runs/replay (dry_run)',
    "the tenant's dead runs counted (up to 100,000 of 198,000), error text filter",
    first(Array(30).fill('POST /v1/runs/replay {"dry_run":true,"error_contains":"attempt 3"}')),
  );
  await measure(
    'GET /v1/delay?job_id=…',
    'random jobs, newest week of history, 1 h steps (job page chart)',
    first(jobs().map((j) => `/v1/delay?job_id=${j}&${range(24 * 7, '1h')}`)),
  );
}

/** 1,000 job ids spread over the tenant's ids (and so over the shards). */
const dueIds = (jobs) =>
  Array.from({ length: DUE }, (_, k) => jobId('hist', Math.floor((k * jobs) / Math.min(DUE, jobs))));

/** One tick with `ids` due (re-armed before, its runs deleted after): ms. */
async function timedTick(pool, store, ids) {
  const { rowCount } = await pool.query(
    'UPDATE jobs SET next_run_at = $1 WHERE tenant_id = $2 AND job_id = ANY($3::text[])',
    [new Date(clock.nowMs() - 1000), TENANT, ids],
  );
  if (rowCount !== ids.length) throw new Error(`re-armed ${rowCount} of ${ids.length} jobs`);
  const t = performance.now();
  const tick = await store.tick({ now: clock.nowMs(), ...TICK });
  const ms = performance.now() - t;
  if (tick.created.length !== ids.length)
    throw new Error(`the tick materialised ${tick.created.length} of ${ids.length} due jobs`);
  await pool.query('DELETE FROM runs WHERE run_id = ANY($1::uuid[])', [tick.created.map((r) => r.runId)]);
  return ms;
}

let claimSlot = Date.parse('2030-01-01T00:00:00Z');

/** One claim of CLAIM ready runs (queued before, deleted after): ms. */
async function timedClaim(pool, store) {
  const from = new Date(claimSlot);
  claimSlot += CLAIM * 1000;
  const past = new Date(clock.nowMs() - 60_000);
  await pool.query(
    `WITH ins AS (
       INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
         backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at)
       SELECT $1, 'claimed', $2::timestamptz + i * interval '1 second', 3, 'noop', '{}', 'default', 0, 2, 3600,
         $3::timestamptz + i * interval '1 ms', $3::timestamptz + i * interval '1 ms', $3
       FROM generate_series(1, $4::int) AS i
       RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key
     )
     INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
     SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key FROM ins`,
    [TENANT, from, past, CLAIM],
  );
  const t = performance.now();
  const claimed = await store.claimRuns({
    workerId: 'bench-1',
    pool: 'default',
    max: CLAIM,
    now: clock.nowMs(),
  });
  const ms = performance.now() - t;
  if (claimed.length !== CLAIM) throw new Error(`claimed ${claimed.length} of ${CLAIM} ready runs`);
  await pool.query('DELETE FROM run_claims WHERE lease_token = ANY($1::uuid[])', [
    [...new Set(claimed.map((c) => c.leaseToken))],
  ]);
  await pool.query('DELETE FROM runs WHERE run_id = ANY($1::uuid[])', [claimed.map((c) => c.runId)]);
  return ms;
}

async function tickAndClaim(ctx, s, urls) {
  const sides = urls.map(([name, url]) => {
    const pool = createPool(url, { max: 4, applicationName: 'tock-bench-history-tick' });
    return { name, pool, store: new PostgresStore(pool), rounds: [] };
  });
  const ids = dueIds(s.jobs);
  try {
    for (const side of sides) {
      await timedTick(side.pool, side.store, ids); // not counted: plans and schedules warm
      await timedClaim(side.pool, side.store);
    }
    for (let r = 1; r <= ctx.rounds; r++) {
      for (const side of sides) {
        const ticks = [];
        const claims = [];
        for (let k = 0; k < TIMED; k++) {
          ticks.push(await timedTick(side.pool, side.store, ids));
          claims.push(await timedClaim(side.pool, side.store));
        }
        const f = {
          tickMs: overRounds(ticks, (x) => x).median,
          claimMs: overRounds(claims, (x) => x).median,
          ticks,
          claims,
        };
        side.rounds.push(f);
        ctx.log(
          `round ${r}/${ctx.rounds} ${side.name}: tick (${fmt(DUE)} due) ${fmt(f.tickMs, 1)} ms, claim of ${CLAIM} ${fmt(f.claimMs, 1)} ms (medians of ${TIMED})`,
        );
      }
    }
  } finally {
    await Promise.all(sides.map((x) => x.pool.end()));
  }
  return sides.map(({ name, rounds }) => ({
    name,
    rounds,
    tickMs: overRounds(rounds, 'tickMs'),
    claimMs: overRounds(rounds, 'claimMs'),
  }));
}

export default {
  name: 'history',
  // Seeding 10,000,000 runs takes minutes and 7 GiB of disk: only when named (its smoke size in --smoke).
  explicitOnly: true,
  description: `${fmt(10_000_000)} finished runs (--runs): history reads under ${TARGET_MS} ms p99, tick and claim as on an empty database (issue 21)`,
  async run(ctx) {
    const s = sizes(ctx);
    const emptyUrl = await prepareEmpty(ctx, s);
    const full = await prepareFull(ctx, s);
    const pool = createPool(full.url, { max: 1 });
    const seeded = await describe(pool).finally(() => pool.end());
    ctx.log(
      `${fullName(ctx.smoke)}: runs ${fmt(seeded.runs_bytes / 2 ** 30, 2)} GiB with indexes, attempts ${fmt(seeded.attempts)} rows (${fmt(seeded.attempts_bytes / 2 ** 20)} MiB)` +
        (full.seedSeconds === null ? ' (reused)' : `; seeded in ${fmt(full.seedSeconds)} s`),
    );
    const reads = await measureReads(ctx, s, full.url);
    const [empty, loaded] = await tickAndClaim(ctx, s, [
      ['empty', emptyUrl],
      [`${fmt(s.runs)} runs`, full.url],
    ]);
    const missed = reads.filter((r) => r.p99 !== null && r.p99 >= TARGET_MS);
    const tickRatio = loaded.tickMs.median / empty.tickMs.median;
    const claimRatio = loaded.claimMs.median / empty.claimMs.median;
    const table = [
      markdownTable(
        ['endpoint', 'what', 'requests', 'p50 ms', 'p99 ms', 'max ms', `< ${TARGET_MS} ms p99`],
        reads.map((r) => [
          r.endpoint,
          r.what,
          fmt(r.count),
          fmt(r.p50, 1),
          fmt(r.p99, 1),
          fmt(r.max, 1),
          r.p99 === null ? '–' : r.p99 < TARGET_MS ? 'yes' : 'NO',
        ]),
      ),
      '',
      markdownTable(
        ['database', `tick, ${fmt(DUE)} due, ms`, `claim of ${CLAIM}, ms`],
        [
          ...[empty, loaded].map((x) => [x.name, fmt(x.tickMs.median, 1), fmt(x.claimMs.median, 1)]),
          ['ratio', `× ${fmt(tickRatio, 2)}`, `× ${fmt(claimRatio, 2)}`],
        ],
      ),
    ].join('\n');
    const notes = [
      missed.length === 0
        ? `Every read measured answered in under ${TARGET_MS} ms p99.`
        : `Target missed (p99 ≥ ${TARGET_MS} ms): ${missed.map((r) => `${r.endpoint} (${r.what}) ${fmt(r.p99, 1)} ms`).join('; ')}.`,
      `Tick with ${fmt(DUE)} due: × ${fmt(tickRatio, 2)}, claim of ${CLAIM}: × ${fmt(claimRatio, 2)} (${fmt(s.runs)} runs ÷ empty; same jobs; medians of ${TIMED} a round, median over ${ctx.rounds} round${ctx.rounds > 1 ? 's' : ''}).`,
      `Seeded: ${fmt(s.runs)} runs (${fmt(s.runs - Math.round(s.runs * SMALL_SHARE))} of tenant ${TENANT} over ${fmt(s.jobs)} jobs, the rest of ${SMALL} over ${fmt(s.smallJobs)}), 30 days of slots; 96 % succeeded, 2 % dead (3 attempts rows each), 1 % cancelled, 1 % skipped; runs ${fmt(seeded.runs_bytes / 2 ** 30, 2)} GiB with its indexes${full.seedSeconds === null ? ' (a database seeded earlier, TOCK_BENCH_HISTORY_REUSE=1)' : `, seeded in ${fmt(full.seedSeconds)} s`}.`,
      `Reads: the API in this process, one request at a time after ${s.warmup} not counted, an admin key of ${TENANT} (/metrics and the cluster /v1/status: a cluster-admin key); nearest-rank percentiles. /metrics: ${s.scrapes} scrapes, each taking a new sample of the run gauges (its p99 is its max).`,
      "The console's views: its pages read the history endpoints above and /v1/whoami, /v1/jobs/{id}, the job search, /v1/schedule, /v1/limits, the pending list, the bulk replay's count (dry_run) and /v1/delay (charts over the newest hour, day and a job's week of the seeded history).",
    ];
    return {
      settings: {
        ...s,
        days: DAYS,
        smallShare: SMALL_SHARE,
        chunk: CHUNK,
        due: DUE,
        claim: CLAIM,
        timed: TIMED,
        tick: TICK,
        rounds: ctx.rounds,
        reused: full.reused,
      },
      systems: [{ name: 'tock', seeded, reads, tickClaim: [empty, loaded], tickRatio, claimRatio }],
      table,
      notes,
    };
  },
};
