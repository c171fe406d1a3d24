/**
 * Issue 22's webhook notifications over real loopback HTTP on a real store: `PUT/GET/DELETE
 * /v1/notifications/{name}`, the list, and a notification's delivery log. Admin to write, read to
 * read; the secret is never answered (`secret_set`); one tenant's key never sees nor touches another
 * tenant's notifications; a URL outside the server's allow-list, and text PostgreSQL cannot store
 * (NUL, an unpaired surrogate) in the name, URL or secret, are a 400 with nothing written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

let db: TestDatabase;
let api: Api;
let acme: RoleKeys;
let beta: RoleKeys;
let http: ReturnType<typeof client>;

const URL_OK = 'https://hooks.example.com/tock';
const SECRET = 'sixteen-chars-or-more';

beforeAll(async () => {
  db = await setupDatabase();
  acme = await keysFor(db, 'acme');
  beta = await keysFor(db, 'beta');
  api = await startApi(db, {
    quota: { perSecond: 1_000_000, burst: 1_000_000 },
    notificationAllow: ['https://hooks.example.com/'],
  });
  http = client(api.base);
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

describe('PUT, GET, list and DELETE /v1/notifications', () => {
  test('an admin creates and replaces one; the secret is never answered, only whether one is set', async () => {
    const body = { url: URL_OK, events: ['run.late', 'run.dead'], late_after: '600s', secret: SECRET };
    const created = await http('PUT', '/v1/notifications/ops', { key: acme.admin, body });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toEqual({
      name: 'ops',
      url: URL_OK,
      events: ['run.dead', 'run.late'],
      late_after: '10m',
      secret_set: true,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(created.text).not.toContain(SECRET);
    const got = await http('GET', '/v1/notifications/ops', { key: acme.reader });
    expect(got.status, got.text).toBe(200);
    expect(got.json).toEqual(created.json);
    expect(got.text).not.toContain(SECRET);

    // PUT replaces: the secret left out is unset.
    const replaced = await http('PUT', '/v1/notifications/ops', {
      key: acme.admin,
      body: { url: URL_OK, events: ['worker.lost'] },
    });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.json).toMatchObject({ events: ['worker.lost'], late_after: null, secret_set: false });

    await http('PUT', '/v1/notifications/aa', {
      key: acme.admin,
      body: { url: URL_OK, events: ['run.dead'] },
    });
    const list = await http('GET', '/v1/notifications?limit=1', { key: acme.reader });
    expect(list.status, list.text).toBe(200);
    expect(list.json.notifications.map((n: { name: string }) => n.name)).toEqual(['aa']);
    const next = await http('GET', `/v1/notifications?cursor=${list.json.next_cursor}`, { key: acme.reader });
    expect(next.json).toMatchObject({ notifications: [{ name: 'ops' }], next_cursor: null });

    expect((await http('DELETE', '/v1/notifications/aa', { key: acme.admin })).status).toBe(204);
    expectError(await http('GET', '/v1/notifications/aa', { key: acme.reader }), 404, 'not_found');
    expectError(await http('DELETE', '/v1/notifications/aa', { key: acme.admin }), 404, 'not_found');
  });

  test('writing needs an admin key; reading a reader key', async () => {
    const before = await snapshot(db.pool);
    const body = { url: URL_OK, events: ['run.dead'] };
    for (const key of [acme.operator, acme.worker, acme.reader]) {
      expectError(await http('PUT', '/v1/notifications/ops', { key, body }), 403, 'forbidden');
      expectError(await http('DELETE', '/v1/notifications/ops', { key }), 403, 'forbidden');
    }
    expectError(await http('GET', '/v1/notifications', { key: acme.worker }), 403, 'forbidden');
    expectError(await http('GET', '/v1/notifications'), 401, 'unauthorized');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test("a tenant never sees nor touches another tenant's notifications", async () => {
    await http('PUT', '/v1/notifications/ops', {
      key: acme.admin,
      body: { url: URL_OK, events: ['run.dead'] },
    });
    const before = await snapshot(db.pool);
    expect((await http('GET', '/v1/notifications', { key: beta.admin })).json.notifications).toEqual([]);
    expectError(await http('GET', '/v1/notifications/ops', { key: beta.admin }), 404, 'not_found');
    expectError(await http('GET', '/v1/notifications/ops/deliveries', { key: beta.admin }), 404, 'not_found');
    expectError(await http('DELETE', '/v1/notifications/ops', { key: beta.admin }), 404, 'not_found');
    expect(await snapshot(db.pool)).toEqual(before);
    // Beta's own notification by the same name is its own.
    const own = await http('PUT', '/v1/notifications/ops', {
      key: beta.admin,
      body: { url: URL_OK, events: ['job.misfired'] },
    });
    expect(own.status, own.text).toBe(201);
    expect((await http('GET', '/v1/notifications/ops', { key: acme.reader })).json.events).toEqual([
      'run.dead',
    ]);
  });

  test('bad input is a 400 naming the field, with nothing written', async () => {
    const before = await snapshot(db.pool);
    const ok = { url: URL_OK, events: ['run.dead'] };
    const cases: [string, unknown][] = [
      ['ops', { ...ok, url: 'https://evil.example.net/' }],
      ['ops', { ...ok, url: 'http://hooks.example.com/' }],
      ['ops', { ...ok, url: 'https://hooks.example.com/\u0000' }],
      ['ops', { ...ok, url: 'https://hooks.example.com/\ud800' }],
      ['ops', { ...ok, secret: `${SECRET}\u0000` }],
      ['ops', { ...ok, secret: `${SECRET}\udc00` }],
      ['ops', { ...ok, secret: 'short' }],
      ['ops', { ...ok, events: [] }],
      ['ops', { ...ok, events: ['run.succeeded'] }],
      ['ops', { ...ok, events: ['run.late'] }],
      ['ops', { ...ok, late_after: '5m' }],
      ['ops', { ...ok, extra: 1 }],
      ['o%00ps', ok],
      ['o%ED%A0%80ps', ok],
      ['bad name', ok],
    ];
    for (const [name, body] of cases) {
      const a = await http('PUT', `/v1/notifications/${name}`, { key: acme.admin, body });
      expectError(a, 400, 'validation_error');
    }
    // A name with NUL in a raw body's JSON escape, and a lone surrogate written as JSON text.
    const raw = await http('PUT', '/v1/notifications/ops', {
      key: acme.admin,
      body: `{"url":"${URL_OK}","events":["run.dead"],"secret":"${SECRET}\\ud800"}`,
    });
    expectError(raw, 400, 'validation_error');
    expect(await snapshot(db.pool)).toEqual(before);
  });
});

describe('GET /v1/notifications/{name}/deliveries', () => {
  test('the delivery log, newest first, paged; a dead run of the tenant is in it', async () => {
    await http('PUT', '/v1/notifications/log', {
      key: acme.admin,
      body: { url: URL_OK, events: ['run.dead'] },
    });
    const now = db.clock.nowMs();
    await upsertJob(db.store, {
      tenantId: 'acme',
      job: { jobId: 'dies', schedule: '@every 1h', handler: 'h', maxAttempts: 1 },
      now,
    });
    for (let i = 0; i < 2; i++) {
      await db.store.triggerRun({ tenantId: 'acme', jobId: 'dies', scheduledFor: now + i * 1000, now });
      const [lease] = await db.store.claimRuns({ workerId: 'w', pool: 'default', max: 1, now: now + 5000 });
      await db.store.failRun({ ...lease!, error: `boom ${i}`, now: now + 5000 });
    }
    const page = await http('GET', '/v1/notifications/log/deliveries?limit=1', { key: acme.reader });
    expect(page.status, page.text).toBe(200);
    expect(page.json.deliveries).toEqual([
      {
        delivery_id: expect.any(String),
        event: 'run.dead',
        state: 'pending',
        attempts: 0,
        last_status: null,
        last_error: null,
        data: expect.objectContaining({ job_id: 'dies', attempt: 1, error: 'boom 1' }),
        created_at: new Date(now + 5000).toISOString(),
        last_attempt_at: null,
        next_attempt_at: new Date(now + 5000).toISOString(),
        finished_at: null,
      },
    ]);
    const rest = await http('GET', `/v1/notifications/log/deliveries?cursor=${page.json.next_cursor}`, {
      key: acme.reader,
    });
    expect(rest.json.deliveries.map((d: { data: { error: string } }) => d.data.error)).toEqual(['boom 0']);
    expect(rest.json.next_cursor).toBeNull();
    // The other tenant's notification of the same name sees none of it.
    expectError(
      await http('GET', '/v1/notifications/log/deliveries', { key: beta.reader }),
      404,
      'not_found',
    );
  });
});
