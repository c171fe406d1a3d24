/**
 * The plans of the history pages as Tock's connections run them: generic plans
 * (`plan_cache_mode=force_generic_plan`, src/store/db.ts), which see no parameter's value. On a
 * tenant with 100,000 runs, each page is read down its index, from its cursor, for one page of
 * rows: no scan of `runs`, no sort of more than a page. (Before issue 21, `LIMIT $n` and
 * `$n IS NULL OR …` made the tenant's first page a scan of every run and a sort, and each page
 * after a cursor read every newer run through a filter.)
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import * as DL from '../../src/store/queries/dead-letters.js';
import * as D from '../../src/store/queries/delay.js';
import * as R from '../../src/store/queries/run-reads.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';

let db: TestDatabase;
const BIG = 'plans-big';
const RUNS = 100_000;

beforeAll(async () => {
  db = await setupDatabase();
  // One tenant with most of the runs (100 jobs, 2 % dead), another with 1 %: the shape of a
  // large installation, where the statistics make a scan look cheap to a generic plan.
  await db.pool.query(
    `INSERT INTO runs (tenant_id, job_id, scheduled_for, state, max_attempts, handler, payload, pool, priority,
       backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, finished_at, parked)
     SELECT CASE WHEN i % 100 = 0 THEN 'plans-small' ELSE $1 END, 'job-' || (i % 100), t,
       CASE WHEN i % 50 = 1 THEN 'dead' ELSE 'succeeded' END, 3, 'noop', '{}', 'default', 0, 2, 3600, t, t, t, t,
       CASE WHEN i % 50 = 1 THEN 'dead' END
     FROM generate_series(1, $2::int) AS i, LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 minute' AS t) x`,
    [BIG, RUNS],
  );
  await db.pool.query('ANALYZE runs');
}, 60_000);
afterAll(() => db.teardown());

/** The generic plan of `sql` executed with `args` (SQL literals), as JSON text. */
async function genericPlan(sql: string, types: string[], args: string[]): Promise<string> {
  const client = await db.pool.connect();
  try {
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE page(${types.join(', ')}) AS ${sql}`);
    const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE page(${args.join(', ')})`);
    return JSON.stringify(rows[0]['QUERY PLAN']);
  } finally {
    await client.query('DEALLOCATE ALL');
    client.release();
  }
}

const FIRST = { rows: 51, after: false };
const NEXT = { rows: 51, after: true };
const CURSOR = ["'2026-02-01T00:00:00Z'", "'00000000-0000-4000-8000-000000000000'"];
const scansRuns = /"Seq Scan"[^}]*"Relation Name":"runs"/;

/** The index conditions of a plan, joined. */
const indexConds = (plan: string) =>
  [...plan.matchAll(/"Index Cond":"([^"]*)"/g)].map((m) => m[1]).join(' | ');

test("a tenant's runs, newest first: down runs_by_tenant from the cursor, one page", async () => {
  const first = await genericPlan(R.runList(FIRST), ['text'], [`'${BIG}'`]);
  expect(first).toContain('runs_by_tenant');
  expect(first).not.toMatch(scansRuns);
  expect(first).not.toContain('"Sort"');
  const next = await genericPlan(R.runList(NEXT), ['text', 'timestamptz', 'uuid'], [`'${BIG}'`, ...CURSOR]);
  expect(next).toContain('runs_by_tenant');
  expect(next).not.toMatch(scansRuns);
  expect(next).not.toContain('"Sort"');
  // The cursor bounds the index scan, rather than filtering every newer run.
  expect(indexConds(next)).toMatch(/scheduled_for/);
});

test("a tenant's succeeded runs, and its dead letters: from the cursor, one page", async () => {
  for (const shape of [FIRST, NEXT]) {
    const cursor = shape.after ? CURSOR : [];
    const cursorTypes = shape.after ? ['timestamptz', 'uuid'] : [];
    const ok = await genericPlan(
      R.runListSucceeded(shape),
      ['text', ...cursorTypes],
      [`'${BIG}'`, ...cursor],
    );
    expect(ok).toContain('runs_by_tenant');
    expect(ok).not.toMatch(scansRuns);
    expect(ok).not.toContain('"Sort"');
    const dead = await genericPlan(
      R.runListParked(shape),
      ['text', 'text', ...cursorTypes],
      [`'${BIG}'`, "'dead'", ...cursor],
    );
    expect(dead).toContain('runs_parked');
    expect(dead).not.toMatch(scansRuns);
    expect(dead).not.toContain('"Sort"');
    if (shape.after) {
      expect(indexConds(ok)).toMatch(/scheduled_for/);
      expect(indexConds(dead)).toMatch(/scheduled_for/);
    }
  }
});

test("a job's runs: one page chosen on its index before the claims are joined", async () => {
  for (const [shape, withState] of [
    [FIRST, false],
    [NEXT, false],
    [FIRST, true],
    [NEXT, true],
  ] as const) {
    const types = ['text', 'text', ...(withState ? ['text'] : []), ...(shape.after ? ['timestamptz'] : [])];
    const args = [
      `'${BIG}'`,
      "'job-1'",
      ...(withState ? ["'dead'"] : []),
      ...(shape.after ? [CURSOR[0]!] : []),
    ];
    const plan = await genericPlan(R.runListOfJob(shape, withState), types, args);
    expect(plan).toContain('runs_tenant_id_job_id_scheduled_for_key');
    expect(plan).not.toMatch(scansRuns);
    // Whatever is sorted (the page, to join it to the claims) is under the page's limit.
    expect(plan).toMatch(/"Node Type":"Limit"[\s\S]*runs_tenant_id_job_id_scheduled_for_key/);
    if (shape.after) expect(indexConds(plan)).toMatch(/scheduled_for/);
  }
});

test("the delay series (GET /v1/delay): a tenant's range down runs_by_tenant, a job's down its unique index", async () => {
  const types = ['text', 'timestamptz', 'timestamptz', 'float8', 'float8', 'text'];
  const args = [`'${BIG}'`, "'2026-02-01T00:00:00Z'", "'2026-02-02T00:00:00Z'", '0', '60000', 'NULL'];
  const tenant = await genericPlan(D.runDelaySeries, types, args);
  expect(tenant).toContain('runs_by_tenant');
  expect(indexConds(tenant)).toMatch(/scheduled_for >= \$2.*scheduled_for < \$3/);
  expect(tenant).not.toMatch(scansRuns);
  const job = await genericPlan(D.runDelaySeriesOfJob, [...types, 'text'], [...args, "'job-7'"]);
  expect(job).toContain('runs_tenant_id_job_id_scheduled_for_key');
  expect(indexConds(job)).toMatch(/job_id = \$7.*scheduled_for >= \$2/);
  expect(job).not.toMatch(scansRuns);
});

test('the per-job gauges: each tenant probed, then its window of slots down runs_by_tenant, the queue by key', async () => {
  const plan = await genericPlan(
    D.runJobDelayTop,
    ['timestamptz', 'timestamptz', 'int'],
    ["'2026-02-01T00:00:00Z'", "'2026-02-01T00:05:00Z'", '20'],
  );
  expect(plan).toContain('runs_by_tenant');
  expect(indexConds(plan)).toMatch(/tenant_id = t\.tenant_id.*scheduled_for >= \$1/);
  expect(plan).not.toMatch(scansRuns);
  // A pending run's wait: its queue row by its key, never a scan of the queue.
  expect(indexConds(plan)).toMatch(/run_id = r\.run_id/);
  expect(plan).not.toMatch(/"Seq Scan"[^}]*"Relation Name":"run_queue"/);
});

test("a bulk replay's count and batch of one job's dead runs: the job is in the index condition", async () => {
  // 100 jobs here: read through the tenant's dead runs (runs_parked), a job's count read its
  // tenant's every dead run; by the job, only the job's runs.
  const filter = ['text', 'text', 'text', 'timestamptz', 'timestamptz'];
  const args = [`'${BIG}'`, "'job-1'", 'NULL', 'NULL', 'NULL'];
  const count = await genericPlan(DL.runDeadCountOfJob, [...filter, 'int'], [...args, '100001']);
  expect(indexConds(count)).toMatch(/job_id/);
  expect(count).not.toMatch(scansRuns);
  const batch = await genericPlan(
    DL.runDeadMatchingOfJob,
    [...filter, 'timestamptz', 'uuid', 'int'],
    [...args, 'NULL', 'NULL', '501'],
  );
  expect(indexConds(batch)).toMatch(/job_id/);
  expect(batch).not.toMatch(scansRuns);
});
