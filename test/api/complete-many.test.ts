/**
 * Batched results over HTTP (`POST /v1/runs/complete`, and `results` on a claim), on a real server
 * and the test database: every entry is written under its own lease and tenant, and an entry that
 * cannot be written (a stale token, another tenant's run, a run id twice) fails alone, with nothing
 * written for it, while the rest of the batch is written.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { MAX_RESULTS } from '../../src/api/result-schemas.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { runRow } from '../setup/factories.js';
import {
  type Api,
  client,
  expectError,
  keysFor,
  jobWithRuns as putJobWithRuns,
  type RoleKeys,
  snapshot,
  startApi,
} from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let acme: RoleKeys;
let globex: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  acme = await keysFor(db, 'acme');
  globex = await keysFor(db, 'globex');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

interface Leased {
  run_id: string;
  lease_token: string;
}

/** `n` runs of a job in its own pool, claimed by a worker of `keys`' tenant. */
async function claimed(keys: RoleKeys, jobId: string, n: number, extra: Record<string, unknown> = {}) {
  const pool = `${jobId}-pool`;
  await putJobWithRuns(api.base, keys.operator, db.clock.nowMs(), { jobId, pool, n, extra });
  const a = await http('POST', '/v1/leases', { key: keys.worker, body: { worker_id: 'w', pool, max: n } });
  expect(a.status, a.text).toBe(200);
  expect(a.json.runs).toHaveLength(n);
  return (a.json.runs as Leased[]).map(({ run_id, lease_token }) => ({ run_id, lease_token }));
}

const complete = (key: string, results: Record<string, unknown>[]) =>
  http('POST', '/v1/runs/complete', { key, body: { results } });

test('one request writes successes and failures, each under its lease, with an outcome per entry in order', async () => {
  const runs = await claimed(acme, 'batch', 4, { max_attempts: 3 });
  const [ok, retried, dead, stale] = runs as [Leased, Leased, Leased, Leased];
  const theirs = (await claimed(globex, 'theirs', 1))[0]!;
  const before = { stale: await runRow(db.pool, stale.run_id), theirs: await runRow(db.pool, theirs.run_id) };
  const a = await complete(acme.worker, [
    { ...ok, status: 'succeeded', output: 'fine' },
    { ...retried, status: 'failed', error: 'try again' },
    { ...dead, status: 'failed', error: 'never', retryable: false },
    { run_id: stale.run_id, lease_token: '00000000-0000-4000-8000-000000000000', status: 'succeeded' },
    { ...theirs, status: 'succeeded' },
    { run_id: '00000000-0000-4000-8000-000000000009', lease_token: ok.lease_token, status: 'succeeded' },
  ]);
  expect(a.status, a.text).toBe(200);
  expect(a.json.server_time).toBe(new Date(db.clock.nowMs()).toISOString());
  const results = a.json.results as Record<string, unknown>[];
  expect(results.map((r) => [r.run_id, r.outcome, r.status])).toEqual([
    [ok.run_id, 'done', 200],
    [retried.run_id, 'done', 200],
    [dead.run_id, 'done', 200],
    [stale.run_id, 'lost', 409],
    [theirs.run_id, 'not_found', 404],
    ['00000000-0000-4000-8000-000000000009', 'not_found', 404],
  ]);
  expect(results[0]).toMatchObject({ state: 'succeeded' });
  expect(results[1]).toMatchObject({ state: 'pending', attempt: 2 });
  expect(results[1]!.available_at).toEqual(expect.any(String));
  expect(results[2]).toMatchObject({ state: 'dead', attempt: 1 });
  expect(results[3]!.error).toMatchObject({ code: 'lease_lost' });
  expect(results[4]!.error).toMatchObject({ code: 'not_found' });
  expect((await runRow(db.pool, ok.run_id)).state).toBe('succeeded');
  expect((await runRow(db.pool, retried.run_id)).state).toBe('pending');
  expect((await runRow(db.pool, dead.run_id)).state).toBe('dead');
  // The stale entry and the other tenant's run: exactly as they were.
  expect(await runRow(db.pool, stale.run_id)).toEqual(before.stale);
  expect(await runRow(db.pool, theirs.run_id)).toEqual(before.theirs);
  // The dead one is in the dead-letter list.
  const dlq = await http('GET', '/v1/runs?state=dead', { key: acme.reader });
  expect(dlq.json.runs.map((r: { run_id: string }) => r.run_id)).toContain(dead.run_id);
});

test('a run id twice in a batch refuses both entries and writes nothing for it; the other entries are written', async () => {
  const [twice, other] = (await claimed(acme, 'twice', 2)) as [Leased, Leased];
  const before = await runRow(db.pool, twice.run_id);
  const a = await complete(acme.worker, [
    { ...twice, status: 'succeeded' },
    { ...other, status: 'succeeded' },
    { ...twice, run_id: twice.run_id.toUpperCase(), status: 'failed', retryable: false },
  ]);
  expect(a.status, a.text).toBe(200);
  expect(a.json.results.map((r: { outcome: string }) => r.outcome)).toEqual(['conflict', 'done', 'conflict']);
  expect(a.json.results[0].error.code).toBe('duplicate_run');
  expect(await runRow(db.pool, twice.run_id)).toEqual(before);
  expect((await runRow(db.pool, other.run_id)).state).toBe('succeeded');
});

test(`more than ${MAX_RESULTS} results, an empty list or a malformed entry is a 400 and writes nothing`, async () => {
  const [run] = (await claimed(acme, 'too-many', 1)) as [Leased];
  const entry = { ...run, status: 'succeeded' };
  const before = await snapshot(db.pool);
  expectError(await complete(acme.worker, Array(MAX_RESULTS + 1).fill(entry)), 400, 'validation_error');
  expectError(await complete(acme.worker, []), 400, 'validation_error');
  expectError(
    await complete(acme.worker, [entry, { run_id: run.run_id, status: 'succeeded' }]),
    400,
    'validation_error',
  );
  expectError(await complete(acme.worker, [{ ...entry, state: 'x' }]), 400, 'validation_error');
  // NUL bytes in text are refused as every body's are (the store could not keep them as sent).
  expectError(await complete(acme.worker, [{ ...entry, output: 'a\u0000b' }]), 400, 'validation_error');
  expect(await snapshot(db.pool)).toEqual(before);
  // A reader key may not report results.
  expectError(await complete(acme.reader, [entry]), 403, 'forbidden');
  expect(await snapshot(db.pool)).toEqual(before);
});

test('a claim carrying results writes them first, answers their outcomes, and does not long-poll', async () => {
  const [done] = (await claimed(acme, 'piggyback', 1)) as [Leased];
  const before = await snapshot(db.pool);
  // Nothing is claimable in the pool: a long-poll would wait on the test's clock, which never moves.
  const a = await http('POST', '/v1/leases', {
    key: acme.worker,
    body: {
      worker_id: 'w',
      pool: 'piggyback-pool',
      max: 10,
      wait_ms: 20_000,
      results: [
        { ...done, status: 'succeeded', output: 'with the claim' },
        { ...done, run_id: '00000000-0000-4000-8000-000000000009', status: 'succeeded' },
      ],
    },
  });
  expect(a.status, a.text).toBe(200);
  expect(a.json.runs).toEqual([]);
  expect(a.json.results.map((r: { outcome: string }) => r.outcome)).toEqual(['done', 'not_found']);
  expect(await snapshot(db.pool)).not.toEqual(before);
  expect((await runRow(db.pool, done.run_id)).state).toBe('succeeded');
  // Sent again (a retry whose answer was lost), the result is not written twice: its lease has ended.
  const again = await http('POST', '/v1/runs/complete', {
    key: acme.worker,
    body: { results: [{ ...done, status: 'failed', retryable: false }] },
  });
  expect(again.json.results[0].outcome).toBe('lost');
  expect((await runRow(db.pool, done.run_id)).state).toBe('succeeded');
});

test('the single-run route answers as before: 200 with the state, 409 lease_lost, 404 for another tenant', async () => {
  const [mine, lost] = (await claimed(acme, 'single', 2)) as [Leased, Leased];
  const ok = await http('POST', `/v1/runs/${mine.run_id}/complete`, {
    key: acme.worker,
    body: { lease_token: mine.lease_token, status: 'failed', error: 'x' },
  });
  expect(ok.status, ok.text).toBe(200);
  expect(ok.json).toMatchObject({ state: 'pending', attempt: 2 });
  expectError(
    await http('POST', `/v1/runs/${lost.run_id}/complete`, {
      key: acme.worker,
      body: { lease_token: '00000000-0000-4000-8000-000000000000', status: 'succeeded' },
    }),
    409,
    'lease_lost',
  );
  expectError(
    await http('POST', `/v1/runs/${lost.run_id}/complete`, {
      key: globex.worker,
      body: { lease_token: lost.lease_token, status: 'succeeded' },
    }),
    404,
    'not_found',
  );
  expect((await runRow(db.pool, lost.run_id)).state).toBe('running');
});

test('a result carries what the handler reported since its last heartbeat: progress and log lines land on the attempt with it', async () => {
  const [ok, failed] = (await claimed(acme, 'reported', 2)) as [Leased, Leased];
  const a = await complete(acme.worker, [
    { ...ok, status: 'succeeded', progress: { value: 100, message: 'all done' }, logs: ['one', 'two'] },
    { ...failed, status: 'failed', retryable: false, logs: ['boom'], logs_dropped: 3 },
  ]);
  expect(a.json.results.map((r: { outcome: string }) => r.outcome)).toEqual(['done', 'done']);
  const run = await http('GET', `/v1/runs/${ok.run_id}`, { key: acme.reader });
  expect(run.json.attempts[0]).toMatchObject({
    progress: 100,
    progress_message: 'all done',
    logs: ['one', 'two'],
    logs_dropped: 0,
  });
  const dead = await http('GET', `/v1/runs/${failed.run_id}`, { key: acme.reader });
  expect(dead.json.attempts[0]).toMatchObject({ logs: ['boom'], logs_dropped: 3 });
  // Bounded as a heartbeat's report: more is a 400, nothing written.
  const [more] = (await claimed(acme, 'reported-too-much', 1)) as [Leased];
  const before = await snapshot(db.pool);
  expectError(
    await complete(acme.worker, [{ ...more, status: 'succeeded', logs: Array(101).fill('x') }]),
    400,
    'validation_error',
  );
  expect(await snapshot(db.pool)).toEqual(before);
});

test('a batch of stale or forged failures costs one read, not a write each: only live leases reach failRun', async () => {
  // Found in review: each failure of a batch went to failRun (two statements under a lock), so
  // 500 forged entries made 500 of them; a tenant's key could load the shared database that way.
  let failRuns = 0;
  const counting = new Proxy(db.store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop !== 'failRun' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        failRuns += 1;
        return value.apply(target, args);
      };
    },
  });
  const counted = await startApi(db, { store: counting });
  try {
    const [live] = (await claimed(acme, 'forged', 1)) as [Leased];
    const forged = Array.from({ length: 499 }, (_, i) => ({
      run_id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      lease_token: live.lease_token,
      status: 'failed',
      error: 'x',
    }));
    const a = await client(counted.base)('POST', '/v1/runs/complete', {
      key: acme.worker,
      body: { results: [...forged, { ...live, status: 'failed', retryable: false }] },
    });
    expect(a.status, a.text).toBe(200);
    expect(a.json.results.at(-1)).toMatchObject({ outcome: 'done', state: 'dead' });
    expect(a.json.results.slice(0, -1).every((r: { outcome: string }) => r.outcome === 'not_found')).toBe(
      true,
    );
    expect(failRuns).toBe(1);
  } finally {
    await counted.close();
  }
});
