#!/usr/bin/env node
// An experiment, not Tock's schema: the bare SQL loop of the throughput scenario (8 connections,
// claim 100 → complete those 100) on Tock's schema and on variants of it, interleaved round by
// round, reporting runs/s, the CPU per run of PostgreSQL and of this process, WAL bytes per run and
// the share of run-row updates that were HOT. Usage:
//   node bench/experiments/split-queue.mjs [--runs 20000] [--rounds 5] [--fillfactor 80] [--only a,b]
// Variants (--only; default split,leaseonly), each beside Tock's own schema:
// - split: the pending queue (`run_queue`) and the live leases (`run_leases`) in narrow tables of
//   their own; `runs` keeps only its primary key and unique (tenant, job, slot) index, so no index
//   reads `state` and the claim and the completion can be HOT updates of the run row.
// - leaseonly: as split, but the claim writes no run row (a running run is one with a lease row);
//   the completion writes it once.
// - batchlease: one lease row per claim (token, worker, expiry, the run ids), not per run; the
//   completion writes the run row once and counts the claim's finished runs.
// - batchhot: as batchlease, but the claim also rewrites the run row, so `runs.state` stays true.
// - bykey: Tock's schema, the completion without `state = 'running'` (found by primary key).
// - delete: Tock's schema, the completion deletes the run (no history kept; the lower bound).
// --fillfactor applies to `runs` in the split variants. DATABASE_URL: the server (default the
// machine's); databases bench_split_<variant> are dropped and recreated.
import { parseArgs } from 'node:util';
import { createPool, migrate } from '../../dist/store/index.js';
import { runClaim, runCompleteMany } from '../../dist/store/queries/runs.js';
import { cpuDelta, fmt, median, postgresCpu, recreateDatabase, seedBacklog, walPosition } from '../lib.mjs';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '5' },
    fillfactor: { type: 'string', default: '80' },
    only: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log(
    'node bench/experiments/split-queue.mjs [--runs 20000] [--rounds 5] [--fillfactor 80] [--only a,b]',
  );
  console.log('  The bare SQL loop on Tock’s schema and on variants of it (see the header).');
  console.log(
    '  --only: variants to run besides Tock’s (split, leaseonly, batchlease, batchhot, bykey, delete).',
  );
  process.exit(0);
}
/** `--name`'s value as an integer from `min` to `max`; exits with a message otherwise. */
function integer(name, min, max) {
  const n = Number(args[name]);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`--${name} must be an integer from ${min} to ${max} (got ${args[name]})`);
    process.exit(2);
  }
  return n;
}
const runs = integer('runs', 100, 10_000_000);
const rounds = integer('rounds', 1, 100);
const fillfactor = integer('fillfactor', 10, 100);
const server = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const CONNECTIONS = 8;
const BATCH = 100;

// The split schema: Tock's tables, without the partial indexes on `state`, plus the queue and
// the leases.
const SPLIT_DDL = [
  'DROP INDEX runs_ready',
  'DROP INDEX runs_next_available',
  'DROP INDEX runs_running',
  'DROP INDEX runs_finished',
  `ALTER TABLE runs SET (fillfactor = ${fillfactor})`,
  `CREATE TABLE run_queue (run_id uuid PRIMARY KEY, pool text NOT NULL, sort_key timestamptz NOT NULL,
     available_at timestamptz NOT NULL)`,
  'CREATE INDEX run_queue_ready ON run_queue (pool, sort_key)',
  `CREATE TABLE run_leases (run_id uuid PRIMARY KEY, lease_token uuid NOT NULL,
     lease_expires_at timestamptz NOT NULL)`,
];

const SPLIT_CLAIM = `
WITH picked AS (
  DELETE FROM run_queue q WHERE q.run_id IN (
    SELECT run_id FROM run_queue WHERE pool = $1 AND available_at <= $2
    ORDER BY sort_key LIMIT $3 FOR UPDATE SKIP LOCKED)
  RETURNING q.run_id, q.sort_key
), claimed AS (
  UPDATE runs r SET state = 'running', lease_owner = $4, lease_token = gen_random_uuid(),
    lease_expires_at = $2::timestamptz + $5::int * interval '1 millisecond', started_at = $2
  FROM picked WHERE r.run_id = picked.run_id AND r.state = 'pending'
  RETURNING r.run_id, r.tenant_id, r.job_id, r.handler, r.payload, r.pool, r.scheduled_for, r.attempt,
    r.max_attempts, r.lease_token, r.lease_expires_at, r.available_at, r.timeout_seconds, picked.sort_key
), leased AS (
  INSERT INTO run_leases (run_id, lease_token, lease_expires_at)
  SELECT run_id, lease_token, lease_expires_at FROM claimed
)
SELECT run_id, tenant_id, job_id, handler, payload, pool, scheduled_for, attempt, max_attempts, lease_token,
  lease_expires_at, available_at, timeout_seconds
FROM claimed ORDER BY sort_key`;

const SPLIT_COMPLETE = `
WITH done AS (
  DELETE FROM run_leases l USING unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
  WHERE l.run_id = v.run_id AND l.lease_token = v.lease_token AND l.lease_expires_at > $3
  RETURNING l.run_id
)
UPDATE runs r SET state = 'succeeded', finished_at = $3, lease_expires_at = NULL, last_error = NULL
FROM done WHERE r.run_id = done.run_id
RETURNING r.run_id`;

// The claim writes only the queue and the leases (the run row is read, not updated: `running` is
// the presence of a lease row); the completion writes the run row once, with the attempt's
// worker and start taken from the lease it deletes.
const LEASE_ONLY_DDL = [
  ...SPLIT_DDL.slice(0, -1),
  `CREATE TABLE run_leases (run_id uuid PRIMARY KEY, lease_token uuid NOT NULL,
     lease_expires_at timestamptz NOT NULL, lease_owner text NOT NULL, started_at timestamptz NOT NULL)`,
];

const LEASE_ONLY_CLAIM = `
WITH picked AS (
  DELETE FROM run_queue q WHERE q.run_id IN (
    SELECT run_id FROM run_queue WHERE pool = $1 AND available_at <= $2
    ORDER BY sort_key LIMIT $3 FOR UPDATE SKIP LOCKED)
  RETURNING q.run_id, q.sort_key
), leased AS (
  INSERT INTO run_leases (run_id, lease_token, lease_expires_at, lease_owner, started_at)
  SELECT run_id, gen_random_uuid(), $2::timestamptz + $5::int * interval '1 millisecond', $4, $2 FROM picked
  RETURNING run_id, lease_token, lease_expires_at
)
SELECT r.run_id, r.tenant_id, r.job_id, r.handler, r.payload, r.pool, r.scheduled_for, r.attempt, r.max_attempts,
  l.lease_token, l.lease_expires_at, r.available_at, r.timeout_seconds
FROM leased l JOIN runs r USING (run_id) JOIN picked p USING (run_id)
ORDER BY p.sort_key`;

const LEASE_ONLY_COMPLETE = `
WITH done AS (
  DELETE FROM run_leases l USING unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
  WHERE l.run_id = v.run_id AND l.lease_token = v.lease_token AND l.lease_expires_at > $3
  RETURNING l.run_id, l.lease_token, l.lease_owner, l.started_at
)
UPDATE runs r SET state = 'succeeded', finished_at = $3, lease_token = done.lease_token,
  lease_owner = done.lease_owner, started_at = done.started_at, last_error = NULL
FROM done WHERE r.run_id = done.run_id
RETURNING r.run_id`;

// Tock's schema, the completion without `state = 'running'`: the live lease (token and an expiry in
// the future; every write that ends a lease clears the expiry) says the run is running, and the
// planner, with nothing to match runs_running's predicate, finds each run by its primary key
// whatever its statistics say.
const BY_KEY_COMPLETE = `
UPDATE runs r SET state = 'succeeded', finished_at = $3, lease_expires_at = NULL, last_error = NULL,
  output = v.output
FROM unnest($1::uuid[], $2::uuid[], $4::text[]) AS v(run_id, lease_token, output)
WHERE r.run_id = v.run_id AND r.lease_token = v.lease_token AND r.lease_expires_at > $3
RETURNING r.run_id`;

// The lower bound of keeping no history: Tock's claim, and a completion that deletes the run, as
// graphile-worker's does.
const DELETE_COMPLETE = `
DELETE FROM runs r USING unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
WHERE r.run_id = v.run_id AND r.lease_token = v.lease_token AND r.state = 'running' AND r.lease_expires_at > $3
RETURNING r.run_id`;

// One lease per claim, not per run: the claim deletes its runs from the queue and writes one row
// (token, worker, expiry, the run ids) for the batch; the run row is written once, by the
// completion, as a HOT update (the attempt's token, worker and start come from the claim row,
// which the completion locks FOR KEY SHARE so that a reaper deleting it waits), and the claim row
// counts its finished runs and goes when all are done. A heartbeat would renew one row per claim.
const BATCH_LEASE_DDL = [
  ...SPLIT_DDL.slice(0, -1),
  `CREATE TABLE run_claims (lease_token uuid PRIMARY KEY, worker text NOT NULL, started_at timestamptz NOT NULL,
     lease_expires_at timestamptz NOT NULL, run_ids uuid[] NOT NULL, finished int NOT NULL DEFAULT 0)`,
];

const BATCH_LEASE_CLAIM = `
WITH picked AS (
  DELETE FROM run_queue q WHERE q.run_id IN (
    SELECT run_id FROM run_queue WHERE pool = $1 AND available_at <= $2
    ORDER BY sort_key LIMIT $3 FOR UPDATE SKIP LOCKED)
  RETURNING q.run_id, q.sort_key
), leased AS (
  INSERT INTO run_claims (lease_token, worker, started_at, lease_expires_at, run_ids)
  SELECT gen_random_uuid(), $4, $2, $2::timestamptz + $5::int * interval '1 millisecond', array_agg(run_id)
  FROM picked HAVING count(*) > 0
  RETURNING lease_token, lease_expires_at
)
SELECT r.run_id, r.tenant_id, r.job_id, r.handler, r.payload, r.pool, r.scheduled_for, r.attempt, r.max_attempts,
  l.lease_token, l.lease_expires_at, r.available_at, r.timeout_seconds
FROM picked p JOIN runs r USING (run_id) CROSS JOIN leased l
ORDER BY p.sort_key`;

const BATCH_LEASE_COMPLETE = `
WITH v AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
), live AS (
  SELECT c.lease_token, c.worker, c.started_at, c.run_ids FROM run_claims c
  WHERE c.lease_token IN (SELECT DISTINCT lease_token FROM v) AND c.lease_expires_at > $3
  FOR KEY SHARE
), done AS (
  UPDATE runs r SET state = 'succeeded', finished_at = $3, lease_token = live.lease_token,
    lease_owner = live.worker, started_at = live.started_at, last_error = NULL
  FROM v JOIN live ON live.lease_token = v.lease_token AND v.run_id = ANY(live.run_ids)
  WHERE r.run_id = v.run_id AND r.state = 'pending'
  RETURNING r.run_id, live.lease_token
), counted AS (
  UPDATE run_claims c SET finished = c.finished + n.k
  FROM (SELECT lease_token, count(*)::int AS k FROM done GROUP BY lease_token) n
  WHERE c.lease_token = n.lease_token AND c.finished + n.k < cardinality(c.run_ids)
), gone AS (
  DELETE FROM run_claims c
  USING (SELECT lease_token, count(*)::int AS k FROM done GROUP BY lease_token) n
  WHERE c.lease_token = n.lease_token AND c.finished + n.k >= cardinality(c.run_ids)
)
SELECT run_id FROM done`;

// As batchlease, but `runs.state` stays the truth: the claim also rewrites the run row (state,
// token, worker, start) as a HOT update, the completion checks the token on the run row and the
// claim row's expiry (locking it FOR KEY SHARE), and a claim row is left for the reaper to remove
// once it expires (no count of finished runs).
const BATCH_HOT_CLAIM = `
WITH picked AS (
  DELETE FROM run_queue q WHERE q.run_id IN (
    SELECT run_id FROM run_queue WHERE pool = $1 AND available_at <= $2
    ORDER BY sort_key LIMIT $3 FOR UPDATE SKIP LOCKED)
  RETURNING q.run_id, q.sort_key
), leased AS (
  INSERT INTO run_claims (lease_token, worker, started_at, lease_expires_at, run_ids)
  SELECT gen_random_uuid(), $4, $2, $2::timestamptz + $5::int * interval '1 millisecond', array_agg(run_id)
  FROM picked HAVING count(*) > 0
  RETURNING lease_token, lease_expires_at
), claimed AS (
  UPDATE runs r SET state = 'running', lease_owner = $4, lease_token = l.lease_token, started_at = $2
  FROM picked p CROSS JOIN leased l
  WHERE r.run_id = p.run_id AND r.state = 'pending'
  RETURNING r.run_id, r.tenant_id, r.job_id, r.handler, r.payload, r.pool, r.scheduled_for, r.attempt,
    r.max_attempts, r.lease_token, l.lease_expires_at, r.available_at, r.timeout_seconds, p.sort_key
)
SELECT run_id, tenant_id, job_id, handler, payload, pool, scheduled_for, attempt, max_attempts, lease_token,
  lease_expires_at, available_at, timeout_seconds
FROM claimed ORDER BY sort_key`;

const BATCH_HOT_COMPLETE = `
WITH v AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
), live AS (
  SELECT c.lease_token FROM run_claims c
  WHERE c.lease_token IN (SELECT DISTINCT lease_token FROM v) AND c.lease_expires_at > $3
  FOR KEY SHARE
)
UPDATE runs r SET state = 'succeeded', finished_at = $3, last_error = NULL
FROM v JOIN live USING (lease_token)
WHERE r.run_id = v.run_id AND r.lease_token = v.lease_token AND r.state = 'running'
RETURNING r.run_id`;

/** Both split variants: the backlog, also listed in the queue table, and no leases. */
async function seedQueue(admin, leases = 'run_leases') {
  await admin.query(`TRUNCATE run_queue, ${leases}`);
  await seedBacklog(admin, runs);
  await admin.query(
    `INSERT INTO run_queue (run_id, pool, sort_key, available_at)
     SELECT run_id, pool, sort_key, available_at FROM runs WHERE state = 'pending'`,
  );
  await admin.query(`VACUUM ANALYZE run_queue, ${leases}`);
}

/** The split completions' parameters: run ids, their tokens, now. */
const leaseParams = (rows) => [rows.map((r) => r.run_id), rows.map((r) => r.lease_token), new Date()];

const tockClaim = (pool, i) =>
  pool.query(runClaim, ['default', new Date(), BATCH, `sql-${i}`, 30_000, null, null, 0]);

const variants = [
  {
    key: 'tock',
    name: 'Tock (migrations 0001–0006)',
    database: 'bench_split_tock',
    claim: tockClaim,
    complete: (pool, rows) =>
      pool.query(runCompleteMany, [
        rows.map((r) => r.run_id),
        rows.map((r) => r.lease_token),
        new Date(),
        null,
        rows.map(() => null),
      ]),
    seed: async (admin) => seedBacklog(admin, runs),
  },
  {
    key: 'split',
    name: `split queue and leases (runs fillfactor ${fillfactor})`,
    database: 'bench_split_split',
    ddl: SPLIT_DDL,
    claim: (pool, i) => pool.query(SPLIT_CLAIM, ['default', new Date(), BATCH, `sql-${i}`, 30_000]),
    complete: (pool, rows) => pool.query(SPLIT_COMPLETE, leaseParams(rows)),
    seed: seedQueue,
  },
  {
    key: 'leaseonly',
    name: `split, the claim writes no run row (runs fillfactor ${fillfactor})`,
    database: 'bench_split_leaseonly',
    ddl: LEASE_ONLY_DDL,
    claim: (pool, i) => pool.query(LEASE_ONLY_CLAIM, ['default', new Date(), BATCH, `sql-${i}`, 30_000]),
    complete: (pool, rows) => pool.query(LEASE_ONLY_COMPLETE, leaseParams(rows)),
    seed: seedQueue,
  },
  {
    key: 'batchlease',
    name: `split, one lease row per claim, the run row written once (runs fillfactor ${fillfactor})`,
    database: 'bench_split_batchlease',
    ddl: BATCH_LEASE_DDL,
    claim: (pool, i) => pool.query(BATCH_LEASE_CLAIM, ['default', new Date(), BATCH, `sql-${i}`, 30_000]),
    complete: (pool, rows) => pool.query(BATCH_LEASE_COMPLETE, leaseParams(rows)),
    seed: (admin) => seedQueue(admin, 'run_claims'),
  },
  {
    key: 'batchhot',
    name: `split, one lease row per claim, the run row's state kept (two HOT updates, runs fillfactor ${fillfactor})`,
    database: 'bench_split_batchhot',
    ddl: BATCH_LEASE_DDL,
    claim: (pool, i) => pool.query(BATCH_HOT_CLAIM, ['default', new Date(), BATCH, `sql-${i}`, 30_000]),
    complete: (pool, rows) => pool.query(BATCH_HOT_COMPLETE, leaseParams(rows)),
    seed: (admin) => seedQueue(admin, 'run_claims'),
  },
  {
    key: 'bykey',
    name: 'Tock, the completion finds runs by primary key (no state predicate)',
    database: 'bench_split_bykey',
    claim: tockClaim,
    complete: (pool, rows) => pool.query(BY_KEY_COMPLETE, [...leaseParams(rows), rows.map(() => null)]),
    seed: async (admin) => seedBacklog(admin, runs),
  },
  {
    key: 'delete',
    name: 'Tock, the completion deletes the run (no history)',
    database: 'bench_split_delete',
    claim: tockClaim,
    complete: (pool, rows) => pool.query(DELETE_COMPLETE, leaseParams(rows)),
    seed: async (admin) => seedBacklog(admin, runs),
  },
];
const only = args.only?.split(',') ?? ['split', 'leaseonly'];
const unknown = only.filter((k) => !variants.some((v) => v.key === k));
if (unknown.length > 0) {
  console.error(`unknown variant ${unknown.join(', ')}; known: ${variants.map((v) => v.key).join(', ')}`);
  process.exit(2);
}
const schemas = variants.filter((v) => v.key === 'tock' || only.includes(v.key));

for (const s of schemas) {
  s.url = await recreateDatabase(server, s.database);
  s.admin = createPool(s.url, { max: 2, applicationName: 'tock-bench-admin' });
  await migrate(s.admin);
  for (const ddl of s.ddl ?? []) await s.admin.query(ddl);
  s.rounds = [];
}

try {
  for (let r = 1; r <= rounds; r++) {
    for (const s of schemas) {
      await s.seed(s.admin);
      await s.admin.query('CHECKPOINT');
      const pool = createPool(s.url, { max: CONNECTIONS, applicationName: 'tock-bench-split' });
      await Promise.all(Array.from({ length: CONNECTIONS }, () => pool.query('SELECT 1')));
      let done = 0;
      const walAt = () => walPosition((sql) => s.admin.query(sql));
      const wal0 = await walAt();
      const pg0 = await postgresCpu();
      const node0 = process.cpuUsage();
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async (_, i) => {
          for (;;) {
            const { rows } = await s.claim(pool, i);
            if (rows.length === 0) return;
            const { rowCount } = await s.complete(pool, rows);
            done += rowCount;
          }
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      const pgMs = cpuDelta(pg0, await postgresCpu());
      const node = process.cpuUsage(node0);
      const walPerRun = ((await walAt()) - wal0) / runs;
      await pool.end();
      if (done !== runs) throw new Error(`${s.name}: completed ${done} of ${runs}`);
      const { rows: hot } = await s.admin.query(
        `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'runs'`,
      );
      const f = {
        runsPerSecond: runs / seconds,
        postgresUsPerRun: pgMs === null ? null : (pgMs * 1000) / runs,
        nodeUsPerRun: (node.user + node.system) / runs,
        walBytesPerRun: walPerRun,
        hotShare: hot[0].n_tup_upd > 0 ? hot[0].n_tup_hot_upd / hot[0].n_tup_upd : null,
      };
      s.rounds.push(f);
      console.log(
        `round ${r}/${rounds} ${s.name}: ${fmt(f.runsPerSecond)} runs/s, PostgreSQL ${fmt(f.postgresUsPerRun, 1)} µs/run, ` +
          `this process ${fmt(f.nodeUsPerRun, 1)} µs/run, WAL ${fmt(f.walBytesPerRun)} B/run, HOT ${fmt((f.hotShare ?? 0) * 100)} % of run updates so far`,
      );
    }
  }
} finally {
  for (const s of schemas) await s.admin.end();
}

console.log(`\n${runs} runs, ${CONNECTIONS} connections × claim ${BATCH}, ${rounds} rounds (medians):`);
for (const s of schemas) {
  const m = (k) => median(s.rounds.map((f) => f[k]));
  console.log(
    `  ${s.name}: ${fmt(m('runsPerSecond'))} runs/s, PostgreSQL ${fmt(m('postgresUsPerRun'), 1)} µs/run, this process ${fmt(m('nodeUsPerRun'), 1)} µs/run, WAL ${fmt(m('walBytesPerRun'))} B/run`,
  );
}
const base = median(schemas[0].rounds.map((f) => f.runsPerSecond));
for (const s of schemas.slice(1)) {
  const m = median(s.rounds.map((f) => f.runsPerSecond));
  const perRound = median(s.rounds.map((f, i) => f.runsPerSecond / schemas[0].rounds[i].runsPerSecond));
  console.log(
    `  ${s.name} ÷ Tock: ${fmt((m / base) * 100)} % of the medians, ${fmt(perRound * 100)} % per round`,
  );
}
