/**
 * `POST /v1/jobs/{job_id}/backfill` and a trigger's own payload over real HTTP: a backfill creates
 * the runs of a range's slots, a repeat creates none and counts them as existing, an overlapping
 * range creates the rest; a reversed or too large range is a 400 naming the field with nothing
 * written; another tenant's job and an unknown one answer 404; Idempotency-Key replays the first
 * answer; idle workers are woken. A trigger's payload is the run's (its answer, GET /v1/runs/{id}
 * and the claimed run), never the job's.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_BACKFILL_SLOTS } from '../../src/core/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { countRows } from '../setup/factories.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

const MIN = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let acme: RoleKeys;
let globex: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  // The FakeClock does not move, so the quota's bucket would never refill.
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  http = client(api.base);
  acme = await keysFor(db, 'acme');
  globex = await keysFor(db, 'globex');
  for (const [jobId, schedule] of [
    ['minutely', '@every 1m'],
    ['nightly', '30 2 * * *'],
    ['once', `@at ${iso(T0 + 90 * MIN)}`],
  ]) {
    const put = await http('PUT', `/v1/jobs/${jobId}`, {
      key: acme.operator,
      body: { schedule, handler: 'h', timezone: 'Europe/Berlin', pool: jobId, payload: { job: jobId } },
    });
    expect(put.status, put.text).toBe(200);
  }
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

const backfill = (
  jobId: string,
  from: number,
  to: number,
  o: { key?: string; headers?: Record<string, string> } = {},
) =>
  http('POST', `/v1/jobs/${jobId}/backfill`, {
    key: o.key ?? acme.operator,
    body: { from: iso(from), to: iso(to) },
    headers: o.headers,
  });

const runsOf = (jobId: string) => countRows(db.pool, 'runs', "tenant_id = 'acme' AND job_id = $1", [jobId]);

describe('POST /v1/jobs/{job_id}/backfill', () => {
  test('creates N runs; the same range again creates 0 and reports N existing; an overlap creates the rest', async () => {
    const first = await backfill('minutely', T0 - 100 * MIN, T0);
    expect(first.status, first.text).toBe(200);
    expect(first.json).toEqual({
      created: 100,
      existing: 0,
      first_slot: iso(T0 - 100 * MIN),
      last_slot: iso(T0 - MIN),
    });
    expect(await runsOf('minutely')).toBe(100);
    const list = await http('GET', '/v1/jobs/minutely/runs?limit=1', { key: acme.reader });
    expect(list.json.runs[0]).toMatchObject({
      scheduled_for: iso(T0 - MIN),
      available_at: iso(T0 - MIN),
      state: 'pending',
      payload: { job: 'minutely' },
    });

    const before = await snapshot(db.pool);
    const again = await backfill('minutely', T0 - 100 * MIN, T0);
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ ...first.json, created: 0, existing: 100 });
    expect(await snapshot(db.pool)).toEqual(before);

    const overlap = await backfill('minutely', T0 - 120 * MIN, T0 - 90 * MIN);
    expect(overlap.json).toEqual({
      created: 20,
      existing: 10,
      first_slot: iso(T0 - 120 * MIN),
      last_slot: iso(T0 - 91 * MIN),
    });
    expect(await runsOf('minutely')).toBe(120);
  });

  test('the slots are the schedule in its timezone; a one-shot has its instant only when in range', async () => {
    // Europe/Berlin springs forward on 2026-03-29: 02:30 local does not exist that day.
    const march = await backfill(
      'nightly',
      Date.parse('2026-03-28T00:00:00Z'),
      Date.parse('2026-03-31T00:00:00Z'),
    );
    expect(march.json).toEqual({
      created: 3,
      existing: 0,
      first_slot: '2026-03-28T01:30:00.000Z',
      last_slot: '2026-03-30T00:30:00.000Z',
    });
    const slots = await db.pool.query(
      "SELECT scheduled_for FROM runs WHERE tenant_id = 'acme' AND job_id = 'nightly' ORDER BY scheduled_for",
    );
    expect(slots.rows.map((r) => r.scheduled_for.toISOString())).toEqual([
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    const outside = await backfill('once', T0, T0 + 90 * MIN);
    expect(outside.json).toEqual({ created: 0, existing: 0, first_slot: null, last_slot: null });
    const inside = await backfill('once', T0, T0 + 91 * MIN);
    expect(inside.json).toEqual({
      created: 1,
      existing: 0,
      first_slot: iso(T0 + 90 * MIN),
      last_slot: iso(T0 + 90 * MIN),
    });
    const empty = await backfill('minutely', T0, T0);
    expect(empty.json).toEqual({ created: 0, existing: 0, first_slot: null, last_slot: null });
  });

  test('a reversed range and one over the bound are 400s naming the field, with nothing written', async () => {
    const before = await snapshot(db.pool);
    const reversed = await backfill('minutely', T0 + MIN, T0);
    expectError(reversed, 400, 'validation_error');
    expect(reversed.json.error.message).toBe(`from ${iso(T0 + MIN)} is after to ${iso(T0)}`);
    const tooLarge = await backfill('minutely', T0, T0 + (MAX_BACKFILL_SLOTS + 1) * MIN);
    expectError(tooLarge, 400, 'validation_error');
    expect(tooLarge.json.error.message).toBe(
      `from ${iso(T0)} to ${iso(T0 + (MAX_BACKFILL_SLOTS + 1) * MIN)} holds more than ${MAX_BACKFILL_SLOTS} slots of "@every 1m"; one backfill creates at most ${MAX_BACKFILL_SLOTS}: split the range (to ${iso(T0 + MAX_BACKFILL_SLOTS * MIN)} ends the first part)`,
    );
    // With an Idempotency-Key too: the key is not kept.
    const keyed = await backfill('minutely', T0 + MIN, T0, { headers: { 'idempotency-key': 'k-reversed' } });
    expectError(keyed, 400, 'validation_error');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test("another tenant's job and an unknown job answer 404, with nothing written", async () => {
    const before = await snapshot(db.pool);
    const other = await backfill('minutely', T0 - 10 * MIN, T0, { key: globex.operator });
    expectError(other, 404, 'not_found');
    expect(other.text).not.toContain('acme');
    expectError(await backfill('ghost', T0 - 10 * MIN, T0), 404, 'not_found');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test("a reader or a worker may not backfill ('operate')", async () => {
    const before = await snapshot(db.pool);
    expectError(await backfill('minutely', T0 - 10 * MIN, T0, { key: acme.reader }), 403, 'forbidden');
    expectError(await backfill('minutely', T0 - 10 * MIN, T0, { key: acme.worker }), 403, 'forbidden');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('an Idempotency-Key replays the first answer; the same key with another range is refused', async () => {
    const headers = { 'idempotency-key': 'backfill-1' };
    const first = await backfill('minutely', T0 + 10 * MIN, T0 + 20 * MIN, { headers });
    expect(first.json).toMatchObject({ created: 10, existing: 0 });
    const replay = await backfill('minutely', T0 + 10 * MIN, T0 + 20 * MIN, { headers });
    expect(replay.status).toBe(200);
    expect(replay.json).toEqual(first.json);
    expectError(
      await backfill('minutely', T0 + 10 * MIN, T0 + 21 * MIN, { headers }),
      422,
      'idempotency_mismatch',
    );
    // Without the key, the same range is simply counted again.
    expect((await backfill('minutely', T0 + 10 * MIN, T0 + 20 * MIN)).json).toMatchObject({
      created: 0,
      existing: 10,
    });
  });

  test('idle workers are woken when runs were created', async () => {
    let wakes = 0;
    let wake: () => void = () => {};
    const stop = await db.store.listen(() => {
      wakes += 1;
      wake();
    });
    try {
      const listening = wakes;
      const woken = new Promise<void>((resolve, reject) => {
        wake = resolve;
        setTimeout(() => reject(new Error('no notification within 5 s')), 5000);
      });
      expect((await backfill('minutely', T0 + 30 * MIN, T0 + 35 * MIN)).json.created).toBe(5);
      await woken;
      expect(wakes).toBeGreaterThan(listening);
    } finally {
      await stop();
    }
  });
});

describe('POST /v1/jobs/{job_id}/runs with a payload', () => {
  test("the run has the given payload (answer, GET /v1/runs/{id}, the claim); the job's is unchanged", async () => {
    const payload = { customer: 42, items: ['a', 'b'], nested: { ok: true } };
    const trigger = await http('POST', '/v1/jobs/once/runs', {
      key: acme.operator,
      body: { scheduled_for: iso(T0 - 5 * MIN), payload },
    });
    expect(trigger.status, trigger.text).toBe(201);
    expect(trigger.json.payload).toEqual(payload);
    const runId: string = trigger.json.run_id;
    expect((await http('GET', `/v1/runs/${runId}`, { key: acme.reader })).json.payload).toEqual(payload);
    expect((await http('GET', '/v1/jobs/once', { key: acme.reader })).json.payload).toEqual({ job: 'once' });
    const plain = await http('POST', '/v1/jobs/once/runs', {
      key: acme.operator,
      body: { scheduled_for: iso(T0 - 4 * MIN) },
    });
    expect(plain.json.payload).toEqual({ job: 'once' });
    const claimed = await http('POST', '/v1/leases', {
      key: acme.worker,
      body: { worker_id: 'w-payload', pool: 'once', max: 2 },
    });
    expect(claimed.status, claimed.text).toBe(200);
    expect(claimed.json.runs.map((r: { run_id: string; payload: unknown }) => [r.run_id, r.payload])).toEqual(
      [
        [runId, payload],
        [plain.json.run_id, { job: 'once' }],
      ],
    );
  });

  test('a bad payload is a 400 naming it, with nothing written; the key of a refused trigger is free', async () => {
    const before = await snapshot(db.pool);
    const headers = { 'idempotency-key': 'trigger-bad' };
    const big = await http('POST', '/v1/jobs/once/runs', {
      key: acme.operator,
      body: { payload: { blob: 'x'.repeat(64 * 1024) } },
      headers,
    });
    expectError(big, 400, 'validation_error');
    expect(big.json.error.message).toBe('payload is larger than 65536 bytes');
    const nul = await http('POST', '/v1/jobs/once/runs', {
      key: acme.operator,
      body: '{"payload":{"a":["ok","x\\u0000"]}}',
    });
    expectError(nul, 400, 'validation_error');
    expect(nul.json.error.message).toMatch(/^payload\.a\[1\] contains U\+0000/);
    expect(await snapshot(db.pool)).toEqual(before);
    // The same key with a good payload triggers.
    const good = await http('POST', '/v1/jobs/once/runs', {
      key: acme.operator,
      body: { scheduled_for: iso(T0 - 3 * MIN), payload: [1, 2] },
      headers,
    });
    expect(good.status, good.text).toBe(201);
    expect(good.json.payload).toEqual([1, 2]);
  });
});
