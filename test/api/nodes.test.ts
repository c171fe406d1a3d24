/**
 * Issue 14, items 2, 5 and 8, over real loopback HTTP on a real store: the node list is split by
 * tenant. A remote worker's row is `<tenant>/<worker_id>`, so a worker key can neither keep a dead
 * scheduler "live" (and shrink the survivors' fair share) nor overwrite a scheduler's or another
 * tenant's row; a tenant's operator sees only its own remote workers in `GET /v1/status`; and a
 * key that invents worker ids keeps at most MAX_REMOTE_WORKERS_PER_TENANT rows, shown a page at
 * a time. The API writes a remote worker's row without waiting for it, so the tests wait (real
 * time, bounded) for that row to land before they look.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, startApi } from './helpers.js';

const LEASE_MS = 10_000;
const MAX_PER_TENANT = 1000;
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let acme: RoleKeys;
let other: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  http = client(api.base);
  acme = await keysFor(db, 'acme');
  other = await keysFor(db, 'other');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

beforeEach(async () => {
  await db.pool.query('DELETE FROM nodes');
  await db.pool.query('UPDATE shards SET owner = NULL, lease_expires_at = NULL, epoch = 0');
  // A fresh instant, past every worker-row throttle of the tests before.
  db.clock.set(Math.ceil((db.clock.nowMs() + 60_000) / 10_000) * 10_000);
});

/** Waits (real time, bounded) until `sql` counts at least `n` rows: the API's node writes landed. */
async function rowsLanded(sql: string, n: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db.pool.query(sql);
    if ((rows[0].n as number) >= n) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} rows of: ${sql}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
const HTTP_ROWS = `SELECT count(*)::int AS n FROM nodes WHERE info ->> 'via' = 'http'`;

const SCHED_INFO = { pid: 4242, url: 'http://10.0.0.5:8080', backlog: 0, live_ms: LEASE_MS };

/** sched-1 and sched-2 splitting the 64 shards 32/32, last seen just before `t`. */
async function twoSchedulers(t: number): Promise<void> {
  const step = (nodeId: string, now: number) =>
    db.store.shardStep({ nodeId, now, leaseMs: LEASE_MS, info: SCHED_INFO });
  await step('sched-1', t - 1000);
  await step('sched-2', t - 500);
  expect((await step('sched-1', t - 200)).released).toEqual(range(32, 64));
  expect((await step('sched-2', t - 100)).taken).toEqual(range(32, 64));
}

describe('item 2: remote workers cannot touch cluster nodes or other tenants', () => {
  test('a worker key heartbeating as a dead scheduler does not keep it live: the survivor takes all 64 shards', async () => {
    const t = db.clock.nowMs();
    await twoSchedulers(t);
    // sched-2 dies. Past its lease, another tenant's worker key speaks in its name.
    const later = t + LEASE_MS + 1000;
    db.clock.set(later);
    const hb = await http('POST', '/v1/workers/sched-2/heartbeat', {
      key: other.worker,
      body: { leases: [] },
    });
    expect(hb.status, hb.text).toBe(200);
    const lease = await http('POST', '/v1/leases', { key: acme.worker, body: { worker_id: 'sched-2' } });
    expect(lease.status, lease.text).toBe(200);
    // Both rows (other/sched-2, acme/sched-2): one still in flight would land in the next test.
    await rowsLanded(HTTP_ROWS, 2);

    const step = await db.store.shardStep({ nodeId: 'sched-1', now: later, leaseMs: LEASE_MS });
    expect([step.liveNodes, step.fairShare]).toEqual([1, 64]);
    expect(step.owned.map((s) => s.shardId)).toEqual(range(0, 64));
    // The dead scheduler's own row is as it left it.
    const { rows } = await db.pool.query(`SELECT last_seen_at, info FROM nodes WHERE node_id = 'sched-2'`);
    expect(rows).toEqual([{ last_seen_at: new Date(t - 100), info: SCHED_INFO }]);
  });

  test("the same worker id in two tenants is two rows; neither overwrites the other or a scheduler's", async () => {
    const t = db.clock.nowMs();
    await db.store.shardStep({ nodeId: 'sched-1', now: t - 100, leaseMs: LEASE_MS, info: SCHED_INFO });
    for (const [key, pool] of [
      [acme.worker, 'acme-pool'],
      [other.worker, 'other-pool'],
    ] as const) {
      const a = await http('POST', '/v1/leases', { key, body: { worker_id: 'w-1', pool } });
      expect(a.status, a.text).toBe(200);
    }
    const hb = await http('POST', '/v1/workers/sched-1/heartbeat', {
      key: other.worker,
      body: { leases: [] },
    });
    expect(hb.status, hb.text).toBe(200);
    await rowsLanded(HTTP_ROWS, 3);

    const { rows } = await db.pool.query(
      `SELECT node_id, role, info ->> 'pool' AS pool, info ->> 'pid' AS pid FROM nodes ORDER BY node_id`,
    );
    expect(rows).toEqual([
      { node_id: 'acme/w-1', role: 'worker', pool: 'acme-pool', pid: null },
      { node_id: 'other/sched-1', role: 'worker', pool: null, pid: null },
      { node_id: 'other/w-1', role: 'worker', pool: 'other-pool', pid: null },
      { node_id: 'sched-1', role: 'scheduler', pool: null, pid: '4242' },
    ]);
  });
});

describe("item 5: a tenant's operator sees its own tenant only", () => {
  test('no scheduler (pid, URL), no database worker, no other tenant, no shards or backlog', async () => {
    const t = db.clock.nowMs();
    await db.store.shardStep({ nodeId: 'sched-1', now: t - 100, leaseMs: LEASE_MS, info: SCHED_INFO });
    await db.store.touchNode({ nodeId: 'db-worker', role: 'worker', now: t - 100, info: { pool: 'ops' } });
    await http('POST', '/v1/leases', { key: acme.worker, body: { worker_id: 'w-a', pool: 'acme-pool' } });
    await http('POST', '/v1/leases', { key: other.worker, body: { worker_id: 'w-o', pool: 'other-secret' } });
    await rowsLanded(HTTP_ROWS, 2);

    for (const key of [acme.operator, acme.admin]) {
      const a = await http('GET', '/v1/status', { key });
      expect(a.status, a.text).toBe(200);
      expect(a.json.scope).toBe('tenant');
      expect(
        a.json.nodes.map((n: { node_id: string; tenant_id: string }) => [n.node_id, n.tenant_id]),
      ).toEqual([['acme/w-a', 'acme']]);
      expect(a.json.nodes[0].info).toEqual({ via: 'http', pool: 'acme-pool', live_ms: 60_000 });
      expect(a.json.shards).toBeUndefined();
      expect(a.json.backlog).toBeUndefined();
      for (const secret of ['sched-1', '4242', '10.0.0.5', 'db-worker', 'other', 'w-o']) {
        expect(a.text).not.toContain(secret);
      }
    }

    // A cluster-admin key (made on the database, by tock keys create) sees the cluster.
    const c = await http('GET', '/v1/status', { key: acme['cluster-admin'] });
    expect(c.status, c.text).toBe(200);
    expect(c.json.scope).toBe('cluster');
    expect(c.json.nodes.map((n: { node_id: string }) => n.node_id).sort()).toEqual([
      'acme/w-a',
      'db-worker',
      'other/w-o',
      'sched-1',
    ]);
    expect(c.json.shards.count).toBe(64);
    expect(c.json.backlog).toEqual({ due_jobs: 0, ready_runs: 0, queues: [], queues_more: 0 });
  });

  test('no API key mints a cluster-admin key, not even a cluster-admin', async () => {
    const before = await db.pool.query(`SELECT count(*)::int AS n FROM api_keys`);
    for (const key of [acme.admin, acme['cluster-admin']]) {
      expectError(
        await http('POST', '/v1/keys', { key, body: { role: 'cluster-admin', name: 'up' } }),
        400,
        'validation_error',
      );
    }
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM api_keys`)).rows).toEqual(before.rows);
    // A cluster-admin is an admin of its own tenant: it makes that tenant's keys.
    const made = await http('POST', '/v1/keys', { key: acme['cluster-admin'], body: { role: 'reader' } });
    expect(made.status, made.text).toBe(201);
    expect(made.json.tenant_id).toBe('acme');
  });
});

describe('item 8: a bounded node list, paged', () => {
  test(`a worker key inventing ids keeps at most ${MAX_PER_TENANT} rows of its tenant; status is paged`, async () => {
    await http('POST', '/v1/leases', { key: acme.worker, body: { worker_id: 'w-a' } });
    await rowsLanded(`SELECT count(*)::int AS n FROM nodes WHERE node_id LIKE '%w-a'`, 1);
    const flood = MAX_PER_TENANT + 100;
    for (let i = 0; i < flood; i++) {
      db.clock.advance(1);
      const a = await http('POST', `/v1/workers/flood-${i}/heartbeat`, {
        key: other.worker,
        body: { leases: [] },
      });
      expect(a.status).toBe(200);
    }
    await rowsLanded(`SELECT count(*)::int AS n FROM nodes WHERE node_id LIKE '%flood-${flood - 1}'`, 1);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE node_id LIKE '%flood-0')::int AS first
       FROM nodes WHERE node_id LIKE '%flood-%'`,
    );
    expect(rows[0].n).toBeLessThanOrEqual(MAX_PER_TENANT);
    expect(rows[0].first).toBe(0); // the least recently seen gave way
    // Another tenant's worker is untouched by the flood.
    const acmeRows = await db.pool.query(`SELECT count(*)::int AS n FROM nodes WHERE node_id LIKE '%w-a'`);
    expect(acmeRows.rows[0].n).toBe(1);

    // The status: 100 nodes a page (a few KB), every page this tenant's, at most the cap in all.
    const first = await http('GET', '/v1/status', { key: other.operator });
    expect(first.status, first.text).toBe(200);
    expect(first.json.nodes).toHaveLength(100);
    expect(first.text.length).toBeLessThan(32_000);
    expect(first.json.next_cursor).toEqual(expect.any(String));
    let seen = 0;
    let cursor: string | null = null;
    do {
      const page = await http('GET', `/v1/status?limit=500${cursor ? `&cursor=${cursor}` : ''}`, {
        key: other.operator,
      });
      expect(page.status, page.text).toBe(200);
      for (const n of page.json.nodes) expect(n.tenant_id).toBe('other');
      seen += page.json.nodes.length;
      cursor = page.json.next_cursor;
    } while (cursor !== null);
    expect(seen).toBeLessThanOrEqual(MAX_PER_TENANT);
    expect(seen).toBeGreaterThan(MAX_PER_TENANT - 10);
  });

  test('remote workers silent for five minutes are forgotten; cluster nodes stay for an hour', async () => {
    const t = db.clock.nowMs();
    await db.store.touchNode({ nodeId: 'sched-old', role: 'scheduler', now: t - 10 * 60_000 });
    await db.store.touchRemoteWorker({ tenantId: 'acme', workerId: 'gone', now: t - 6 * 60_000, cap: 10 });
    await db.store.touchRemoteWorker({ tenantId: 'acme', workerId: 'here', now: t - 60_000, cap: 10 });
    expect(await db.store.pruneNodes({ before: t - 3_600_000, remoteBefore: t - 5 * 60_000 })).toBe(1);
    const { items } = await db.store.listNodes({ limit: 10 });
    expect(items.map((n) => n.nodeId).sort()).toEqual(['acme/here', 'sched-old']);
  });

  test('at the cap, the least recently seen row of that tenant gives way, and no other tenant loses one', async () => {
    const t = db.clock.nowMs();
    for (const [i, id] of ['a', 'b', 'c'].entries()) {
      await db.store.touchRemoteWorker({ tenantId: 'acme', workerId: id, now: t + i, cap: 3 });
    }
    await db.store.touchRemoteWorker({ tenantId: 'other', workerId: 'z', now: t, cap: 3 });
    // `a` is seen again: nothing goes. Then `d` arrives: `b`, now the least recently seen, goes.
    expect(
      await db.store.touchRemoteWorker({ tenantId: 'acme', workerId: 'a', now: t + 10, cap: 3 }),
    ).toEqual({
      nodeId: 'acme/a',
      touched: true,
      evicted: 0,
    });
    expect(
      await db.store.touchRemoteWorker({ tenantId: 'acme', workerId: 'd', now: t + 11, cap: 3 }),
    ).toEqual({
      nodeId: 'acme/d',
      touched: true,
      evicted: 1,
    });
    const { items } = await db.store.listNodes({ limit: 10 });
    expect(items.map((n) => n.nodeId).sort()).toEqual(['acme/a', 'acme/c', 'acme/d', 'other/z']);
    expect((await db.store.listNodes({ tenantId: 'other', limit: 10 })).items.map((n) => n.nodeId)).toEqual([
      'other/z',
    ]);
  });
});

describe('issue 15, item 8: a remote worker reports itself, and leaves on a clean stop', () => {
  test('PUT /v1/workers/{id} records pool, handlers, runs held and clock offset; claims and heartbeats keep them', async () => {
    const report = {
      pool: 'gpu',
      handlers: ['train', 'eval'],
      concurrency: 4,
      in_flight: 3,
      clock_offset_ms: -12.5,
      clock_uncertainty_ms: 0.75,
    };
    // An empty handler list would read as "serves nothing" beside "unset: any handler": refused.
    const empty = await http('PUT', '/v1/workers/w-1', {
      key: acme.worker,
      body: { ...report, handlers: [] },
    });
    expect(empty.status, empty.text).toBe(400);
    expect(empty.json.error.message).toContain('handlers');
    const put = await http('PUT', '/v1/workers/w-1', { key: acme.worker, body: report });
    expect(put.status, put.text).toBe(200);
    expect(put.json).toEqual({ server_time: new Date(db.clock.nowMs()).toISOString() });
    const listed = async () => {
      const s = await http('GET', '/v1/status', { key: acme.operator });
      expect(s.status, s.text).toBe(200);
      return s.json.nodes;
    };
    const expected = {
      node_id: 'acme/w-1',
      live: true,
      clock_offset_ms: -12.5,
      clock_uncertainty_ms: 0.75,
      info: {
        via: 'http',
        live_ms: 60_000,
        pool: 'gpu',
        handlers: ['train', 'eval'],
        concurrency: 4,
        in_flight: 3,
      },
    };
    expect(await listed()).toMatchObject([expected]);

    // A heartbeat (which knows no pool, no clock) a throttle window later keeps what was reported.
    db.clock.advance(6000);
    const hb = await http('POST', '/v1/workers/w-1/heartbeat', { key: acme.worker, body: { leases: [] } });
    expect(hb.status, hb.text).toBe(200);
    await rowsLanded(
      `SELECT count(*)::int AS n FROM nodes WHERE node_id = 'acme/w-1' AND last_seen_at = '${new Date(db.clock.nowMs()).toISOString()}'`,
      1,
    );
    expect(await listed()).toMatchObject([expected]);

    // Bad reports are refused whole.
    for (const body of [
      { pool: 'a/b' },
      { handlers: ['ok', 'not ok'] },
      { in_flight: -1 },
      { clock_offset_ms: 1e12 },
      { extra: 1 },
    ]) {
      expectError(await http('PUT', '/v1/workers/w-1', { key: acme.worker, body }), 400, 'validation_error');
    }
    expectError(await http('PUT', '/v1/workers/w-1', { key: acme.reader, body: {} }), 403, 'forbidden');
  });

  test("DELETE /v1/workers/{id} removes the caller's row only: not another tenant's, not a scheduler's", async () => {
    const t = db.clock.nowMs();
    await db.store.shardStep({ nodeId: 'sched-1', now: t - 100, leaseMs: LEASE_MS, info: SCHED_INFO });
    for (const key of [acme.worker, other.worker]) {
      for (const id of ['w-1', 'sched-1']) {
        const put = await http('PUT', `/v1/workers/${id}`, { key, body: { pool: 'default' } });
        expect(put.status, put.text).toBe(200);
      }
    }
    for (const id of ['w-1', 'sched-1', 'never-seen']) {
      const gone = await http('DELETE', `/v1/workers/${id}`, { key: acme.worker });
      expect(gone.status, gone.text).toBe(204);
      expect(gone.text).toBe('');
    }
    const { rows } = await db.pool.query('SELECT node_id FROM nodes ORDER BY node_id');
    expect(rows.map((r) => r.node_id)).toEqual(['other/sched-1', 'other/w-1', 'sched-1']);
    expectError(await http('DELETE', '/v1/workers/w-1', { key: other.reader }), 403, 'forbidden');
  });
});
