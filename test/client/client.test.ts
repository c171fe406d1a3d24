/**
 * `TockClient` against the real API listening on loopback (the test database's store and
 * FakeClock): every endpoint round-trips, error answers become `TockApiError` with status, code
 * and run id, and transport failures become `TockConnectionError` naming the URL.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TockApiError, TockClient, TockConnectionError } from '../../src/client/index.js';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';

let db: TestDatabase;
let api: Api;
let url: string;
let client: TockClient;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  url = api.base;
  const { secret } = await db.store.createApiKey({ tenantId: 'acme', role: 'admin', now: db.clock.nowMs() });
  client = new TockClient({ url, key: secret });
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

/** Expects `promise` to reject with a `TockApiError` of `status` and `code`, and returns it. */
async function apiError(promise: Promise<unknown>, status: number, code: string): Promise<TockApiError> {
  const err = await promise.then(
    () => {
      throw new Error(`expected a ${status} ${code}, but the request succeeded`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TockApiError);
  expect(err).toMatchObject({ status, code });
  return err as TockApiError;
}

/** A server that accepts requests and never answers them. */
async function silentServer(): Promise<{ url: string; server: Server }> {
  const server = createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('jobs', () => {
  test('put, get, list with a cursor, pause, resume and delete', async () => {
    const created = await client.putJob('c-1', { schedule: '@every 1m', handler: 'echo', payload: { a: 1 } });
    expect(created).toMatchObject({ job_id: 'c-1', change: 'created', payload: { a: 1 }, enabled: true });
    expect(
      (await client.putJob('c-1', { schedule: '@every 1m', handler: 'echo', payload: { a: 1 } })).change,
    ).toBe('unchanged');
    await client.putJob('c-2', { schedule: '@daily', handler: 'echo' });
    expect((await client.getJob('c-2')).schedule).toBe('@daily');

    const first = await client.listJobs({ limit: 1 });
    expect(first.jobs.map((j) => j.job_id)).toEqual(['c-1']);
    const second = await client.listJobs({ limit: 1, cursor: first.next_cursor });
    expect(second.jobs.map((j) => j.job_id)).toEqual(['c-2']);

    expect((await client.pauseJob('c-2')).enabled).toBe(false);
    expect((await client.resumeJob('c-2')).enabled).toBe(true);
    await expect(client.deleteJob('c-2')).resolves.toBeUndefined();
    const missing = await apiError(client.getJob('c-2'), 404, 'not_found');
    expect(missing.message).toBe('job "c-2" does not exist');
  });

  test('a job id is one path segment, encoded', async () => {
    // Not an id the API accepts, but it must arrive as the id (a 400), not as another path.
    await apiError(client.getJob('a/b'), 400, 'validation_error');
    await apiError(client.putJob('x', { schedule: '61 * * * *', handler: 'echo' }), 400, 'validation_error');
  });
});

describe('runs and leases', () => {
  test('trigger with an idempotency key replays; the same slot without one is a 409 with the run id', async () => {
    await client.putJob('r-1', { schedule: '@daily', handler: 'work' });
    const run = await client.triggerRun('r-1', { idempotencyKey: 'k-1' });
    expect(run).toMatchObject({ job_id: 'r-1', state: 'pending', scheduled_for: '2026-01-01T00:00:00.000Z' });
    expect((await client.triggerRun('r-1', { idempotencyKey: 'k-1' })).run_id).toBe(run.run_id);
    const conflict = await apiError(client.triggerRun('r-1'), 409, 'conflict');
    expect(conflict.runId).toBe(run.run_id);
    const later = await client.triggerRun('r-1', { scheduledFor: new Date('2026-01-05T00:00:00Z') });
    expect(later.scheduled_for).toBe('2026-01-05T00:00:00.000Z');
    const runs = await client.listJobRuns('r-1');
    expect(runs.runs.map((r) => r.run_id)).toEqual([later.run_id, run.run_id]);
    expect((await client.listRuns({ jobId: 'r-1', state: 'pending', limit: 1 })).runs).toHaveLength(1);
  });

  test("trigger with a payload: the run's own; backfill a range: created, then existing", async () => {
    await client.putJob('b-1', { schedule: '@every 1h', handler: 'work', payload: { from: 'job' } });
    const own = await client.triggerRun('b-1', { scheduledFor: '2025-12-30T00:30:00Z', payload: [1, 'two'] });
    expect(own.payload).toEqual([1, 'two']);
    const range = { from: new Date('2025-12-31T00:00:00Z'), to: '2026-01-01T00:00:00Z' };
    expect(await client.backfillJob('b-1', { ...range, idempotencyKey: 'bf-1' })).toEqual({
      created: 24,
      existing: 0,
      first_slot: '2025-12-31T00:00:00.000Z',
      last_slot: '2025-12-31T23:00:00.000Z',
    });
    expect((await client.backfillJob('b-1', { ...range, idempotencyKey: 'bf-1' })).created).toBe(24);
    expect(await client.backfillJob('b-1', range)).toMatchObject({ created: 0, existing: 24 });
    const reversed = await apiError(
      client.backfillJob('b-1', { from: range.to, to: range.from }),
      400,
      'validation_error',
    );
    expect(reversed.message).toBe('from 2026-01-01T00:00:00.000Z is after to 2025-12-31T00:00:00.000Z');
  });

  test('claim, heartbeat one and many, complete; a second completion is lease_lost', async () => {
    await client.putJob('w-1', { schedule: '@daily', handler: 'w-handler' });
    const run = await client.triggerRun('w-1');
    const { runs } = await client.claimLeases({ workerId: 'worker-a', handlers: ['w-handler'], max: 5 });
    expect(runs).toHaveLength(1);
    const leased = runs[0]!;
    expect(leased).toMatchObject({ run_id: run.run_id, handler: 'w-handler', attempt: 1 });

    expect((await client.heartbeat(leased.run_id, leased.lease_token)).lease_expires_at).toEqual(
      expect.any(String),
    );
    const many = await client.heartbeatMany('worker-a', [
      { runId: leased.run_id, leaseToken: leased.lease_token },
      { runId: leased.run_id, leaseToken: '00000000-0000-4000-8000-000000000000' },
    ]);
    expect(many.renewed.map((r) => r.run_id)).toEqual([leased.run_id]);

    expect(
      await client.complete(leased.run_id, { leaseToken: leased.lease_token, status: 'succeeded' }),
    ).toEqual({
      state: 'succeeded',
    });
    await apiError(
      client.complete(leased.run_id, { leaseToken: leased.lease_token, status: 'succeeded' }),
      409,
      'lease_lost',
    );
    await apiError(client.heartbeat(leased.run_id, leased.lease_token), 409, 'lease_lost');
    const shown = await client.getRun(leased.run_id);
    expect(shown.attempts).toMatchObject([{ attempt: 1, worker_id: 'worker-a', outcome: 'succeeded' }]);
  });

  test('a permanent failure dead-letters; replay requeues; replaying a live run is a 409', async () => {
    await client.putJob('d-1', { schedule: '@daily', handler: 'd-handler', max_attempts: 5 });
    await client.triggerRun('d-1');
    const [leased] = (await client.claimLeases({ workerId: 'worker-b', handlers: ['d-handler'] })).runs;
    const answer = await client.complete(leased!.run_id, {
      leaseToken: leased!.lease_token,
      status: 'failed',
      error: 'bad input',
      retryable: false,
    });
    expect(answer.state).toBe('dead');
    const dead = await client.listRuns({ state: 'dead', jobId: 'd-1' });
    expect(dead.runs).toMatchObject([{ run_id: leased!.run_id, last_error: 'bad input' }]);
    expect((await client.replayRun(leased!.run_id)).state).toBe('pending');
    await apiError(client.replayRun(leased!.run_id), 409, 'conflict');
  });

  test('a retryable failure with retry_after_ms goes back to pending', async () => {
    await client.putJob('f-1', { schedule: '@daily', handler: 'f-handler' });
    await client.triggerRun('f-1');
    const [leased] = (await client.claimLeases({ workerId: 'worker-c', handlers: ['f-handler'] })).runs;
    const answer = await client.complete(leased!.run_id, {
      leaseToken: leased!.lease_token,
      status: 'failed',
      error: 'try later',
      retryAfterMs: 60_000,
    });
    expect(answer.state).toBe('pending');
    expect((await client.getRun(leased!.run_id)).available_at).toBe(
      new Date(db.clock.nowMs() + 60_000).toISOString(),
    );
  });
});

describe('keys', () => {
  test('create, list and revoke; a revoked key is a 401', async () => {
    const created = await client.createKey({ role: 'reader', name: 'dash' });
    expect(created).toMatchObject({ role: 'reader', name: 'dash', tenant_id: 'acme', revoked_at: null });
    const reader = new TockClient({ url, key: created.key });
    await expect(reader.listJobs()).resolves.toMatchObject({ jobs: expect.any(Array) });
    await apiError(reader.putJob('nope', { schedule: '@daily', handler: 'x' }), 403, 'forbidden');
    expect(await reader.whoami()).toEqual({
      tenant_id: 'acme',
      role: 'reader',
      key_id: created.key_id,
      auth: 'keys',
      permissions: ['read'],
    });
    expect((await client.listKeys()).keys.map((k) => k.key_id)).toContain(created.key_id);
    expect((await client.revokeKey(created.key_id)).revoked_at).toEqual(expect.any(String));
    const refused = await apiError(reader.listJobs(), 401, 'unauthorized');
    expect(refused.message).toBe('the API key is unknown or revoked');
    await apiError(new TockClient({ url }).listJobs(), 401, 'unauthorized');
  });
});

describe('transport', () => {
  test('a base URL with a trailing slash or a path prefix is joined correctly', async () => {
    await expect(new TockClient({ url: `${url}/`, key: 'k' }).listJobs()).rejects.toMatchObject({
      status: 401,
    });
    const prefixed = await apiError(new TockClient({ url: `${url}/tock/` }).listJobs(), 404, 'not_found');
    expect(prefixed.message).toBe('no route GET /tock/v1/jobs');
  });

  test('a URL that is not http(s) is refused at construction', () => {
    expect(() => new TockClient({ url: 'localhost:8080' })).toThrow(/must start with http/);
    expect(() => new TockClient({ url: 'not a url' })).toThrow(/is not a URL/);
  });

  test('no server: a TockConnectionError naming the URL', async () => {
    const { url: silent, server } = await silentServer();
    await new Promise((resolve) => server.close(resolve));
    const err = await new TockClient({ url: silent }).getJob('x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TockConnectionError);
    expect((err as TockConnectionError).url).toBe(`${silent}/v1/jobs/x`);
    expect((err as Error).message).toMatch(new RegExp(`^cannot reach ${silent}/v1/jobs/x: .*ECONNREFUSED`));
  });

  test('no answer in time: a TockConnectionError; the caller can abort a long poll', async () => {
    const { url: silent, server } = await silentServer();
    try {
      const err = await new TockClient({ url: silent, timeoutMs: 100 }).listJobs().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TockConnectionError);
      expect((err as Error).message).toBe(`GET ${silent}/v1/jobs got no answer within 100 ms`);

      const stop = new AbortController();
      const pending = new TockClient({ url: silent }).claimLeases({
        workerId: 'w',
        waitMs: 5000,
        signal: stop.signal,
      });
      stop.abort();
      await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('an error answer without the envelope keeps its status', async () => {
    const fake = (async () => new Response('<html>bad gateway</html>', { status: 502 })) as typeof fetch;
    await apiError(new TockClient({ url, fetch: fake }).listJobs(), 502, 'http_error');
  });
});
