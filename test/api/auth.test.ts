/**
 * Authentication, roles, tenant isolation and the per-tenant quota over real HTTP. Keys are made
 * in the store for two tenants (acme, globex) and every role; the admin endpoints make and revoke
 * more. Another tenant's objects must answer 404 and stay exactly as they were.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

const iso = (ms: number) => new Date(ms).toISOString();

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let a: RoleKeys;
let b: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  a = await keysFor(db, 'acme');
  b = await keysFor(db, 'globex');
  const put = await http('PUT', '/v1/jobs/nightly', {
    key: a.operator,
    body: { schedule: '0 3 * * *', handler: 'backup', pool: 'acme-pool' },
  });
  expect(put.status).toBe(200);
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

describe('authentication', () => {
  test('no Authorization header: 401', async () => {
    expectError(await http('GET', '/v1/jobs'), 401, 'unauthorized');
    expectError(
      await http('PUT', '/v1/jobs/x', { body: { schedule: '@daily', handler: 'h' } }),
      401,
      'unauthorized',
    );
    expectError(await http('POST', '/v1/leases', { body: { worker_id: 'w' } }), 401, 'unauthorized');
  });

  test.each([
    ['Basic auth', `Basic ${Buffer.from('admin:secret').toString('base64')}`],
    ['scheme only', 'Bearer'],
    ['scheme and a space', 'Bearer '],
    ['two tokens', 'Bearer tock_a tock_b'],
    ['the key without the scheme', 'KEY'],
    ['a token scheme', 'Token KEY'],
  ])('malformed Authorization (%s): 401', async (_name, header) => {
    const value = header.replace('KEY', a.admin);
    expectError(await http('GET', '/v1/jobs', { headers: { authorization: value } }), 401, 'unauthorized');
  });

  test('a forged key (tock_ and random bytes) and a key without the prefix: 401', async () => {
    expectError(
      await http('GET', '/v1/jobs', { key: `tock_${randomBytes(32).toString('base64url')}` }),
      401,
      'unauthorized',
    );
    // A real key with its prefix cut off, and one with a character changed.
    expectError(await http('GET', '/v1/jobs', { key: a.admin.slice('tock_'.length) }), 401, 'unauthorized');
    const flipped = `${a.admin.slice(0, -1)}${a.admin.endsWith('A') ? 'B' : 'A'}`;
    expectError(await http('GET', '/v1/jobs', { key: flipped }), 401, 'unauthorized');
  });

  test('an admin creates a key (201, the secret once); listings never show secrets; revoking it makes it 401', async () => {
    const created = await http('POST', '/v1/keys', {
      key: a.admin,
      body: { role: 'reader', name: 'dashboards' },
    });
    expect(created.status).toBe(201);
    expect(created.json.key).toMatch(/^tock_[A-Za-z0-9_-]{43}$/);
    expect(created.json).toEqual({
      key_id: created.json.key_id,
      tenant_id: 'acme',
      role: 'reader',
      name: 'dashboards',
      created_at: iso(db.clock.nowMs()),
      revoked_at: null,
      key: created.json.key,
    });
    const secret: string = created.json.key;
    // Only a hash is stored.
    const { rows } = await db.pool.query('SELECT * FROM api_keys WHERE key_id = $1', [created.json.key_id]);
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows[0])).not.toContain(secret);

    // The new key works, with its role.
    expect((await http('GET', '/v1/jobs/nightly', { key: secret })).status).toBe(200);
    expectError(await http('POST', '/v1/jobs/nightly/pause', { key: secret }), 403, 'forbidden');

    const list = await http('GET', '/v1/keys', { key: a.admin });
    expect(list.status).toBe(200);
    expect(Object.keys(list.json)).toEqual(['keys']);
    expect(list.json.keys.map((k: { key_id: string }) => k.key_id).sort()).toEqual(
      [...Object.values(a.ids), created.json.key_id].sort(),
    );
    for (const k of list.json.keys) {
      expect(Object.keys(k).sort()).toEqual([
        'created_at',
        'key_id',
        'name',
        'revoked_at',
        'role',
        'tenant_id',
      ]);
      expect(k.tenant_id).toBe('acme');
    }
    for (const s of [secret, a.admin, a.operator, a.worker, a.reader]) expect(list.text).not.toContain(s);
    expect(list.text).not.toContain('tock_');

    // Another tenant's admin neither sees nor revokes it.
    const theirs = await http('GET', '/v1/keys', { key: b.admin });
    expect(theirs.json.keys.map((k: { key_id: string }) => k.key_id).sort()).toEqual(
      Object.values(b.ids).sort(),
    );
    expectError(await http('DELETE', `/v1/keys/${created.json.key_id}`, { key: b.admin }), 404, 'not_found');
    expect((await http('GET', '/v1/jobs/nightly', { key: secret })).status).toBe(200);

    db.clock.advance(1000);
    const revoked = await http('DELETE', `/v1/keys/${created.json.key_id}`, { key: a.admin });
    expect(revoked.status).toBe(200);
    expect(revoked.json).toMatchObject({ key_id: created.json.key_id, revoked_at: iso(db.clock.nowMs()) });
    expect(revoked.json.key).toBeUndefined();
    expectError(await http('GET', '/v1/jobs/nightly', { key: secret }), 401, 'unauthorized');
    const after = await http('GET', '/v1/keys', { key: a.admin });
    expect(after.json.keys.find((k: { key_id: string }) => k.key_id === created.json.key_id).revoked_at).toBe(
      iso(db.clock.nowMs()),
    );
  });

  test('an admin key may revoke itself; afterwards it is 401', async () => {
    const created = await http('POST', '/v1/keys', { key: a.admin, body: { role: 'admin' } });
    expect(created.status).toBe(201);
    expect(created.json.name).toBe('');
    const self = await http('DELETE', `/v1/keys/${created.json.key_id}`, { key: created.json.key });
    expect(self.status).toBe(200);
    expectError(await http('GET', '/v1/keys', { key: created.json.key }), 401, 'unauthorized');
  });
});

describe('cluster-admin keys (F7)', () => {
  test("an admin lists its tenant's cluster-admin key (no secret) but may not revoke it: 403, nothing changed; a cluster-admin may", async () => {
    const tenant = await keysFor(db, 'ops-f7');
    const list = await http('GET', '/v1/keys', { key: tenant.admin });
    expect(list.status, list.text).toBe(200);
    const listed = list.json.keys.find((k: { key_id: string }) => k.key_id === tenant.ids['cluster-admin']);
    expect(listed).toMatchObject({ role: 'cluster-admin', revoked_at: null });
    expect(listed.key).toBeUndefined();

    const before = await snapshot(db.pool);
    const refused = await http('DELETE', `/v1/keys/${tenant.ids['cluster-admin']}`, { key: tenant.admin });
    expectError(refused, 403, 'forbidden');
    expect(await snapshot(db.pool)).toEqual(before);
    expect((await http('GET', '/v1/status', { key: tenant['cluster-admin'] })).status).toBe(200);

    // The cluster-admin key revokes another cluster-admin key of its tenant, then itself.
    const second = await db.store.createApiKey({
      tenantId: 'ops-f7',
      role: 'cluster-admin',
      now: db.clock.nowMs(),
    });
    const revoked = await http('DELETE', `/v1/keys/${second.key.keyId}`, { key: tenant['cluster-admin'] });
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.json).toMatchObject({
      key_id: second.key.keyId,
      role: 'cluster-admin',
      revoked_at: iso(db.clock.nowMs()),
    });
    expectError(await http('GET', '/v1/keys', { key: second.secret }), 401, 'unauthorized');
    // An admin still revokes the tenant's other keys.
    expect((await http('DELETE', `/v1/keys/${tenant.ids.reader}`, { key: tenant.admin })).status).toBe(200);
    // Another tenant's admin gets 404 for it, not 403: it is not theirs to know about.
    expectError(
      await http('DELETE', `/v1/keys/${tenant.ids['cluster-admin']}`, { key: b.admin }),
      404,
      'not_found',
    );
    // The database (tock keys, an operator of the database) may revoke it.
    const byDb = await db.store.revokeApiKey({
      tenantId: 'ops-f7',
      keyId: tenant.ids['cluster-admin'],
      now: db.clock.nowMs(),
      by: 'database',
    });
    expect(byDb.revokedAt).toEqual(new Date(db.clock.nowMs()));
    expectError(await http('GET', '/v1/keys', { key: tenant['cluster-admin'] }), 401, 'unauthorized');
  });
});

describe('roles', () => {
  test('reader: GETs only', async () => {
    expect((await http('GET', '/v1/jobs', { key: a.reader })).status).toBe(200);
    expect((await http('GET', '/v1/jobs/nightly', { key: a.reader })).status).toBe(200);
    expect((await http('GET', '/v1/jobs/nightly/runs', { key: a.reader })).status).toBe(200);
    expect((await http('GET', '/v1/runs?state=dead', { key: a.reader })).status).toBe(200);
    const before = await snapshot(db.pool);
    const writes: [string, string, unknown?][] = [
      ['PUT', '/v1/jobs/nightly', { schedule: '@daily', handler: 'h' }],
      ['DELETE', '/v1/jobs/nightly'],
      ['POST', '/v1/jobs/nightly/pause'],
      ['POST', '/v1/jobs/nightly/runs', {}],
      ['POST', '/v1/jobs/nightly/backfill', { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' }],
      ['POST', '/v1/leases', { worker_id: 'w' }],
      ['POST', '/v1/runs/00000000-0000-4000-8000-000000000000/cancel'],
      ['POST', '/v1/keys', { role: 'admin' }],
      ['GET', '/v1/keys'],
    ];
    for (const [method, path, body] of writes) {
      expectError(await http(method, path, { key: a.reader, body }), 403, 'forbidden');
    }
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('worker: leases, heartbeats and completes, but may not read or change jobs', async () => {
    const lease = await http('POST', '/v1/leases', {
      key: a.worker,
      body: { worker_id: 'w-1', pool: 'empty' },
    });
    expect(lease.status).toBe(200);
    expect(lease.json).toEqual({ runs: [], server_time: expect.any(String) });
    const hb = await http('POST', '/v1/workers/w-1/heartbeat', { key: a.worker, body: { leases: [] } });
    expect(hb.status).toBe(200);
    const before = await snapshot(db.pool);
    for (const [method, path, body] of [
      ['GET', '/v1/jobs'],
      ['GET', '/v1/jobs/nightly'],
      ['GET', '/v1/runs'],
      ['PUT', '/v1/jobs/nightly', { schedule: '@daily', handler: 'h' }],
      ['POST', '/v1/jobs/nightly/runs', {}],
      ['POST', '/v1/runs/00000000-0000-4000-8000-000000000000/cancel'],
      ['POST', '/v1/jobs/nightly/backfill', { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' }],
      ['POST', '/v1/keys', { role: 'worker' }],
    ] as [string, string, unknown?][]) {
      expectError(await http(method, path, { key: a.worker, body }), 403, 'forbidden');
    }
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('operator: jobs and runs, but no leases and no keys', async () => {
    expect((await http('POST', '/v1/jobs/nightly/pause', { key: a.operator })).status).toBe(200);
    expect((await http('POST', '/v1/jobs/nightly/resume', { key: a.operator })).status).toBe(200);
    const before = await snapshot(db.pool);
    expectError(
      await http('POST', '/v1/leases', { key: a.operator, body: { worker_id: 'w', pool: 'acme-pool' } }),
      403,
      'forbidden',
    );
    expectError(
      await http('POST', '/v1/runs/00000000-0000-4000-8000-000000000000/complete', {
        key: a.operator,
        body: { lease_token: '00000000-0000-4000-8000-000000000000', status: 'succeeded' },
      }),
      403,
      'forbidden',
    );
    expectError(
      await http('POST', '/v1/keys', { key: a.operator, body: { role: 'admin' } }),
      403,
      'forbidden',
    );
    expectError(await http('GET', '/v1/keys', { key: a.operator }), 403, 'forbidden');
    expectError(await http('DELETE', `/v1/keys/${a.ids.admin}`, { key: a.operator }), 403, 'forbidden');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('admin: everything, leases included', async () => {
    expect((await http('GET', '/v1/jobs', { key: a.admin })).status).toBe(200);
    expect(
      (await http('POST', '/v1/leases', { key: a.admin, body: { worker_id: 'w', pool: 'empty' } })).status,
    ).toBe(200);
    expect((await http('GET', '/v1/keys', { key: a.admin })).status).toBe(200);
  });
});

describe('tenant isolation', () => {
  test("another tenant's job and run answer 404 to every verb, and stay exactly as they were", async () => {
    // acme: a dead run (for replay) and a pending run (for leases) of `nightly`.
    const dead = await http('POST', '/v1/jobs/nightly/runs', {
      key: a.operator,
      body: { scheduled_for: '2025-12-31T03:00:00Z' },
    });
    expect(dead.status).toBe(201);
    const claimed = await http('POST', '/v1/leases', {
      key: a.worker,
      body: { worker_id: 'wa', pool: 'acme-pool' },
    });
    expect(claimed.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([dead.json.run_id]);
    const fail = await http('POST', `/v1/runs/${dead.json.run_id}/complete`, {
      key: a.worker,
      body: { lease_token: claimed.json.runs[0].lease_token, status: 'failed', retryable: false },
    });
    expect(fail.json).toEqual({ state: 'dead', attempt: 1, available_at: null });
    const pending = await http('POST', '/v1/jobs/nightly/runs', { key: a.operator, body: {} });
    expect(pending.status).toBe(201);

    const jobBefore = (await http('GET', '/v1/jobs/nightly', { key: a.reader })).json;
    const before = await snapshot(db.pool);
    const runPaths = [dead.json.run_id, pending.json.run_id];
    for (const [method, path, key, body] of [
      ['GET', '/v1/jobs/nightly', b.reader],
      ['GET', '/v1/jobs/nightly/runs', b.reader],
      ['GET', `/v1/runs/${runPaths[0]}`, b.reader],
      ['GET', `/v1/runs/${runPaths[1]}`, b.admin],
      ['POST', '/v1/jobs/nightly/pause', b.operator],
      ['POST', '/v1/jobs/nightly/resume', b.operator],
      ['DELETE', '/v1/jobs/nightly', b.admin],
      ['POST', '/v1/jobs/nightly/runs', b.operator, {}],
      ['POST', '/v1/jobs/nightly/runs', b.operator, { scheduled_for: '2026-05-01T00:00:00Z' }],
      [
        'POST',
        '/v1/jobs/nightly/backfill',
        b.operator,
        { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' },
      ],
      ['POST', `/v1/runs/${runPaths[0]}/replay`, b.operator],
      ['POST', `/v1/runs/${runPaths[1]}/replay`, b.admin],
      ['POST', `/v1/runs/${runPaths[0]}/cancel`, b.operator],
      ['POST', `/v1/runs/${runPaths[1]}/cancel`, b.admin],
      ['DELETE', `/v1/keys/${a.ids.reader}`, b.admin],
    ] as [string, string, string, unknown?][]) {
      const answer = await http(method, path, { key, body });
      expectError(answer, 404, 'not_found');
      expect(answer.text).not.toContain('acme');
    }
    // Lists and leases of globex simply do not contain acme's objects.
    expect((await http('GET', '/v1/jobs', { key: b.reader })).json).toEqual({ jobs: [], next_cursor: null });
    expect((await http('GET', '/v1/runs', { key: b.reader })).json).toEqual({ runs: [], next_cursor: null });
    expect((await http('GET', '/v1/runs?state=dead', { key: b.reader })).json).toEqual({
      runs: [],
      next_cursor: null,
    });
    expect(
      (
        await http('POST', '/v1/leases', {
          key: b.worker,
          body: { worker_id: 'wb', pool: 'acme-pool', max: 10 },
        })
      ).json,
    ).toEqual({ runs: [], server_time: expect.any(String) });
    expect(await snapshot(db.pool)).toEqual(before);

    // A PUT of the same id creates globex's own job; acme's is untouched.
    const theirs = await http('PUT', '/v1/jobs/nightly', {
      key: b.operator,
      body: { schedule: '@every 5m', handler: 'other', pool: 'acme-pool' },
    });
    expect(theirs.status).toBe(200);
    expect(theirs.json).toMatchObject({ job_id: 'nightly', change: 'created', handler: 'other', version: 1 });
    expect((await http('GET', '/v1/jobs/nightly', { key: a.reader })).json).toEqual(jobBefore);
    expect((await http('GET', '/v1/jobs/nightly', { key: b.reader })).json.handler).toBe('other');
    const { rows } = await db.pool.query(
      "SELECT tenant_id, handler FROM jobs WHERE job_id = 'nightly' ORDER BY tenant_id",
    );
    expect(rows).toEqual([
      { tenant_id: 'acme', handler: 'backup' },
      { tenant_id: 'globex', handler: 'other' },
    ]);
    // globex's delete removes only globex's job.
    expect((await http('DELETE', '/v1/jobs/nightly', { key: b.operator })).status).toBe(204);
    expect((await http('GET', '/v1/jobs/nightly', { key: a.reader })).json).toEqual(jobBefore);
    // acme's pending run in the shared pool name is still acme's to claim.
    const mine = await http('POST', '/v1/leases', {
      key: a.worker,
      body: { worker_id: 'wa', pool: 'acme-pool' },
    });
    expect(mine.json.runs.map((r: { run_id: string }) => r.run_id)).toEqual([pending.json.run_id]);
  });
});

describe('quota', () => {
  test('the 4th request in a burst of 3 (1/s) is 429 with Retry-After; other tenants are not affected', async () => {
    const limited = await startApi(db, { quota: { perSecond: 1, burst: 3 } });
    try {
      const q = client(limited.base);
      for (let i = 0; i < 3; i++) expect((await q('GET', '/v1/jobs', { key: a.reader })).status).toBe(200);
      const before = await snapshot(db.pool);
      const fourth = await q('PUT', '/v1/jobs/over-quota', {
        key: a.operator,
        body: { schedule: '@daily', handler: 'h' },
      });
      expectError(fourth, 429, 'rate_limited');
      expect(fourth.headers.get('retry-after')).toBe('1');
      expect(await snapshot(db.pool)).toEqual(before);
      // The FakeClock has not moved, so the bucket stays empty, for every key of the tenant.
      expectError(await q('GET', '/v1/jobs', { key: a.admin }), 429, 'rate_limited');
      // globex has its own bucket.
      expect((await q('GET', '/v1/jobs', { key: b.reader })).status).toBe(200);
      // Rejected requests (401) are not charged to anyone; health stays public and unlimited.
      expectError(await q('GET', '/v1/jobs'), 401, 'unauthorized');
      for (let i = 0; i < 5; i++) expect((await q('GET', '/healthz')).status).toBe(200);
      // One second refills one token.
      db.clock.advance(1000);
      expect((await q('GET', '/v1/jobs', { key: a.reader })).status).toBe(200);
      expectError(await q('GET', '/v1/jobs', { key: a.reader }), 429, 'rate_limited');
    } finally {
      await limited.close();
    }
  });
});

describe('worker quota', () => {
  test("lease requests are paid from the tenant's worker bucket: its other callers cannot starve its workers, nor they them", async () => {
    const limited = await startApi(db, {
      quota: { perSecond: 1, burst: 2 },
      workerQuota: { perSecond: 1, burst: 3 },
    });
    try {
      const q = client(limited.base);
      // The request bucket spent by a reader…
      for (let i = 0; i < 2; i++) expect((await q('GET', '/v1/jobs', { key: a.reader })).status).toBe(200);
      expectError(await q('GET', '/v1/jobs', { key: a.reader }), 429, 'rate_limited');
      // …leaves the workers' three lease requests (a batch of results is one).
      const heartbeat = () => q('POST', '/v1/workers/wq/heartbeat', { key: a.worker, body: { leases: [] } });
      for (let i = 0; i < 2; i++) expect((await heartbeat()).status).toBe(200);
      const results = await q('POST', '/v1/runs/complete', {
        key: a.worker,
        body: {
          results: Array.from({ length: 3 }, (_, i) => ({
            run_id: `00000000-0000-4000-8000-00000000000${i}`,
            lease_token: '00000000-0000-4000-8000-000000000000',
            status: 'succeeded',
          })),
        },
      });
      expect(results.status).toBe(200);
      expect(results.json.results.map((r: { outcome: string }) => r.outcome)).toEqual([
        'not_found',
        'not_found',
        'not_found',
      ]);
      const refused = await heartbeat();
      expectError(refused, 429, 'rate_limited');
      expect(refused.json.error.message).toMatch(/worker request quota/);
      // Another tenant's workers have their own bucket.
      expect(
        (await q('POST', '/v1/workers/wq/heartbeat', { key: b.worker, body: { leases: [] } })).status,
      ).toBe(200);
      db.clock.advance(1000);
      expect((await heartbeat()).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('known gaps', () => {
  // Heartbeat and complete check the lease token but not the caller's tenant: a worker key of
  // one tenant holding another tenant's live token (leaked, logged) can complete that run. The
  // contract says another tenant's objects answer 404. Flip `test.fails` to `test` once the
  // store's lease operations take the tenant.
  let leaked: { runId: string; token: string };

  test('setup: acme claims a run of its own', async () => {
    const job = await http('PUT', '/v1/jobs/leaky', {
      key: a.operator,
      body: { schedule: '@daily', handler: 'h', pool: 'leaky-pool' },
    });
    expect(job.status).toBe(200);
    const run = await http('POST', '/v1/jobs/leaky/runs', { key: a.operator, body: {} });
    const claimed = await http('POST', '/v1/leases', {
      key: a.worker,
      body: { worker_id: 'wa', pool: 'leaky-pool' },
    });
    expect(claimed.json.runs[0].run_id).toBe(run.json.run_id);
    leaked = { runId: run.json.run_id, token: claimed.json.runs[0].lease_token };
  });

  test('a worker key of another tenant cannot complete a run even with its live token (404)', async () => {
    const answer = await http('POST', `/v1/runs/${leaked.runId}/complete`, {
      key: b.worker,
      body: { lease_token: leaked.token, status: 'succeeded' },
    });
    expectError(answer, 404, 'not_found');
  });
});
