/**
 * The jobs and runs endpoints over real HTTP, happy paths first: upsert (and the unchanged
 * re-upsert that keeps `next_run_at`), one job, the cursor list, pause/resume, delete, triggers
 * with and without Idempotency-Key, run history pages, the dead-letter view, one run with its
 * attempts, and replay. Time moves only through the FakeClock.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { alignUp, attemptRows, countRows, runRow } from '../setup/factories.js';
import {
  type Api,
  client,
  expectError,
  keysFor,
  NO_REPORT_JSON,
  type RoleKeys,
  snapshot,
  startApi,
} from './helpers.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

/** PUTs a job as the operator and expects it created. */
async function createJob(jobId: string, body: Record<string, unknown>) {
  const a = await http('PUT', `/v1/jobs/${jobId}`, { key: keys.operator, body });
  expect(a.status, a.text).toBe(200);
  expect(a.json.change).toBe('created');
  return a.json;
}

describe('jobs', () => {
  test('PUT creates a job; the same PUT later is unchanged and keeps next_run_at; GET returns it', async () => {
    const t = db.clock.nowMs();
    const body = { schedule: '@every 1h', handler: 'report', payload: { to: 'ops' }, priority: 5 };
    const created = await http('PUT', '/v1/jobs/daily-report', { key: keys.operator, body });
    expect(created.status).toBe(200);
    const expected = {
      job_id: 'daily-report',
      schedule: '@every 1h',
      timezone: 'UTC',
      handler: 'report',
      payload: { to: 'ops' },
      payload_schema: null,
      priority: 5,
      max_attempts: 3,
      backoff_base_seconds: 2,
      backoff_cap_seconds: 3600,
      misfire: 'fire_once',
      catch_up_limit: 10,
      misfire_threshold_seconds: null,
      misfire_after_seconds: 60,
      pool: 'default',
      lease_seconds: null,
      jitter_seconds: 0,
      timeout_seconds: null,
      overlap: 'allow',
      max_concurrency: null,
      limits: [],
      retention: null,
      enabled: true,
      state: 'active',
      next_run_at: iso(alignUp(t, HOUR)),
      version: 1,
      created_at: iso(t),
      updated_at: iso(t),
    };
    expect(created.json).toEqual({ ...expected, change: 'created' });

    // 25 minutes later a recomputation would give the next hour; an unchanged PUT must not move it.
    db.clock.advance(25 * 60_000);
    expect(alignUp(db.clock.nowMs(), HOUR)).not.toBe(alignUp(t, HOUR));
    const again = await http('PUT', '/v1/jobs/daily-report', { key: keys.operator, body });
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ ...expected, change: 'unchanged' });

    const one = await http('GET', '/v1/jobs/daily-report', { key: keys.reader });
    expect(one.status).toBe(200);
    expect(one.json).toEqual(expected);

    // A changed field (not the schedule) is an update: version 2, next_run_at still kept.
    const changed = await http('PUT', '/v1/jobs/daily-report', {
      key: keys.operator,
      body: { ...body, priority: 6 },
    });
    expect(changed.status).toBe(200);
    expect(changed.json).toEqual({
      ...expected,
      priority: 6,
      version: 2,
      updated_at: iso(db.clock.nowMs()),
      change: 'updated',
    });
  });

  test('GET /v1/jobs pages with a cursor and lists every job exactly once, in job_id order', async () => {
    const own = await keysFor(db, 'lister');
    const ids = Array.from({ length: 12 }, (_, i) => `list-${String(i).padStart(2, '0')}`);
    // Created out of order: the list is ordered by job_id, not by creation.
    for (const id of [...ids].reverse()) {
      const a = await http('PUT', `/v1/jobs/${id}`, {
        key: own.operator,
        body: { schedule: '*/5 * * * *', handler: 'h' },
      });
      expect(a.status).toBe(200);
    }
    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const q: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
      const a = await http('GET', `/v1/jobs?limit=5${q}`, { key: own.reader });
      expect(a.status).toBe(200);
      expect(Object.keys(a.json).sort()).toEqual(['jobs', 'next_cursor']);
      sizes.push(a.json.jobs.length);
      seen.push(...a.json.jobs.map((j: { job_id: string }) => j.job_id));
      cursor = a.json.next_cursor;
      if (cursor === null) break;
      expect(typeof cursor).toBe('string');
    }
    expect(sizes).toEqual([5, 5, 2]);
    expect(seen).toEqual(ids);

    // Without a limit: the default page (50) holds all twelve and ends the list.
    const all = await http('GET', '/v1/jobs', { key: own.reader });
    expect(all.json.jobs.map((j: { job_id: string }) => j.job_id)).toEqual(ids);
    expect(all.json.next_cursor).toBeNull();
  });

  test('a job id of the full 200 characters works in every path', async () => {
    const id = `${'a'.repeat(150)}.b-c_d:${'e'.repeat(43)}`;
    expect(id).toHaveLength(200);
    await createJob(id, { schedule: '@every 1h', handler: 'h' });
    expect((await http('GET', `/v1/jobs/${id}`, { key: keys.reader })).json.job_id).toBe(id);
    const run = await http('POST', `/v1/jobs/${id}/runs`, { key: keys.operator, body: {} });
    expect(run.status).toBe(201);
    expect(run.json.job_id).toBe(id);
    const runs = await http('GET', `/v1/jobs/${id}/runs`, { key: keys.reader });
    expect(runs.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([run.json.run_id]);
    expect((await http('POST', `/v1/jobs/${id}/pause`, { key: keys.operator })).json.enabled).toBe(false);
    expect((await http('DELETE', `/v1/jobs/${id}`, { key: keys.operator })).status).toBe(204);
  });

  test('pause sets enabled false; resume sets it true and restarts from the next slot after now', async () => {
    await createJob('pausable', { schedule: '@every 10m', handler: 'h' });
    const paused = await http('POST', '/v1/jobs/pausable/pause', { key: keys.operator });
    expect(paused.status).toBe(200);
    expect(paused.json.job_id).toBe('pausable');
    expect(paused.json.enabled).toBe(false);
    // Paused: no next run is shown (the stored one would be in the past by now; resuming computes anew).
    expect([paused.json.state, paused.json.next_run_at]).toEqual(['paused', null]);
    db.clock.advance(60 * 60_000);
    const read = (await http('GET', '/v1/jobs/pausable', { key: keys.reader })).json;
    expect([read.enabled, read.state, read.next_run_at]).toEqual([false, 'paused', null]);
    const { rows } = await db.pool.query('SELECT enabled FROM jobs WHERE tenant_id = $1 AND job_id = $2', [
      'acme',
      'pausable',
    ]);
    expect(rows).toEqual([{ enabled: false }]);

    db.clock.advance(37 * 60_000 + 123);
    const resumed = await http('POST', '/v1/jobs/pausable/resume', { key: keys.operator });
    expect(resumed.status).toBe(200);
    expect(resumed.json.enabled).toBe(true);
    expect(resumed.json.state).toBe('active');
    expect(resumed.json.next_run_at).toBe(iso(alignUp(db.clock.nowMs(), 10 * 60_000)));
    expect(resumed.json.updated_at).toBe(iso(db.clock.nowMs()));

    // Resuming a running job changes nothing.
    const before = await snapshot(db.pool);
    const again = await http('POST', '/v1/jobs/pausable/resume', { key: keys.operator });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(resumed.json);
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('a one-shot that has fired is finished, not active; misfire_threshold_seconds is kept and shown', async () => {
    const at = db.clock.nowMs() + 5_000;
    const put = await http('PUT', '/v1/jobs/once', {
      key: keys.operator,
      body: { schedule: `@at ${iso(at)}`, handler: 'h', misfire_threshold_seconds: 300 },
    });
    expect(put.status).toBe(200);
    expect([put.json.state, put.json.next_run_at]).toEqual(['active', iso(at)]);
    expect([put.json.misfire_threshold_seconds, put.json.misfire_after_seconds]).toEqual([300, 300]);
    db.clock.set(at);
    await db.store.tick({ now: at, lookaheadMs: 0, batchSize: 1000 });
    const fired = await http('GET', '/v1/jobs/once', { key: keys.reader });
    expect([fired.json.enabled, fired.json.state, fired.json.next_run_at]).toEqual([true, 'finished', null]);
    const bad = await http('PUT', '/v1/jobs/once', {
      key: keys.operator,
      body: { schedule: '@every 1h', handler: 'h', misfire_threshold_seconds: -1 },
    });
    expect(bad.status).toBe(400);
  });

  test('DELETE answers 204 without a body, then the job is 404; its pending run is cancelled', async () => {
    await createJob('doomed', { schedule: '@every 1h', handler: 'h' });
    const run = await http('POST', '/v1/jobs/doomed/runs', { key: keys.operator, body: {} });
    expect(run.status).toBe(201);

    const del = await http('DELETE', '/v1/jobs/doomed', { key: keys.operator });
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expectError(await http('GET', '/v1/jobs/doomed', { key: keys.reader }), 404, 'not_found');
    expectError(await http('DELETE', '/v1/jobs/doomed', { key: keys.operator }), 404, 'not_found');
    expectError(await http('POST', '/v1/jobs/doomed/pause', { key: keys.operator }), 404, 'not_found');
    expectError(
      await http('POST', '/v1/jobs/doomed/runs', { key: keys.operator, body: {} }),
      404,
      'not_found',
    );

    // History stays: the run is still readable, now cancelled.
    const after = await http('GET', `/v1/runs/${run.json.run_id}`, { key: keys.reader });
    expect(after.status).toBe(200);
    expect(after.json.state).toBe('cancelled');
    expect(after.json.finished_at).toBe(iso(db.clock.nowMs()));
  });
});

describe('runs', () => {
  test('POST /runs answers 201 with the run; an Idempotency-Key replay answers the same', async () => {
    await createJob('triggered', { schedule: '@every 1h', handler: 'send', payload: { n: 1 } });
    const t = db.clock.nowMs();
    const headers = { 'idempotency-key': 'req-0001' };
    const first = await http('POST', '/v1/jobs/triggered/runs', { key: keys.operator, body: {}, headers });
    expect(first.status).toBe(201);
    expect(first.json.run_id).toMatch(UUID);
    expect(first.json).toEqual({
      run_id: first.json.run_id,
      job_id: 'triggered',
      scheduled_for: iso(t),
      state: 'pending',
      attempt: 1,
      max_attempts: 3,
      handler: 'send',
      payload: { n: 1 },
      pool: 'default',
      priority: 0,
      available_at: iso(t),
      lease_owner: null,
      lease_expires_at: null,
      last_error: null,
      created_at: iso(t),
      started_at: null,
      claimed_at: null,
      finished_at: null,
    });
    expect(await countRows(db.pool, 'run_states', "tenant_id = 'acme' AND job_id = 'triggered'")).toBe(1);

    // Later (a fresh trigger would take a new slot), the same key and body: the same answer.
    db.clock.advance(5_000);
    const before = await snapshot(db.pool);
    const replay = await http('POST', '/v1/jobs/triggered/runs', { key: keys.operator, body: {}, headers });
    expect(replay.status).toBe(201);
    expect(replay.json).toEqual(first.json);
    expect(await snapshot(db.pool)).toEqual(before);

    // The same key with another body: 422, and nothing is written.
    const mismatch = await http('POST', '/v1/jobs/triggered/runs', {
      key: keys.operator,
      body: { scheduled_for: iso(t + HOUR) },
      headers,
    });
    expectError(mismatch, 422, 'idempotency_mismatch');
    expect(await snapshot(db.pool)).toEqual(before);
    expect(await countRows(db.pool, 'run_states', "tenant_id = 'acme' AND job_id = 'triggered'")).toBe(1);

    // Another key is another request: a new run for the new now.
    const other = await http('POST', '/v1/jobs/triggered/runs', {
      key: keys.operator,
      body: {},
      headers: { 'idempotency-key': 'req-0002' },
    });
    expect(other.status).toBe(201);
    expect(other.json.run_id).not.toBe(first.json.run_id);
    expect(other.json.scheduled_for).toBe(iso(t + 5_000));
  });

  test('without a key, the same explicit slot twice: 409 naming the run that has it', async () => {
    await createJob('slotted', { schedule: '@every 1h', handler: 'h' });
    const slot = '2026-03-01T12:00:00.000Z';
    const first = await http('POST', '/v1/jobs/slotted/runs', {
      key: keys.operator,
      body: { scheduled_for: slot },
    });
    expect(first.status).toBe(201);
    expect(first.json.scheduled_for).toBe(slot);
    expect(first.json.available_at).toBe(slot);

    const before = await snapshot(db.pool);
    const second = await http('POST', '/v1/jobs/slotted/runs', {
      key: keys.operator,
      // The same instant in another notation is the same slot.
      body: { scheduled_for: '2026-03-01T13:00:00+01:00' },
    });
    expectError(second, 409, 'conflict');
    expect(second.json.error.run_id).toBe(first.json.run_id);
    expect(second.json.error.message).toContain(first.json.run_id);
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('GET /v1/jobs/{id}/runs pages newest first and visits every run exactly once', async () => {
    await createJob('history', { schedule: '@every 1h', handler: 'h' });
    const base = Date.UTC(2026, 5, 1);
    const created: { run_id: string; scheduled_for: string }[] = [];
    // Shuffled slot order: the list orders by slot, not by insertion.
    const order = Array.from({ length: 25 }, (_, i) => (i * 7) % 25);
    for (const i of order) {
      const a = await http('POST', '/v1/jobs/history/runs', {
        key: keys.operator,
        body: { scheduled_for: iso(base + i * 60_000) },
      });
      expect(a.status).toBe(201);
      created.push({ run_id: a.json.run_id, scheduled_for: a.json.scheduled_for });
    }
    const newestFirst = [...created]
      .sort((a, b) => b.scheduled_for.localeCompare(a.scheduled_for))
      .map((r) => r.run_id);

    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const q: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
      const a = await http('GET', `/v1/jobs/history/runs?limit=7${q}`, { key: keys.reader });
      expect(a.status).toBe(200);
      for (const r of a.json.runs) expect(r.job_id).toBe('history');
      sizes.push(a.json.runs.length);
      seen.push(...a.json.runs.map((r: { run_id: string }) => r.run_id));
      cursor = a.json.next_cursor;
      if (cursor === null) break;
    }
    expect(sizes).toEqual([7, 7, 7, 4]);
    expect(seen).toEqual(newestFirst);
    expect(new Set(seen).size).toBe(25);

    // The runs of an unknown job: 404, not an empty page.
    expectError(await http('GET', '/v1/jobs/no-such-job/runs', { key: keys.reader }), 404, 'not_found');
  });

  test('a dead run: in the dead-letter view, with its attempt; replay requeues it; replay of a live run is 409', async () => {
    await createJob('fragile', { schedule: '@every 1h', handler: 'fragile', pool: 'dlq' });
    const trigger = await http('POST', '/v1/jobs/fragile/runs', { key: keys.operator, body: {} });
    expect(trigger.status).toBe(201);
    const runId: string = trigger.json.run_id;
    const claimedAt = db.clock.nowMs();

    const lease = await http('POST', '/v1/leases', {
      key: keys.worker,
      body: { worker_id: 'w-dlq', pool: 'dlq' },
    });
    expect(lease.status).toBe(200);
    expect(lease.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([runId]);
    const token: string = lease.json.runs[0].lease_token;

    db.clock.advance(1_500);
    const failed = await http('POST', `/v1/runs/${runId}/complete`, {
      key: keys.worker,
      body: { lease_token: token, status: 'failed', error: 'schema missing', retryable: false },
    });
    expect(failed.status).toBe(200);
    expect(failed.json).toEqual({ state: 'dead', attempt: 1, available_at: null });
    const diedAt = db.clock.nowMs();

    const dead = await http('GET', '/v1/runs?state=dead', { key: keys.reader });
    expect(dead.status).toBe(200);
    expect(dead.json.next_cursor).toBeNull();
    expect(dead.json.runs).toHaveLength(1);
    expect(dead.json.runs[0]).toMatchObject({
      run_id: runId,
      job_id: 'fragile',
      state: 'dead',
      attempt: 1,
      last_error: 'schema missing',
      finished_at: iso(diedAt),
      lease_expires_at: null,
    });

    const one = await http('GET', `/v1/runs/${runId}`, { key: keys.reader });
    expect(one.status).toBe(200);
    expect(one.json.state).toBe('dead');
    expect(one.json.lease_owner).toBe('w-dlq');
    expect(one.json.started_at).toBe(iso(claimedAt));
    expect(one.json.attempts).toEqual([
      {
        attempt: 1,
        worker_id: 'w-dlq',
        started_at: iso(claimedAt),
        claimed_at: iso(claimedAt),
        finished_at: iso(diedAt),
        outcome: 'failed',
        error: 'schema missing',
        error_stack: null,
        output: null,
        ...NO_REPORT_JSON,
      },
    ]);

    db.clock.advance(60_000);
    const replayed = await http('POST', `/v1/runs/${runId}/replay`, { key: keys.operator });
    expect(replayed.status).toBe(200);
    // Attempts go on from the last (1): the replay's is attempt 2, of a fresh budget of 3.
    expect(replayed.json).toMatchObject({
      run_id: runId,
      state: 'pending',
      attempt: 2,
      max_attempts: 4,
      available_at: iso(db.clock.nowMs()),
      finished_at: null,
    });
    const emptied = await http('GET', '/v1/runs?state=dead', { key: keys.reader });
    expect(emptied.json).toEqual({ runs: [], next_cursor: null });
    const pending = await http('GET', '/v1/runs?state=pending&job_id=fragile', { key: keys.reader });
    expect(pending.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([runId]);

    // The run is pending now: a second replay is a conflict and changes nothing.
    const row = await runRow(db.pool, runId);
    const attempts = await attemptRows(db.pool, runId);
    const before = await snapshot(db.pool);
    expectError(await http('POST', `/v1/runs/${runId}/replay`, { key: keys.operator }), 409, 'conflict');
    expect(await runRow(db.pool, runId)).toEqual(row);
    expect(await attemptRows(db.pool, runId)).toEqual(attempts);
    expect(await snapshot(db.pool)).toEqual(before);

    // And it can be claimed again, as attempt 2, the first of a fresh round.
    const again = await http('POST', '/v1/leases', {
      key: keys.worker,
      body: { worker_id: 'w-2', pool: 'dlq' },
    });
    expect(again.json.runs).toHaveLength(1);
    expect(again.json.runs[0]).toMatchObject({ run_id: runId, attempt: 2, max_attempts: 4 });
  });
});

test('a bare POST (no body, no content type) triggers a run for now', async () => {
  await http('PUT', '/v1/jobs/bare', { key: keys.operator, body: { schedule: '@daily', handler: 'h' } });
  const res = await fetch(`${api.base}/v1/jobs/bare/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keys.operator}` },
  });
  expect(res.status).toBe(201);
  const run = (await res.json()) as { scheduled_for: string; state: string };
  expect(run.state).toBe('pending');
  expect(run.scheduled_for).toBe(new Date(db.clock.nowMs()).toISOString());
});

test('an Idempotency-Key whose trigger found no job is not remembered: after the job exists, the same key triggers', async () => {
  const first = await http('POST', '/v1/jobs/later/runs', {
    key: keys.operator,
    body: {},
    headers: { 'idempotency-key': 'k-later' },
  });
  expect(first.status).toBe(404);
  expect(await countRows(db.pool, 'idempotency_keys', "key = 'k-later'")).toBe(0);
  await http('PUT', '/v1/jobs/later', { key: keys.operator, body: { schedule: '@daily', handler: 'h' } });
  const second = await http('POST', '/v1/jobs/later/runs', {
    key: keys.operator,
    body: {},
    headers: { 'idempotency-key': 'k-later' },
  });
  expect(second.status).toBe(201);
});

describe('PUT /v1/jobs (bulk)', () => {
  test('creates, updates and leaves unchanged many jobs in one request', async () => {
    const jobs = Array.from({ length: 50 }, (_, i) => ({
      job_id: `many-${i}`,
      schedule: '@every 1m',
      handler: 'h',
      payload: { i },
    }));
    const first = await http('PUT', '/v1/jobs', { key: keys.operator, body: { jobs } });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({ created: 50, updated: 0, unchanged: 0 });
    expect(first.json.jobs[3]).toEqual({ job_id: 'many-3', change: 'created' });
    const got = await http('GET', '/v1/jobs/many-3', { key: keys.reader });
    expect(got.json).toMatchObject({ job_id: 'many-3', schedule: '@every 1m', payload: { i: 3 } });

    jobs[0] = { ...jobs[0]!, payload: { i: 100 } };
    const second = await http('PUT', '/v1/jobs', { key: keys.operator, body: { jobs } });
    expect(second.json).toMatchObject({ created: 0, updated: 1, unchanged: 49 });
  });

  test('a bad job refuses the whole request with its index, and nothing changes', async () => {
    const before = await snapshot(db.pool);
    const bad = await http('PUT', '/v1/jobs', {
      key: keys.operator,
      body: {
        jobs: [
          { job_id: 'ok-1', schedule: '@every 1m', handler: 'h' },
          { job_id: 'bad-1', schedule: '@every 1m', handler: 'h', timezone: 'Mars/Olympus' },
        ],
      },
    });
    expectError(bad, 400, 'validation_error');
    expect(bad.json.error.message).toMatch(/^jobs\[1\]: /);
    // The request schema: a missing job_id, an unknown field, an empty list and over 1000 jobs.
    for (const body of [
      { jobs: [{ schedule: '@every 1m', handler: 'h' }] },
      { jobs: [{ job_id: 'x', schedule: '@every 1m', handler: 'h', command: 'rm -rf /' }] },
      { jobs: [] },
      {
        jobs: Array.from({ length: 1001 }, (_, i) => ({
          job_id: `j-${i}`,
          schedule: '@hourly',
          handler: 'h',
        })),
      },
    ]) {
      expectError(await http('PUT', '/v1/jobs', { key: keys.operator, body }), 400, 'validation_error');
    }
    expectError(
      await http('PUT', '/v1/jobs', {
        key: keys.reader,
        body: { jobs: [{ job_id: 'r', schedule: '@hourly', handler: 'h' }] },
      }),
      403,
      'forbidden',
    );
    expect(await snapshot(db.pool)).toEqual(before);
  });
});
