/**
 * `GET /v1/runs?state=pending` carries `waiting_for` (issue 22, operator features, item 4): for each
 * pending run of the page the same text `GET /v1/runs/{id}` gives, computed for the page at once;
 * the tenant's runs only; absent from the other lists.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, keysFor, type RoleKeys, startApi } from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;
let other: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  keys = await keysFor(db, 'acme');
  other = await keysFor(db, 'globex');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

async function trigger(key: string, jobId: string, ms: number): Promise<string> {
  const a = await http('POST', `/v1/jobs/${jobId}/runs`, {
    key,
    body: { scheduled_for: new Date(ms).toISOString() },
  });
  expect(a.status, a.text).toBe(201);
  return a.json.run_id;
}

describe('waiting_for in the list of pending runs', () => {
  test('each pending run of the page says what holds it, as its own page does', async () => {
    const now = db.clock.nowMs();
    const put = (key: string, id: string, body: Record<string, unknown>) =>
      http('PUT', `/v1/jobs/${id}`, { key, body: { schedule: '@every 1h', handler: 'h', ...body } });
    expect((await put(keys.operator, 'q', { overlap: 'queue' })).status).toBe(200);
    expect((await put(keys.operator, 'lonely', { pool: 'nobody', handler: 'none' })).status).toBe(200);
    const queued = [
      await trigger(keys.operator, 'q', now - 3000),
      await trigger(keys.operator, 'q', now - 2000),
    ];
    const lonely = await trigger(keys.operator, 'lonely', now - 1000);
    const later = await trigger(keys.operator, 'lonely', now + 3_600_000);
    const leases = await http('POST', '/v1/leases', { key: keys.worker, body: { worker_id: 'w1', max: 10 } });
    expect(leases.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([queued[0]]);
    // The other tenant has a pending run held the same way: never in acme's list.
    expect((await put(other.operator, 'lonely', { pool: 'nobody', handler: 'none' })).status).toBe(200);
    const theirs = await trigger(other.operator, 'lonely', now - 1000);

    const list = await http('GET', '/v1/runs?state=pending&limit=500', { key: keys.reader });
    expect(list.status, list.text).toBe(200);
    const byId = new Map<string, string | null>(
      list.json.runs.map((r: { run_id: string; waiting_for: string | null }) => [r.run_id, r.waiting_for]),
    );
    expect([...byId.keys()].sort()).toEqual([queued[1], lonely, later].sort());
    expect(byId.has(theirs)).toBe(false);
    expect(byId.get(queued[1]!)).toContain(`overlap: run ${queued[0]} still running`);
    expect(byId.get(lonely)).toContain('no live worker serves handler none in pool nobody');
    expect(byId.get(later)).toBeNull();
    for (const [id, waiting] of byId) {
      const one = await http('GET', `/v1/runs/${id}`, { key: keys.reader });
      expect(one.json.waiting_for, id).toBe(waiting);
    }

    // Pages of one run each carry it too.
    const first = await http('GET', '/v1/runs?state=pending&limit=1', { key: keys.reader });
    expect(first.json.runs[0]).toHaveProperty('waiting_for');

    // Other lists do not compute it.
    for (const path of ['/v1/runs?state=running', '/v1/runs', '/v1/jobs/q/runs'])
      for (const r of (await http('GET', path, { key: keys.reader })).json.runs)
        expect(r).not.toHaveProperty('waiting_for');
  });
});
