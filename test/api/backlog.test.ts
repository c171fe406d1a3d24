/**
 * Backlog control over HTTP: the job fields `overlap`, `max_concurrency` and `limits` (bad input
 * refused, naming the field, nothing written), and `waiting_for` on a run that something holds.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

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
  // A limit of the other tenant: its name means nothing to acme.
  await db.pool.query(
    `INSERT INTO limits (tenant_id, key, max_concurrency, refilled_at, created_at, updated_at)
     VALUES ('globex', 'payments-api', 1, now(), now(), now())`,
  );
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

const BASE = { schedule: '@every 1h', handler: 'h' };

describe('the job fields of backlog control', () => {
  test.each([
    ['overlap', { overlap: 'sometimes' }, 'overlap'],
    ['max_concurrency 0', { max_concurrency: 0 }, 'max_concurrency'],
    ['max_concurrency 1.5', { max_concurrency: 1.5 }, 'max_concurrency'],
    ['max_concurrency "2"', { max_concurrency: '2' }, 'max_concurrency'],
    ['max_concurrency with overlap queue', { overlap: 'queue', max_concurrency: 3 }, 'max_concurrency'],
    ['limits not a list', { limits: 'payments-api' }, 'limits'],
    ['a limit key twice', { limits: ['a', 'a'] }, 'limits'],
    ['a job key', { limits: ['job:x'] }, 'limits[0]'],
    ['a tenant key', { limits: ['tenant:acme'] }, 'limits[0]'],
    ['a bad key', { limits: ['a b'] }, 'limits'],
    ["another tenant's limit", { limits: ['payments-api'] }, 'limits[0]'],
    ['17 limits', { limits: Array.from({ length: 17 }, (_, i) => `k${i}`) }, 'limits'],
  ])('%s is a 400 naming the field, with nothing written', async (_name, extra, field) => {
    const before = await snapshot(db.pool);
    const a = await http('PUT', '/v1/jobs/bad-backlog', { key: keys.operator, body: { ...BASE, ...extra } });
    expectError(a, 400, 'validation_error');
    expect(a.json.error.message).toContain(field);
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('a bulk PUT naming an unknown limit names the job and writes nothing', async () => {
    const before = await snapshot(db.pool);
    const a = await http('PUT', '/v1/jobs', {
      key: keys.operator,
      body: {
        jobs: [
          { job_id: 'ok', ...BASE },
          { job_id: 'bad', ...BASE, limits: ['nope'] },
        ],
      },
    });
    expectError(a, 400, 'validation_error');
    expect(a.json.error.message).toMatch(/^jobs\[1\]: limits\[0\]/);
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('a job answers its overlap, cap and limits; defaults are allow, null and []', async () => {
    const plain = await http('PUT', '/v1/jobs/plain', { key: keys.operator, body: BASE });
    expect(plain.json).toMatchObject({ overlap: 'allow', max_concurrency: null, limits: [] });
    await db.pool.query(
      `INSERT INTO limits (tenant_id, key, rate, burst, tokens, refilled_at, created_at, updated_at)
       VALUES ('acme', 'mail', 1, 1, 1, now(), now(), now())`,
    );
    const set = await http('PUT', '/v1/jobs/capped', {
      key: keys.operator,
      body: { ...BASE, overlap: 'skip', max_concurrency: 1, limits: ['mail'] },
    });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toMatchObject({ overlap: 'skip', max_concurrency: 1, limits: ['mail'] });
    const again = await http('PUT', '/v1/jobs/capped', {
      key: keys.operator,
      body: { ...BASE, overlap: 'skip', max_concurrency: 1, limits: ['mail'] },
    });
    expect(again.json.change).toBe('unchanged');
  });
});

describe('waiting_for', () => {
  test('says a job with overlap queue waits for its running run, and null once nothing holds it', async () => {
    const put = await http('PUT', '/v1/jobs/q', { key: keys.operator, body: { ...BASE, overlap: 'queue' } });
    expect(put.status, put.text).toBe(200);
    const now = db.clock.nowMs();
    const slots = [now - 2000, now - 1000].map((ms) => new Date(ms).toISOString());
    const runs = [];
    for (const scheduled_for of slots) {
      const a = await http('POST', '/v1/jobs/q/runs', { key: keys.operator, body: { scheduled_for } });
      expect(a.status, a.text).toBe(201);
      runs.push(a.json.run_id as string);
    }
    const leases = await http('POST', '/v1/leases', { key: keys.worker, body: { worker_id: 'w1', max: 10 } });
    expect(leases.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([runs[0]]);
    const second = await http('GET', `/v1/runs/${runs[1]}`, { key: keys.reader });
    expect(second.json.state).toBe('pending');
    expect(second.json.waiting_for).toContain(`overlap: run ${runs[0]} still running`);
    const first = await http('GET', `/v1/runs/${runs[0]}`, { key: keys.reader });
    expect(first.json.waiting_for).toBeNull();
    // Another tenant's key sees nothing of it.
    expectError(await http('GET', `/v1/runs/${runs[1]}`, { key: other.reader }), 404, 'not_found');
  });
});
