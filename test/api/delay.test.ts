/**
 * `GET /v1/delay` (issue 22, item 3) over real loopback HTTP on a real store: buckets of slots with
 * the count and the nearest-rank percentiles of the ended runs' delays, computed here by hand from
 * the runs inserted; only the key's tenant's runs; one pool or job; and every bad input a 400
 * naming the field, with nothing written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { type DelayRun, insertDelayRuns } from '../setup/factories.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

const MIN = 60_000;
/** The range the tests read: three one-minute buckets from here. */
const FROM = T0 - 10 * MIN;
const iso = (ms: number) => new Date(ms).toISOString();
const range = `from=${iso(FROM)}&to=${iso(FROM + 3 * MIN)}&step=1m`;

let db: TestDatabase;
let api: Api;
let acme: RoleKeys;
let beta: RoleKeys;
let http: ReturnType<typeof client>;

/** Acme's runs: bucket 0 holds ten of job a at 100..1000 ms, bucket 2 two of job b; bucket 1 none. */
const acmeRuns: DelayRun[] = [
  ...Array.from({ length: 10 }, (_, i) => ({
    tenantId: 'acme',
    jobId: 'a',
    slot: FROM + i * 1000,
    delayMs: (i + 1) * 100,
    state: i === 9 ? ('dead' as const) : ('succeeded' as const),
  })),
  // Created 10 s after its slot (a trigger for a past slot): due from its creation, so 2 s late.
  {
    tenantId: 'acme',
    jobId: 'b',
    slot: FROM + 2 * MIN,
    createdAfterMs: 10_000,
    delayMs: 2000,
    pool: 'batch',
  },
  // Started before it was due (a claim ahead): 0, not negative.
  { tenantId: 'acme', jobId: 'b', slot: FROM + 2 * MIN + 5000, delayMs: -200, pool: 'batch' },
  // Not counted: cancelled, still queued, a slot at `to` (the range is [from, to)), before `from`.
  { tenantId: 'acme', jobId: 'a', slot: FROM + 1000 * 30, delayMs: 90_000, state: 'cancelled' },
  { tenantId: 'acme', jobId: 'a', slot: FROM + 1000 * 31, delayMs: null, state: 'pending' },
  { tenantId: 'acme', jobId: 'a', slot: FROM + 3 * MIN, delayMs: 90_000 },
  { tenantId: 'acme', jobId: 'a', slot: FROM - 1, delayMs: 90_000 },
];

beforeAll(async () => {
  db = await setupDatabase();
  acme = await keysFor(db, 'acme');
  beta = await keysFor(db, 'beta');
  api = await startApi(db);
  http = client(api.base);
  await insertDelayRuns(db.pool, acmeRuns);
  // Another tenant's runs, in the same buckets, with the same job and pool names and far larger delays.
  await insertDelayRuns(
    db.pool,
    Array.from({ length: 5 }, (_, i) => ({
      tenantId: 'beta',
      jobId: 'a',
      slot: FROM + i,
      delayMs: 50_000 + i,
    })),
  );
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

const empty = (start: number) => ({ start: iso(start), runs: 0, p50: null, p99: null, max: null });

describe('GET /v1/delay', () => {
  test('buckets of slots: count, nearest-rank p50 and p99, max of the ended runs; empty buckets too', async () => {
    const a = await http('GET', `/v1/delay?${range}`, { key: acme.reader });
    expect(a.status, a.text).toBe(200);
    expect(a.json).toEqual({
      from: iso(FROM),
      to: iso(FROM + 3 * MIN),
      step_seconds: 60,
      pool: null,
      job_id: null,
      buckets: [
        // 100..1000 ms: the 5th of 10 is the median, the 10th the 99th percentile.
        { start: iso(FROM), runs: 10, p50: 0.5, p99: 1, max: 1 },
        empty(FROM + MIN),
        // 0 and 2 s: the 1st of 2 is the median.
        { start: iso(FROM + 2 * MIN), runs: 2, p50: 0, p99: 2, max: 2 },
      ],
    });
  });

  test("one job or one pool; another tenant's runs never count", async () => {
    const job = await http('GET', `/v1/delay?${range}&job_id=b`, { key: acme.reader });
    expect(job.status, job.text).toBe(200);
    expect(job.json.job_id).toBe('b');
    expect(job.json.buckets).toEqual([
      empty(FROM),
      empty(FROM + MIN),
      { start: iso(FROM + 2 * MIN), runs: 2, p50: 0, p99: 2, max: 2 },
    ]);
    const pool = await http('GET', `/v1/delay?${range}&pool=default`, { key: acme.reader });
    expect(pool.json.buckets.map((b: { runs: number }) => b.runs)).toEqual([10, 0, 0]);
    const both = await http('GET', `/v1/delay?${range}&pool=batch&job_id=a`, { key: acme.reader });
    expect(both.json.buckets.map((b: { runs: number }) => b.runs)).toEqual([0, 0, 0]);

    const b = await http('GET', `/v1/delay?${range}&job_id=a`, { key: beta.reader });
    expect(b.json.buckets[0]).toEqual({ start: iso(FROM), runs: 5, p50: 50.002, p99: 50.004, max: 50.004 });
    expect(b.json.buckets.slice(1).map((x: { runs: number }) => x.runs)).toEqual([0, 0]);
  });

  test('defaults: the last hour to now, by minute; a partial last bucket', async () => {
    const a = await http('GET', '/v1/delay', { key: acme.reader });
    expect(a.status, a.text).toBe(200);
    expect(a.json.to).toBe(iso(T0));
    expect(a.json.from).toBe(iso(T0 - 60 * MIN));
    expect(a.json.buckets).toHaveLength(60);
    const partial = await http('GET', `/v1/delay?from=${iso(FROM)}&to=${iso(FROM + 90_000)}&step=1m`, {
      key: acme.reader,
    });
    expect(partial.json.buckets.map((x: { start: string }) => x.start)).toEqual([iso(FROM), iso(FROM + MIN)]);
  });

  test('needs a key', async () => {
    expectError(await http('GET', `/v1/delay?${range}`), 401, 'unauthorized');
  });

  const bad: [string, string, string][] = [
    ['from after to', `from=${iso(FROM + MIN)}&to=${iso(FROM)}`, 'from'],
    ['from equal to to', `from=${iso(FROM)}&to=${iso(FROM)}`, 'from'],
    ['a range over 7 days', `from=${iso(FROM - 8 * 86_400_000)}&to=${iso(FROM)}&step=1h`, 'from'],
    ['too many buckets', `from=${iso(FROM - 86_400_000)}&to=${iso(FROM)}&step=30s`, 'step'],
    ['a step under a second', `step=500ms`, 'step'],
    ['a step that is no duration', `step=fast`, 'step'],
    ['an instant without an offset', `from=2026-01-01T00:00:00`, 'from'],
    ['a date that does not exist', `from=2025-02-30T00:00:00Z`, 'from'],
    ['NUL in job_id', 'job_id=a%00b', 'job_id'],
    ['NUL in from', 'from=2025-12-31T23%3A00%3A00Z%00', 'from'],
    ['a broken UTF-16 pool', 'pool=%ED%A0%80', 'pool'],
    ['an unknown parameter', 'limit=5', 'limit'],
  ];
  test.each(bad)('%s: 400 naming the field, nothing written', async (_name, query, field) => {
    const before = await snapshot(db.pool);
    const a = await http('GET', `/v1/delay?${query}`, { key: acme.reader });
    expectError(a, 400, 'validation_error');
    expect(a.json.error.message).toMatch(new RegExp(field));
    expect(await snapshot(db.pool)).toEqual(before);
  });
});
