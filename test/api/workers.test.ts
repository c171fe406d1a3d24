import { afterAll, beforeAll, expect, test } from 'vitest';
import { listenForRuns, RunWakeups } from '../../src/api/index.js';
import { LONG_POLL_FALLBACK_MS } from '../../src/api/long-poll.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { attemptRows, runRow } from '../setup/factories.js';
import {
  type Answer,
  type Api,
  client,
  expectError,
  keysFor,
  NO_REPORT_JSON,
  jobWithRuns as putJobWithRuns,
  type RoleKeys,
  startApi,
  until,
} from './helpers.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** The store's default lease (the test store is built without `leaseMs`). */
const LEASE_MS = 30_000;
const iso = (ms: number) => new Date(ms).toISOString();

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;
let stopListening: () => Promise<void>;

beforeAll(async () => {
  db = await setupDatabase();
  // As `tock server` wires it: one listener whose notifications wake the waiting long-polls.
  const wakeups = new RunWakeups(db.clock);
  const silent = { warn() {}, info() {} };
  stopListening = await listenForRuns((w, l) => db.store.listen(w, l), wakeups, silent);
  api = await startApi(db, { wakeups });
  http = client(api.base);
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await api?.close();
  await stopListening?.();
  await db?.teardown();
});

/** A job in its own pool and `n` triggered runs of it (distinct slots), oldest first. */
const jobWithRuns = (jobId: string, pool: string, n: number, extra: Record<string, unknown> = {}) =>
  putJobWithRuns(api.base, keys.operator, db.clock.nowMs(), { jobId, pool, n, extra });

async function lease(body: Record<string, unknown>): Promise<Answer> {
  return http('POST', '/v1/leases', { key: keys.worker, body });
}

test('POST /v1/leases claims a run under a fresh lease token; the next claim finds nothing', async () => {
  const [runId] = await jobWithRuns('claimable', 'p-claim', 1, { payload: { n: 1 } });
  const t = db.clock.nowMs();
  const a = await lease({ worker_id: 'w-1', pool: 'p-claim', max: 5 });
  expect(a.status).toBe(200);
  expect(a.json.server_time).toBe(iso(t));
  expect(a.json.runs).toHaveLength(1);
  const run = a.json.runs[0];
  expect(run.lease_token).toMatch(UUID);
  expect(run).toEqual({
    run_id: runId,
    job_id: 'claimable',
    handler: 'claimable-handler',
    payload: { n: 1 },
    scheduled_for: iso(t - 1000),
    attempt: 1,
    lease_token: run.lease_token,
    lease_expires_at: iso(t + LEASE_MS),
    tenant_id: 'acme',
    pool: 'p-claim',
    max_attempts: 3,
    available_at: iso(t - 1000),
    timeout_seconds: null,
  });
  const row = await runRow(db.pool, runId!);
  expect(row.state).toBe('running');
  expect(row.lease_owner).toBe('w-1');
  expect(row.lease_token).toBe(run.lease_token);
  expect((row.lease_expires_at as Date).getTime()).toBe(t + LEASE_MS);

  expect((await lease({ worker_id: 'w-2', pool: 'p-claim', max: 5 })).json).toEqual({
    runs: [],
    server_time: iso(t),
  });
});

test('max and handlers bound a claim: two of three runs, only the named handler', async () => {
  const ids = await jobWithRuns('multi', 'p-multi', 3);
  await jobWithRuns('other', 'p-multi', 1);
  const none = await lease({ worker_id: 'w-1', pool: 'p-multi', handlers: ['nobody'], max: 10 });
  expect(none.json).toEqual({ runs: [], server_time: expect.any(String) });
  const two = await lease({ worker_id: 'w-1', pool: 'p-multi', handlers: ['multi-handler'], max: 2 });
  expect(two.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual(ids.slice(0, 2));
  const rest = await lease({ worker_id: 'w-1', pool: 'p-multi', handlers: ['multi-handler'], max: 10 });
  expect(rest.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual(ids.slice(2));
});

test('wait_ms long-polls: a run triggered while the request waits is returned before the wait ends', async () => {
  const put = await http('PUT', '/v1/jobs/late', {
    key: keys.operator,
    body: { schedule: '@every 1h', handler: 'late', pool: 'p-poll' },
  });
  expect(put.status).toBe(200);
  const start = db.clock.nowMs();
  let answer: Answer | undefined;
  const pending = lease({ worker_id: 'w-poll', pool: 'p-poll', wait_ms: 2000 }).then((a) => {
    answer = a;
  });
  // The first claim found nothing: the handler now sleeps on the FakeClock.
  await until(() => db.clock.pendingSleeps === 1, 'the long-poll to sleep');
  expect(answer).toBeUndefined();

  // The trigger's notification wakes the long-poll: no time passes.
  const trigger = await http('POST', '/v1/jobs/late/runs', { key: keys.operator, body: {} });
  expect(trigger.status).toBe(201);
  await Promise.race([
    pending,
    new Promise((_, reject) => setTimeout(() => reject(new Error('the long-poll did not answer')), 5000)),
  ]);
  expect(answer?.status).toBe(200);
  expect(answer?.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([trigger.json.run_id]);
  expect(db.clock.nowMs() - start).toBe(0);
  expect(db.clock.pendingSleeps).toBe(0);
});

test('wait_ms long-polls: with nothing to claim it answers empty once the whole wait has passed', async () => {
  const start = db.clock.nowMs();
  let answer: Answer | undefined;
  const pending = lease({ worker_id: 'w-idle', pool: 'p-empty', wait_ms: 2000 }).then((a) => {
    answer = a;
  });
  // One sleep to the deadline (the fallback interval is longer than the wait), then a last claim.
  // (A notification from another test file's database work may wake it early: it sleeps again.)
  expect(LONG_POLL_FALLBACK_MS).toBeGreaterThan(2000);
  for (let steps = 0; steps < 20 && answer === undefined; steps++) {
    await until(() => answer !== undefined || db.clock.pendingSleeps === 1, 'a poll step');
    if (answer === undefined) db.clock.set(start + 2000);
  }
  await pending;
  expect(db.clock.nowMs() - start).toBe(2000);
  expect(answer?.status).toBe(200);
  expect(answer?.json).toEqual({ runs: [], server_time: expect.any(String) });
});

test('a client that goes away ends its long-poll without claiming what arrives after', async () => {
  const put = await http('PUT', '/v1/jobs/abandoned', {
    key: keys.operator,
    body: { schedule: '@every 1h', handler: 'h', pool: 'p-gone' },
  });
  expect(put.status).toBe(200);
  const t = db.clock.nowMs();
  const gone = new AbortController();
  const pending = fetch(`${api.base}/v1/leases`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keys.worker}`, 'content-type': 'application/json' },
    body: JSON.stringify({ worker_id: 'w-gone', pool: 'p-gone', wait_ms: 5000 }),
    signal: gone.signal,
  }).catch((err: unknown) => err);
  await until(() => db.clock.pendingSleeps === 1, 'the long-poll to sleep');
  // The client disconnects while the poll sleeps...
  gone.abort();
  expect(await pending).toBeInstanceOf(Error);
  // ...the server notices the closed connection and stops sleeping, with no time passing...
  await until(() => db.clock.pendingSleeps === 0, 'the long-poll to stop');
  expect(db.clock.nowMs()).toBe(t);
  // ...and a run that arrives then (its notification would wake a waiting poll) is not claimed.
  const run = await http('POST', '/v1/jobs/abandoned/runs', { key: keys.operator, body: {} });
  expect(run.status).toBe(201);
  // ...and does not claim the run for a client that is gone. (The short real wait only gives a
  // faulty server the time to finish such a claim; a correct one has nothing left to do.)
  await new Promise((r) => setTimeout(r, 50));
  expect((await runRow(db.pool, run.json.run_id)).state).toBe('pending');
  const claim = await lease({ worker_id: 'w-here', pool: 'p-gone' });
  expect(claim.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([run.json.run_id]);
});

test('a heartbeat renews one lease: 200 with the new expiry', async () => {
  const [runId] = await jobWithRuns('beating', 'p-beat', 1);
  const claimed = (await lease({ worker_id: 'w-1', pool: 'p-beat' })).json.runs[0];
  db.clock.advance(10_000);
  const a = await http('POST', `/v1/runs/${runId}/heartbeat`, {
    key: keys.worker,
    body: { lease_token: claimed.lease_token },
  });
  expect(a.status).toBe(200);
  expect(a.json).toEqual({
    lease_expires_at: iso(db.clock.nowMs() + LEASE_MS),
    server_time: iso(db.clock.nowMs()),
  });
  expect(((await runRow(db.pool, runId!)).lease_expires_at as Date).toISOString()).toBe(
    a.json.lease_expires_at,
  );
});

test('a batched heartbeat renews the live leases and names the lost ones', async () => {
  const ids = await jobWithRuns('batch', 'p-batch', 3);
  // Three claims of one run each: three leases, three tokens (the runs of one claim share its token).
  const claimed: { run_id: string; lease_token: string }[] = [];
  for (let i = 0; i < 3; i++) {
    claimed.push(...(await lease({ worker_id: 'w-b', pool: 'p-batch', max: 1 })).json.runs);
  }
  expect(claimed.map((r) => r.run_id)).toEqual(ids);
  expect(new Set(claimed.map((r) => r.lease_token)).size).toBe(3);
  // The third run is finished, so its lease is no longer live.
  const done = await http('POST', `/v1/runs/${ids[2]}/complete`, {
    key: keys.worker,
    body: { lease_token: claimed[2]!.lease_token, status: 'succeeded' },
  });
  expect(done.json).toEqual({ state: 'succeeded' });
  db.clock.advance(5_000);
  const unknown = '00000000-0000-4000-8000-000000000000';
  const a = await http('POST', '/v1/workers/w-b/heartbeat', {
    key: keys.worker,
    body: {
      leases: [
        { run_id: ids[0], lease_token: claimed[0]!.lease_token },
        // The right run with another run's token.
        { run_id: ids[1], lease_token: claimed[0]!.lease_token },
        { run_id: ids[2], lease_token: claimed[2]!.lease_token },
        { run_id: unknown, lease_token: claimed[1]!.lease_token },
        { run_id: 'not-a-uuid', lease_token: 'nor-this' },
      ],
    },
  });
  expect(a.status).toBe(200);
  expect(a.json.renewed).toEqual([{ run_id: ids[0], lease_expires_at: iso(db.clock.nowMs() + LEASE_MS) }]);
  expect([...a.json.lost].sort()).toEqual([ids[1], ids[2], unknown, 'not-a-uuid'].sort());

  // The correct pairs renew both.
  const b = await http('POST', '/v1/workers/w-b/heartbeat', {
    key: keys.worker,
    body: { leases: claimed.slice(0, 2).map((r) => ({ run_id: r.run_id, lease_token: r.lease_token })) },
  });
  expect([...b.json.renewed].sort((x, y) => x.run_id.localeCompare(y.run_id))).toEqual(
    ids
      .slice(0, 2)
      .sort()
      .map((id) => ({ run_id: id, lease_expires_at: iso(db.clock.nowMs() + LEASE_MS) })),
  );
  expect(b.json.lost).toEqual([]);
  expect(
    (await http('POST', '/v1/workers/w-b/heartbeat', { key: keys.worker, body: { leases: [] } })).json,
  ).toEqual({ renewed: [], lost: [], server_time: iso(db.clock.nowMs()) });
});

test('complete succeeded: 200 {state: succeeded}; the run and its attempt record it; a second completion is 409', async () => {
  const [runId] = await jobWithRuns('happy', 'p-ok', 1);
  const claimed = (await lease({ worker_id: 'w-ok', pool: 'p-ok' })).json.runs[0];
  db.clock.advance(2_000);
  const a = await http('POST', `/v1/runs/${runId}/complete`, {
    key: keys.worker,
    body: { lease_token: claimed.lease_token, status: 'succeeded' },
  });
  expect(a.status).toBe(200);
  expect(a.json).toEqual({ state: 'succeeded' });
  const run = await http('GET', `/v1/runs/${runId}`, { key: keys.reader });
  expect(run.json).toMatchObject({
    state: 'succeeded',
    attempt: 1,
    finished_at: iso(db.clock.nowMs()),
    lease_expires_at: null,
  });
  expect(run.json.attempts).toEqual([
    {
      attempt: 1,
      worker_id: 'w-ok',
      started_at: iso(db.clock.nowMs() - 2_000),
      claimed_at: iso(db.clock.nowMs() - 2_000),
      finished_at: iso(db.clock.nowMs()),
      outcome: 'succeeded',
      error: null,
      error_stack: null,
      output: null,
      ...NO_REPORT_JSON,
    },
  ]);

  const row = await runRow(db.pool, runId!);
  const again = await http('POST', `/v1/runs/${runId}/complete`, {
    key: keys.worker,
    body: { lease_token: claimed.lease_token, status: 'succeeded' },
  });
  expectError(again, 409, 'lease_lost');
  expect(await runRow(db.pool, runId!)).toEqual(row);
});

test('complete failed (retryable by default): back to pending as attempt 2, after a backoff', async () => {
  const [runId] = await jobWithRuns('flaky', 'p-retry', 1);
  const claimed = (await lease({ worker_id: 'w-r', pool: 'p-retry' })).json.runs[0];
  const t = db.clock.nowMs();
  const retriesBefore = (await api.metrics.retries.get()).values[0]?.value ?? 0;
  const a = await http('POST', `/v1/runs/${runId}/complete`, {
    key: keys.worker,
    body: { lease_token: claimed.lease_token, status: 'failed', error: 'timeout talking to smtp' },
  });
  expect(a.status).toBe(200);
  expect(a.json).toMatchObject({ state: 'pending', attempt: 2 });
  expect((await api.metrics.retries.get()).values[0]?.value).toBe(retriesBefore + 1);
  const run = await http('GET', `/v1/runs/${runId}`, { key: keys.reader });
  expect(run.json).toMatchObject({
    state: 'pending',
    attempt: 2,
    last_error: 'timeout talking to smtp',
    lease_expires_at: null,
    finished_at: null,
  });
  const availableAt = Date.parse(run.json.available_at);
  expect(availableAt).toBeGreaterThan(t);
  expect(run.json.attempts).toEqual([
    {
      attempt: 1,
      worker_id: 'w-r',
      started_at: iso(t),
      claimed_at: iso(t),
      finished_at: iso(t),
      outcome: 'failed',
      error: 'timeout talking to smtp',
      error_stack: null,
      output: null,
      ...NO_REPORT_JSON,
    },
  ]);
  // Not claimable before the backoff ends; claimable as attempt 2 after it.
  expect((await lease({ worker_id: 'w-r', pool: 'p-retry' })).json).toEqual({
    runs: [],
    server_time: expect.any(String),
  });
  db.clock.set(availableAt);
  const retry = await lease({ worker_id: 'w-r', pool: 'p-retry' });
  expect(retry.json.runs).toHaveLength(1);
  expect(retry.json.runs[0]).toMatchObject({ run_id: runId, attempt: 2 });
  expect(retry.json.runs[0].lease_token).not.toBe(claimed.lease_token);
});

test('a stale token (lease expired, reaped, re-claimed) gets 409 lease_lost and changes nothing', async () => {
  const [runId] = await jobWithRuns('stale', 'p-stale', 1);
  const old = (await lease({ worker_id: 'w-old', pool: 'p-stale' })).json.runs[0];
  db.clock.advance(LEASE_MS + 1_000);
  const reaped = await db.store.reapExpired({ now: db.clock.nowMs(), batchSize: 100 });
  // (Leases other tests left behind expire too.)
  expect(reaped.requeued.map((r) => r.runId)).toContain(runId);

  const staleCalls = async () => {
    const row = await runRow(db.pool, runId!);
    const attempts = await attemptRows(db.pool, runId!);
    expectError(
      await http('POST', `/v1/runs/${runId}/heartbeat`, {
        key: keys.worker,
        body: { lease_token: old.lease_token },
      }),
      409,
      'lease_lost',
    );
    expectError(
      await http('POST', `/v1/runs/${runId}/complete`, {
        key: keys.worker,
        body: { lease_token: old.lease_token, status: 'succeeded' },
      }),
      409,
      'lease_lost',
    );
    expectError(
      await http('POST', `/v1/runs/${runId}/complete`, {
        key: keys.worker,
        body: { lease_token: old.lease_token, status: 'failed', error: 'late failure', retryable: false },
      }),
      409,
      'lease_lost',
    );
    const batch = await http('POST', '/v1/workers/w-old/heartbeat', {
      key: keys.worker,
      body: { leases: [{ run_id: runId, lease_token: old.lease_token }] },
    });
    expect(batch.json).toEqual({ renewed: [], lost: [runId], server_time: expect.any(String) });
    expect(await runRow(db.pool, runId!)).toEqual(row);
    expect(await attemptRows(db.pool, runId!)).toEqual(attempts);
    return row;
  };

  // Reaped: pending again as attempt 2.
  const pendingRow = await staleCalls();
  expect(pendingRow.state).toBe('pending');
  expect(pendingRow.attempt).toBe(2);

  // Re-claimed by another worker: the old token still cannot touch it, the new lease stays live.
  db.clock.set(pendingRow.available_at as Date);
  const fresh = (await lease({ worker_id: 'w-new', pool: 'p-stale' })).json.runs[0];
  expect(fresh).toMatchObject({ run_id: runId, attempt: 2 });
  const runningRow = await staleCalls();
  expect(runningRow).toMatchObject({
    state: 'running',
    lease_owner: 'w-new',
    lease_token: fresh.lease_token,
  });
  const ok = await http('POST', `/v1/runs/${runId}/complete`, {
    key: keys.worker,
    body: { lease_token: fresh.lease_token, status: 'succeeded' },
  });
  expect(ok.json).toEqual({ state: 'succeeded' });
});

test('ahead_ms claims a run up to that long before it becomes claimable; the lease starts now; out of range is a 400', async () => {
  const put = await http('PUT', '/v1/jobs/ahead', {
    key: keys.operator,
    body: { schedule: '@every 1h', handler: 'ahead', pool: 'p-ahead' },
  });
  expect(put.status, put.text).toBe(200);
  const t = db.clock.nowMs();
  const made = await http('POST', '/v1/jobs/ahead/runs', {
    key: keys.operator,
    body: { scheduled_for: iso(t + 300) },
  });
  expect(made.status, made.text).toBe(201);

  expect((await lease({ worker_id: 'w-1', pool: 'p-ahead', max: 5 })).json.runs).toEqual([]);
  expect((await lease({ worker_id: 'w-1', pool: 'p-ahead', max: 5, ahead_ms: 299 })).json.runs).toEqual([]);
  const got = await lease({ worker_id: 'w-1', pool: 'p-ahead', max: 5, ahead_ms: 300 });
  expect(got.json.runs).toHaveLength(1);
  expect(got.json.runs[0]).toMatchObject({
    run_id: made.json.run_id,
    available_at: iso(t + 300),
    lease_expires_at: iso(t + LEASE_MS),
  });
  // Running: claimed now, it shows as starting at its instant, where its worker starts it.
  expect(await runRow(db.pool, made.json.run_id)).toMatchObject({
    claimed_at: new Date(t),
    started_at: new Date(t + 300),
  });

  for (const bad of [-1, 10_001, 1.5, '100']) {
    const r = await lease({ worker_id: 'w-1', pool: 'p-ahead', ahead_ms: bad });
    expectError(r, 400, 'validation_error');
  }
});

test('a worker reports its handler start and error stack: kept within [claim, now]; the message apart from the stack', async () => {
  const runIds = await jobWithRuns('timed', 'p-timed', 3);
  const got = (await lease({ worker_id: 'w-t', pool: 'p-timed', max: 3 })).json.runs;
  expect(got).toHaveLength(3);
  const claimedAt = db.clock.nowMs();
  db.clock.advance(1000);
  const byId = new Map(got.map((r: { run_id: string }) => [r.run_id, r]));
  const token = (id: string) => (byId.get(id) as { lease_token: string }).lease_token;
  const [a, b, c] = runIds as [string, string, string];
  const stack = 'TypeError: x is not a function\n    at handler (/app/h.js:1:2)';
  // Failed, started 400 ms after the claim, with its stack.
  const failed = await http('POST', `/v1/runs/${a}/complete`, {
    key: keys.worker,
    body: {
      lease_token: token(a),
      status: 'failed',
      retryable: false,
      error: 'TypeError: x is not a function',
      error_stack: stack,
      started_at: iso(claimedAt + 400),
    },
  });
  expect(failed.status, failed.text).toBe(200);
  const ra = (await http('GET', `/v1/runs/${a}`, { key: keys.reader })).json;
  expect(ra.last_error).toBe('TypeError: x is not a function');
  expect(ra.attempts).toMatchObject([
    {
      started_at: iso(claimedAt + 400),
      claimed_at: iso(claimedAt),
      error: 'TypeError: x is not a function',
      error_stack: stack,
    },
  ]);
  // A start claimed to be an hour ahead of the server: kept at now.
  const done = await http('POST', `/v1/runs/${b}/complete`, {
    key: keys.worker,
    body: { lease_token: token(b), status: 'succeeded', started_at: iso(claimedAt + 3_600_000) },
  });
  expect(done.status, done.text).toBe(200);
  expect((await http('GET', `/v1/runs/${b}`, { key: keys.reader })).json).toMatchObject({
    started_at: iso(db.clock.nowMs()),
    claimed_at: iso(claimedAt),
  });
  // Released with a start a day before the claim: kept at the claim.
  const released = await http('POST', `/v1/runs/${c}/release`, {
    key: keys.worker,
    body: { lease_token: token(c), started_at: iso(claimedAt - 86_400_000) },
  });
  expect(released.status, released.text).toBe(200);
  expect((await http('GET', `/v1/runs/${c}`, { key: keys.reader })).json.attempts).toMatchObject([
    { outcome: 'released', started_at: iso(claimedAt), claimed_at: iso(claimedAt) },
  ]);
  // Not an instant: 400, nothing written.
  const bad = await http('POST', `/v1/runs/${c}/complete`, {
    key: keys.worker,
    body: { lease_token: token(c), status: 'succeeded', started_at: 'yesterday' },
  });
  expectError(bad, 400, 'validation_error');
});

test('a failure from a worker that sends its stack as the error (before error_stack) is split: the message apart', async () => {
  const [runId] = await jobWithRuns('old-worker', 'p-old', 1);
  const claimed = (await lease({ worker_id: 'w-old', pool: 'p-old' })).json.runs[0];
  const stack = 'Error: upstream 500\n    at fetch (/app/h.js:3:9)';
  const failed = await http('POST', `/v1/runs/${runId}/complete`, {
    key: keys.worker,
    body: { lease_token: claimed.lease_token, status: 'failed', retryable: false, error: stack },
  });
  expect(failed.status, failed.text).toBe(200);
  const run = (await http('GET', `/v1/runs/${runId}`, { key: keys.reader })).json;
  expect(run.last_error).toBe('Error: upstream 500');
  expect(run.attempts).toMatchObject([{ error: 'Error: upstream 500', error_stack: stack }]);
});
