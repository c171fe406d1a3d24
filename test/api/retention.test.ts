/**
 * Issue 21's retention over real loopback HTTP on a real store: `GET/PUT /v1/retention` (canonical
 * answers, admin only to write, one tenant's settings never another's), a job's `retention` field,
 * and `POST /v1/runs/prune` (a dry run counts and deletes nothing; a prune deletes the caller's
 * expired runs only); every bad input is a 400 naming the field with nothing written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DEFAULT_RETENTION } from '../../src/core/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { countRows, endedRun } from '../setup/factories.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

const DAY = 86_400_000;

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

describe('GET and PUT /v1/retention', () => {
  test('defaults at first; an admin replaces them, canonical; another tenant keeps its own', async () => {
    const before = await http('GET', '/v1/retention', { key: acme.reader });
    expect(before.status, before.text).toBe(200);
    expect(before.json).toEqual({ retention: DEFAULT_RETENTION, set: {}, defaults: DEFAULT_RETENTION });

    const put = await http('PUT', '/v1/retention', {
      key: acme.admin,
      body: { succeeded: '48h', dead: 'forever' },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.json).toEqual({
      retention: { ...DEFAULT_RETENTION, succeeded: '2d', dead: 'forever' },
      set: { succeeded: '2d', dead: 'forever' },
      defaults: DEFAULT_RETENTION,
    });
    expect((await http('GET', '/v1/retention', { key: acme.reader })).json).toEqual(put.json);
    expect((await http('GET', '/v1/retention', { key: beta.admin })).json.set).toEqual({});

    // PUT replaces: a state left out goes back to its default.
    const again = await http('PUT', '/v1/retention', { key: acme.admin, body: { skipped: '1h' } });
    expect(again.json.set).toEqual({ skipped: '1h' });
    expect(again.json.retention.succeeded).toBe(DEFAULT_RETENTION.succeeded);
  });

  test('only an admin may write it', async () => {
    const before = await snapshot(db.pool);
    for (const key of [acme.operator, acme.worker, acme.reader]) {
      expectError(await http('PUT', '/v1/retention', { key, body: { succeeded: '1s' } }), 403, 'forbidden');
    }
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test.each([
    [{ running: '1d' }],
    [{ succeeded: 5 }],
    [{ succeeded: '1 day' }],
    [{ succeeded: '500ms' }],
    [{ succeeded: '400d' }],
    [{ succeeded: 'x'.repeat(33) }],
    [{ succeeded: '1d\u0000' }],
    [{ succeeded: '1d\ud800' }],
    [['7d']],
    ['"7d"'],
  ])('refuses %j with a 400 and writes nothing', async (body) => {
    const before = await snapshot(db.pool);
    const a = await http('PUT', '/v1/retention', { key: beta.admin, body });
    expectError(a, 400, 'validation_error');
    expect(await snapshot(db.pool)).toEqual(before);
  });
});

describe("a job's retention", () => {
  test('is stored canonical and answered; a bad one is a 400 naming it', async () => {
    const put = await http('PUT', '/v1/jobs/kept', {
      key: acme.admin,
      body: { schedule: '@every 1h', handler: 'h', retention: { succeeded: '720h', dead: 'forever' } },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.json.retention).toEqual({ succeeded: '30d', dead: 'forever' });
    expect((await http('GET', '/v1/jobs/kept', { key: acme.reader })).json.retention).toEqual({
      succeeded: '30d',
      dead: 'forever',
    });

    const before = await snapshot(db.pool);
    const bad = await http('PUT', '/v1/jobs/bad', {
      key: acme.admin,
      body: { schedule: '@every 1h', handler: 'h', retention: { succeeded: 'soon' } },
    });
    expectError(bad, 400, 'validation_error');
    expect(bad.json.error.message).toContain('retention.succeeded');
    expect(await snapshot(db.pool)).toEqual(before);
  });
});

describe('POST /v1/runs/prune', () => {
  test("a dry run counts; a prune deletes the caller's expired runs only", async () => {
    const now = db.clock.nowMs();
    for (const tenantId of ['acme', 'beta']) {
      await http('PUT', '/v1/jobs/old', {
        key: (tenantId === 'acme' ? acme : beta).admin,
        body: { schedule: '@every 1h', handler: 'h' },
      });
      await db.store.putTenantRetention({ tenantId, retention: {}, now });
      for (let i = 0; i < 3; i++) {
        const slot = now - 40 * DAY + i * 1000;
        await endedRun(db, {
          tenantId,
          jobId: 'old',
          slot,
          state: i === 0 ? 'dead' : 'succeeded',
          finishedAt: slot,
        });
      }
      await endedRun(db, {
        tenantId,
        jobId: 'old',
        slot: now - DAY,
        state: 'succeeded',
        finishedAt: now - DAY,
      });
    }

    const dry = await http('POST', '/v1/runs/prune', { key: acme.admin, body: { dry_run: true } });
    expect(dry.status, dry.text).toBe(200);
    expect(dry.json).toEqual({
      dry_run: true,
      runs: { succeeded: 2, dead: 1, cancelled: 0, skipped: 0 },
      scanned: 3,
      horizon: new Date(now - 7 * DAY).toISOString(),
      cursor: null,
    });
    expect(await countRows(db.pool, 'runs', "tenant_id = 'acme' AND job_id = 'old'")).toBe(4);

    expectError(await http('POST', '/v1/runs/prune', { key: acme.operator, body: {} }), 403, 'forbidden');
    const pruned = await http('POST', '/v1/runs/prune', { key: acme.admin, body: {} });
    expect(pruned.status, pruned.text).toBe(200);
    expect(pruned.json).toMatchObject({ dry_run: false, runs: { succeeded: 2, dead: 1 }, cursor: null });
    expect(await countRows(db.pool, 'runs', "tenant_id = 'acme' AND job_id = 'old'")).toBe(1);
    expect(await countRows(db.pool, 'runs', "tenant_id = 'beta' AND job_id = 'old'")).toBe(4);
  });

  test.each([
    [{ cursor: 'not-a-cursor' }],
    [{ cursor: Buffer.from(JSON.stringify([1, 2, 'x'])).toString('base64url') }],
    [
      {
        cursor: Buffer.from(JSON.stringify(['a', 2, '00000000-0000-0000-0000-000000000000'])).toString(
          'base64url',
        ),
      },
    ],
    [{ dry_run: 'yes' }],
    [{ everything: true }],
  ])('refuses %j with a 400 and deletes nothing', async (body) => {
    const before = await snapshot(db.pool);
    expectError(await http('POST', '/v1/runs/prune', { key: beta.admin, body }), 400, 'validation_error');
    expect(await snapshot(db.pool)).toEqual(before);
  });
});
