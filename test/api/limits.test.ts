/**
 * Issue 18, items 3 and 5, over real loopback HTTP on a real store: `PUT/GET/DELETE
 * /v1/limits/{key}` and `GET /v1/limits` (201 then 200, snake_case answers, paging), who may do
 * what (an operator may not write its tenant's own limit, an admin may), tenants see only their
 * own limits, every bad input is a 400 naming the field with nothing written, a limit a job lists
 * cannot be deleted, and the limit gauges on `/metrics`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { METRICS_SAMPLE_MS } from '../../src/api/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import {
  type Api,
  call,
  client,
  expectError,
  keysFor,
  type RoleKeys,
  snapshot,
  startApi,
} from './helpers.js';

let db: TestDatabase;
let api: Api;
let acme: RoleKeys;
let beta: RoleKeys;
let http: ReturnType<typeof client>;

beforeAll(async () => {
  db = await setupDatabase();
  acme = await keysFor(db, 'acme');
  beta = await keysFor(db, 'beta');
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  http = client(api.base);
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

const iso = (ms: number) => new Date(ms).toISOString();

describe('limits CRUD', () => {
  test('PUT creates (201) then replaces (200); GET answers tokens refilled to now; DELETE is 204', async () => {
    const t = db.clock.nowMs();
    const created = await http('PUT', '/v1/limits/payments-api', {
      key: acme.operator,
      body: { rate: 2, burst: 10, max_concurrency: 3 },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toEqual({
      key: 'payments-api',
      rate: 2,
      burst: 10,
      max_concurrency: 3,
      tokens: 10,
      in_use: 0,
      created_at: iso(t),
      updated_at: iso(t),
    });

    // A claim spent 9 tokens; 1.5 s later at 2/s there are 1 + 3.
    await db.pool.query(`UPDATE limits SET tokens = 1 WHERE tenant_id = 'acme' AND key = 'payments-api'`);
    db.clock.advance(1500);
    const read = await http('GET', '/v1/limits/payments-api', { key: acme.reader });
    expect(read.status, read.text).toBe(200);
    expect(read.json.tokens).toBeCloseTo(4, 9);

    // PUT replaces: what is not given is unset.
    const replaced = await http('PUT', '/v1/limits/payments-api', {
      key: acme.operator,
      body: { rate: 1, burst: 2 },
    });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.json).toMatchObject({ rate: 1, burst: 2, max_concurrency: null, tokens: 2 });
    expect(replaced.json.created_at).toBe(iso(t));
    expect(replaced.json.updated_at).toBe(iso(t + 1500));

    const capOnly = await http('PUT', '/v1/limits/db', { key: acme.operator, body: { max_concurrency: 1 } });
    expect(capOnly.status, capOnly.text).toBe(201);
    expect(capOnly.json).toMatchObject({ rate: null, burst: null, tokens: null, max_concurrency: 1 });

    expect((await http('DELETE', '/v1/limits/db', { key: acme.operator })).status).toBe(204);
    expectError(await http('GET', '/v1/limits/db', { key: acme.reader }), 404, 'not_found');
    expectError(await http('DELETE', '/v1/limits/db', { key: acme.operator }), 404, 'not_found');
  });

  test('GET /v1/limits pages by key', async () => {
    for (const k of ['p-c', 'p-a', 'p-b']) {
      const a = await http('PUT', `/v1/limits/${k}`, { key: beta.operator, body: { max_concurrency: 2 } });
      expect(a.status, a.text).toBe(201);
    }
    const first = await http('GET', '/v1/limits?limit=2', { key: beta.reader });
    expect(first.status, first.text).toBe(200);
    expect(first.json.limits.map((l: { key: string }) => l.key)).toEqual(['p-a', 'p-b']);
    expect(first.json.next_cursor).toEqual(expect.any(String));
    const second = await http('GET', `/v1/limits?limit=2&cursor=${first.json.next_cursor}`, {
      key: beta.reader,
    });
    expect(second.json).toMatchObject({ limits: [{ key: 'p-c' }], next_cursor: null });
    expectError(await http('GET', '/v1/limits?limit=0', { key: beta.reader }), 400, 'validation_error');
  });

  test("a tenant sees only its own limits; another tenant's key is not found", async () => {
    await http('PUT', '/v1/limits/only-acme', { key: acme.operator, body: { max_concurrency: 1 } });
    expectError(await http('GET', '/v1/limits/only-acme', { key: beta.reader }), 404, 'not_found');
    expectError(await http('DELETE', '/v1/limits/only-acme', { key: beta.admin }), 404, 'not_found');
    const list = await http('GET', '/v1/limits?limit=500', { key: beta.reader });
    expect(list.json.limits.map((l: { key: string }) => l.key)).not.toContain('only-acme');
    // The same name in beta is beta's own limit.
    const own = await http('PUT', '/v1/limits/only-acme', {
      key: beta.operator,
      body: { max_concurrency: 7 },
    });
    expect(own.status, own.text).toBe(201);
    const a = await http('GET', '/v1/limits/only-acme', { key: acme.reader });
    expect(a.json.max_concurrency).toBe(1);
  });

  test('a limit a job lists cannot be deleted (409 naming the job)', async () => {
    await http('PUT', '/v1/limits/search-api', { key: acme.operator, body: { rate: 5, burst: 5 } });
    const put = await http('PUT', '/v1/jobs/indexer', {
      key: acme.operator,
      body: { schedule: '@every 1h', handler: 'index', limits: ['search-api'] },
    });
    expect(put.status, put.text).toBe(200);
    const refused = await http('DELETE', '/v1/limits/search-api', { key: acme.operator });
    expectError(refused, 409, 'conflict');
    expect(refused.json.error.message).toContain('indexer');
    expect((await http('GET', '/v1/limits/search-api', { key: acme.reader })).status).toBe(200);
  });
});

describe('permissions', () => {
  test('reading needs read, writing needs operate', async () => {
    expectError(await http('GET', '/v1/limits', { key: acme.worker }), 403, 'forbidden');
    expectError(await http('GET', '/v1/limits/x', { key: acme.worker }), 403, 'forbidden');
    const before = await snapshot(db.pool);
    expectError(
      await http('PUT', '/v1/limits/x', { key: acme.reader, body: { max_concurrency: 1 } }),
      403,
      'forbidden',
    );
    expectError(
      await http('PUT', '/v1/limits/x', { key: acme.worker, body: { max_concurrency: 1 } }),
      403,
      'forbidden',
    );
    expect(await snapshot(db.pool)).toEqual(before);
    expectError(await http('GET', '/v1/limits'), 401, 'unauthorized');
  });

  test("the tenant's own limit: an operator may read it but not write it; an admin may", async () => {
    const own = '/v1/limits/tenant:acme';
    const before = await snapshot(db.pool);
    const refused = await http('PUT', own, { key: acme.operator, body: { max_concurrency: 100 } });
    expectError(refused, 403, 'forbidden');
    expect(refused.json.error.message).toContain('admin');
    expect(await snapshot(db.pool)).toEqual(before);

    const made = await http('PUT', own, { key: acme.admin, body: { max_concurrency: 100 } });
    expect(made.status, made.text).toBe(201);
    expect(made.json.key).toBe('tenant:acme');
    expect((await http('GET', own, { key: acme.operator })).json.max_concurrency).toBe(100);
    expect((await http('GET', '/v1/limits?limit=500', { key: acme.reader })).json.limits).toContainEqual(
      expect.objectContaining({ key: 'tenant:acme' }),
    );

    expectError(await http('DELETE', own, { key: acme.operator }), 403, 'forbidden');
    expect((await http('GET', own, { key: acme.reader })).status).toBe(200);
    // Another tenant's own key is no key of this tenant.
    expectError(
      await http('PUT', '/v1/limits/tenant:acme', { key: beta.admin, body: { max_concurrency: 1 } }),
      400,
      'validation_error',
    );
    expect((await http('DELETE', own, { key: acme.admin })).status).toBe(204);
  });
});

describe('bad input', () => {
  test.each([
    ['a negative rate', 'k', { rate: -1, burst: 5 }, 'rate'],
    ['a zero rate', 'k', { rate: 0, burst: 5 }, 'rate'],
    ['a burst below 1', 'k', { rate: 1, burst: 0 }, 'burst'],
    ['a fractional burst', 'k', { rate: 1, burst: 2.5 }, 'burst'],
    ['a cap of 0', 'k', { max_concurrency: 0 }, 'max_concurrency'],
    ['a burst without a rate', 'k', { burst: 5 }, 'rate'],
    ['a rate without a burst', 'k', { rate: 5 }, 'burst'],
    ['an empty definition', 'k', {}, 'rate'],
    ['an unknown field', 'k', { max_concurrency: 1, maxConcurrency: 2 }, 'maxConcurrency'],
    ['a rate as a string', 'k', { rate: '5', burst: 5 }, 'rate'],
    ['a rate too high', 'k', { rate: 2_000_000, burst: 5 }, 'rate'],
    ["a job's own key", 'job:indexer', { max_concurrency: 1 }, 'key'],
    ["another tenant's key", 'tenant:beta', { max_concurrency: 1 }, 'key'],
    ['a key with a space', 'a%20b', { max_concurrency: 1 }, 'key'],
    ['a key of 201 characters', 'k'.repeat(201), { max_concurrency: 1 }, 'key'],
  ])('%s is a 400 naming the field, and nothing is written', async (_, key, body, field) => {
    const before = await snapshot(db.pool);
    const limitsBefore = await db.pool.query('SELECT * FROM limits ORDER BY tenant_id, key');
    const a = await http('PUT', `/v1/limits/${key}`, { key: acme.admin, body });
    expectError(a, 400, 'validation_error');
    expect(a.json.error.message).toContain(field);
    expect(await snapshot(db.pool)).toEqual(before);
    expect((await db.pool.query('SELECT * FROM limits ORDER BY tenant_id, key')).rows).toEqual(
      limitsBefore.rows,
    );
  });

  test('a body that is not an object, and bad keys on GET and DELETE, are 400', async () => {
    expectError(await http('PUT', '/v1/limits/k', { key: acme.admin, body: '[1]' }), 400, 'validation_error');
    expectError(await http('GET', '/v1/limits/job:indexer', { key: acme.reader }), 400, 'validation_error');
    expectError(await http('DELETE', '/v1/limits/job:indexer', { key: acme.admin }), 400, 'validation_error');
  });
});

describe('the runs a limit holds back: held on GET /v1/limits, and the gauges on /metrics', () => {
  async function scrape(): Promise<string> {
    db.clock.advance(METRICS_SAMPLE_MS); // a new sample
    const a = await call(api.base, 'GET', '/metrics', { key: acme['cluster-admin'] });
    expect(a.status, a.text).toBe(200);
    return a.text;
  }

  /**
   * In `tenant`: `full` (every one of its 2 slots in use) and `paced` (4 tokens left), and two
   * queued runs due now behind `full`, one of them also behind `paced`; with `later`, a third
   * behind `full` not due for a minute (not held: it could not start anyway).
   */
  async function heldRuns(tenant: string, o: { later?: boolean } = {}): Promise<RoleKeys> {
    const keys = await keysFor(db, tenant);
    await http('PUT', '/v1/limits/full', { key: keys.operator, body: { max_concurrency: 2 } });
    await http('PUT', '/v1/limits/paced', { key: keys.operator, body: { rate: 1, burst: 4 } });
    await db.pool.query(`UPDATE limits SET in_use = 2 WHERE tenant_id = $1 AND key = 'full'`, [tenant]);
    const now = db.clock.nowMs();
    const runs: [number, string[]][] = [
      [now, [`${tenant}/full`]],
      [now, [`${tenant}/full`, `${tenant}/paced`]],
    ];
    if (o.later) runs.push([now + 60_000, [`${tenant}/full`]]);
    for (const [i, [due, gates]] of runs.entries()) {
      const { rows } = await db.pool.query(
        `INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
           backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, gates)
         VALUES ($1, 'j', $2, 3, 'noop', '{}', 'default', 0, 2, 3600, $3, $3, $4, $5) RETURNING run_id`,
        [tenant, new Date(T0 + i), new Date(due), new Date(now), gates],
      );
      await db.pool.query(
        `INSERT INTO run_queue (run_id, tenant_id, pool, handler, priority, available_at, sort_key, job_id, gates)
         VALUES ($1, $2, 'default', 'noop', 0, $3, $3, 'j', $4)`,
        [rows[0].run_id, tenant, new Date(due), gates],
      );
    }
    return keys;
  }

  test('GET /v1/limits and GET /v1/limits/{key} answer the runs due now an exhausted limit holds back, its tenant only', async () => {
    const keys = await heldRuns('held', { later: true });
    const list = await http('GET', '/v1/limits', { key: keys.reader });
    expect(list.status, list.text).toBe(200);
    expect(list.json.limits.map((l: { key: string; held: number }) => [l.key, l.held])).toEqual([
      ['full', 2],
      ['paced', 0],
    ]);
    const one = await http('GET', '/v1/limits/full', { key: keys.reader });
    expect(one.status, one.text).toBe(200);
    expect(one.json).toMatchObject({ key: 'full', in_use: 2, max_concurrency: 2, held: 2 });
    // Another tenant's runs behind a limit of the same name are not this tenant's.
    const other = await heldRuns('held-other');
    expect((await http('GET', '/v1/limits/full', { key: keys.reader })).json.held).toBe(2);
    expect((await http('GET', '/v1/limits/full', { key: other.reader })).json.held).toBe(2);
    // A minute on, the third run is due and held too; /metrics counts the same.
    db.clock.advance(60_000);
    expect((await http('GET', '/v1/limits/full', { key: keys.reader })).json.held).toBe(3);
    expect(await scrape()).toContain('tock_limit_held_runs{tenant="held",key="full"} 3');
    // A freed slot: the limit is not exhausted, and holds nothing back.
    await db.pool.query(`UPDATE limits SET in_use = 1 WHERE tenant_id = 'held' AND key = 'full'`);
    expect((await http('GET', '/v1/limits/full', { key: keys.reader })).json.held).toBe(0);
  });

  test('tokens, slots in use, caps and the runs an exhausted limit holds back; a deleted limit loses its series', async () => {
    const tenant = 'gauges';
    const keys = await heldRuns(tenant);

    const text = await scrape();
    const line = (name: string, key: string) => `${name}{tenant="${tenant}",key="${key}"}`;
    expect(text).toContain(`${line('tock_limit_slots_in_use', 'full')} 2`);
    expect(text).toContain(`${line('tock_limit_max_concurrency', 'full')} 2`);
    expect(text).toContain(`${line('tock_limit_held_runs', 'full')} 2`);
    expect(text).toContain(`${line('tock_limit_tokens', 'paced')} 4`);
    expect(text).toContain(`${line('tock_limit_held_runs', 'paced')} 0`);
    expect(text).not.toContain(line('tock_limit_tokens', 'full'));
    expect(text).not.toContain(line('tock_limit_max_concurrency', 'paced'));
    expect(text).toMatch(/^tock_limits \d+$/m);

    expect((await http('DELETE', '/v1/limits/full', { key: keys.operator })).status).toBe(204);
    const after = await scrape();
    expect(after).not.toContain(line('tock_limit_slots_in_use', 'full'));
    expect(after).toContain(line('tock_limit_slots_in_use', 'paced'));
  });
});
