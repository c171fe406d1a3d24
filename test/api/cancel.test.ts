/**
 * `POST /v1/runs/{run_id}/cancel` over real HTTP: a queued run and a running one answer 200 with the
 * run as `GET /v1/runs/{run_id}` shows it, `cancelled`; the running one's worker then finds its
 * lease lost on heartbeat, completion and failure (409 `lease_lost`), and the run stays cancelled.
 * A finished run is a 409 naming its state, another tenant's run and a malformed id a 404, a reader's
 * or a worker's key a 403, each with nothing written. Time moves only through the FakeClock.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import {
  type Api,
  client,
  expectError,
  jobWithRuns,
  keysFor,
  type RoleKeys,
  snapshot,
  startApi,
} from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;
let others: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  keys = await keysFor(db, 'acme');
  others = await keysFor(db, 'globex');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

const iso = (ms: number) => new Date(ms).toISOString();

/** Leases every ready run of `pool` to worker `w-1`: their tokens by run id. */
async function lease(pool: string): Promise<Map<string, string>> {
  const a = await http('POST', '/v1/leases', { key: keys.worker, body: { worker_id: 'w-1', pool, max: 10 } });
  expect(a.status, a.text).toBe(200);
  return new Map(a.json.runs.map((r: { run_id: string; lease_token: string }) => [r.run_id, r.lease_token]));
}

describe('POST /v1/runs/{run_id}/cancel', () => {
  test('a queued run: 200 with the run as GET shows it, cancelled; it is never leased', async () => {
    const [runId] = await jobWithRuns(api.base, keys.operator, db.clock.nowMs(), {
      jobId: 'queued',
      pool: 'queued-pool',
      n: 1,
    });
    db.clock.advance(2_000);
    const a = await http('POST', `/v1/runs/${runId}/cancel`, { key: keys.operator });
    expect(a.status, a.text).toBe(200);
    expect(a.json).toMatchObject({
      run_id: runId,
      job_id: 'queued',
      state: 'cancelled',
      finished_at: iso(db.clock.nowMs()),
      lease_expires_at: null,
      attempts: [],
    });
    const shown = await http('GET', `/v1/runs/${runId}`, { key: keys.reader });
    expect(a.json).toEqual(shown.json);
    expect((await lease('queued-pool')).size).toBe(0);
    const listed = await http('GET', '/v1/runs?state=cancelled', { key: keys.reader });
    expect(listed.json.runs.map((r: { run_id: string }) => r.run_id)).toContain(runId);
  });

  test("a running run: 200; its worker's heartbeat, completion and failure are refused as lost, and it stays cancelled", async () => {
    const [runId, other] = (await jobWithRuns(api.base, keys.operator, db.clock.nowMs(), {
      jobId: 'running',
      pool: 'running-pool',
      n: 2,
    })) as [string, string];
    const tokens = await lease('running-pool');
    const claimedAt = db.clock.nowMs();
    db.clock.advance(4_000);
    const cancelledAt = db.clock.nowMs();
    const a = await http('POST', `/v1/runs/${runId}/cancel`, { key: keys.admin });
    expect(a.status, a.text).toBe(200);
    expect(a.json).toMatchObject({
      run_id: runId,
      state: 'cancelled',
      lease_owner: 'w-1',
      lease_expires_at: null,
      finished_at: iso(cancelledAt),
      attempts: [
        {
          attempt: 1,
          worker_id: 'w-1',
          claimed_at: iso(claimedAt),
          started_at: iso(claimedAt),
          finished_at: iso(cancelledAt),
          outcome: 'cancelled',
          error: null,
        },
      ],
    });
    expect((await http('GET', `/v1/runs/${runId}`, { key: keys.reader })).json).toEqual(a.json);

    const token = tokens.get(runId);
    const before = await snapshot(db.pool);
    const beat = await http('POST', `/v1/runs/${runId}/heartbeat`, {
      key: keys.worker,
      body: { lease_token: token },
    });
    expectError(beat, 409, 'lease_lost');
    const bulk = await http('POST', '/v1/workers/w-1/heartbeat', {
      key: keys.worker,
      body: { leases: [...tokens].map(([run_id, lease_token]) => ({ run_id, lease_token })) },
    });
    expect(bulk.json.lost).toEqual([runId]);
    expect(bulk.json.renewed.map((r: { run_id: string }) => r.run_id)).toEqual([other]);
    const after = await snapshot(db.pool);
    expect({ ...after, run_claims: '' }).toEqual({ ...before, run_claims: '' });
    for (const body of [
      { lease_token: token, status: 'succeeded' },
      { lease_token: token, status: 'failed', error: 'late' },
    ]) {
      expectError(
        await http('POST', `/v1/runs/${runId}/complete`, { key: keys.worker, body }),
        409,
        'lease_lost',
      );
    }
    expect(await snapshot(db.pool)).toEqual(after);
    expect((await http('GET', `/v1/runs/${runId}`, { key: keys.reader })).json.state).toBe('cancelled');
    // The claim's other run still runs, and completes.
    const done = await http('POST', `/v1/runs/${other}/complete`, {
      key: keys.worker,
      body: { lease_token: tokens.get(other), status: 'succeeded' },
    });
    expect(done.status, done.text).toBe(200);
  });

  test('a finished run is a 409 naming its state; nothing is written', async () => {
    const [ok, dead, cancelled] = (await jobWithRuns(api.base, keys.operator, db.clock.nowMs(), {
      jobId: 'finished',
      pool: 'finished-pool',
      n: 3,
    })) as [string, string, string];
    expect((await http('POST', `/v1/runs/${cancelled}/cancel`, { key: keys.operator })).status).toBe(200);
    const tokens = await lease('finished-pool');
    for (const [runId, body] of [
      [ok, { status: 'succeeded' }],
      [dead, { status: 'failed', error: 'bad', retryable: false }],
    ] as const) {
      const a = await http('POST', `/v1/runs/${runId}/complete`, {
        key: keys.worker,
        body: { lease_token: tokens.get(runId), ...body },
      });
      expect(a.status, a.text).toBe(200);
    }
    const before = await snapshot(db.pool);
    for (const [runId, state] of [
      [ok, 'succeeded'],
      [dead, 'dead'],
      [cancelled, 'cancelled'],
    ]) {
      const a = await http('POST', `/v1/runs/${runId}/cancel`, { key: keys.operator });
      expectError(a, 409, 'conflict');
      expect(a.json.error.message).toContain(`is ${state}`);
    }
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test("another tenant's run, an unknown or malformed id: 404 as GET answers; a reader or worker: 403", async () => {
    const [runId] = await jobWithRuns(api.base, keys.operator, db.clock.nowMs(), {
      jobId: 'theirs',
      pool: 'theirs-pool',
      n: 1,
    });
    const before = await snapshot(db.pool);
    for (const id of [runId, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const get = await http('GET', `/v1/runs/${id}`, { key: others.reader });
      expectError(get, 404, 'not_found');
      expectError(await http('POST', `/v1/runs/${id}/cancel`, { key: others.operator }), 404, 'not_found');
    }
    for (const key of [keys.reader, keys.worker]) {
      expectError(await http('POST', `/v1/runs/${runId}/cancel`, { key }), 403, 'forbidden');
    }
    expect(await snapshot(db.pool)).toEqual(before);
    expect((await http('GET', `/v1/runs/${runId}`, { key: keys.reader })).json.state).toBe('pending');
  });
});
