/**
 * GET /v1/status over real HTTP, as a cluster-admin sees it: the nodes (schedulers registered by
 * their shard steps, workers by their heartbeats) with liveness judged by each node's own window,
 * the shard ownership (live leases only), and the cluster's backlog. What a tenant's operator
 * sees is in `nodes.test.ts`.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { TockClient } from '../../src/client/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, upsertJob } from '../setup/factories.js';
import { type Answer, type Api, client, expectError, keysFor, type RoleKeys, startApi } from './helpers.js';

const LEASE_MS = 10_000;
const iso = (ms: number) => new Date(ms).toISOString();
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

beforeEach(async () => {
  await db.pool.query(
    'TRUNCATE jobs, job_successes, runs, attempts, attempt_progress, run_queue, run_claims',
  );
  await db.pool.query('DELETE FROM nodes');
  await db.pool.query('UPDATE shards SET owner = NULL, lease_expires_at = NULL, epoch = 0');
  // A fresh instant on the 10 s grid for each test.
  db.clock.set(Math.ceil((db.clock.nowMs() + 60_000) / 10_000) * 10_000);
});

const SCHED_1_INFO = {
  pid: 4242,
  url: 'http://10.0.0.5:8080',
  backlog: 2,
  live_ms: LEASE_MS,
  extra: { a: [1, 'x'] },
};

/**
 * Around `t`: two schedulers splitting the shards 32/32, a busy worker, a worker not seen for
 * longer than its window, and one without a window of its own (30 s by default) seen 29 s ago.
 */
async function registerNodes(t: number): Promise<void> {
  const step = (nodeId: string, now: number, extra: object = {}) =>
    db.store.shardStep({ nodeId, now, leaseMs: LEASE_MS, ...extra });
  const one = { clock: { offsetMs: 1.5, uncertaintyMs: 0.25 }, info: SCHED_1_INFO };
  await step('sched-1', t - 1000, one);
  await step('sched-2', t - 500, { info: { live_ms: LEASE_MS } });
  expect((await step('sched-1', t - 200, one)).released).toEqual(range(32, 64));
  expect((await step('sched-2', t - 100, { info: { live_ms: LEASE_MS } })).taken).toEqual(range(32, 64));
  await db.store.touchNode({
    nodeId: 'worker-1',
    role: 'worker',
    now: t - 2000,
    clock: { offsetMs: -3, uncertaintyMs: 1 },
    info: { pool: 'default', concurrency: 4, in_flight: 1, live_ms: 15_000 },
  });
  await db.store.touchNode({
    nodeId: 'worker-gone',
    role: 'worker',
    now: t - 20_000,
    info: { live_ms: 15_000 },
  });
  await db.store.touchNode({ nodeId: 'worker-plain', role: 'worker', now: t - 29_000 });
}

/**
 * Four due jobs (one of another tenant), two not counted; two runs claimable now (of priority 50
 * and 0), one later.
 */
async function addBacklog(t: number): Promise<void> {
  for (const jobId of ['a', 'b', 'c', 'paused']) {
    const priority = jobId === 'a' ? 50 : 0;
    await upsertJob(db.store, { tenantId: 'acme', job: job({ jobId, priority }), now: t - 30_000 });
  }
  await db.store.pauseJob({ tenantId: 'acme', jobId: 'paused', now: t - 30_000 });
  await upsertJob(db.store, {
    tenantId: 'acme',
    job: job({ jobId: 'later', schedule: `@at ${iso(t + 60_000)}` }),
    now: t - 30_000,
  });
  await upsertJob(db.store, { tenantId: 'other', job: job({ jobId: 'x' }), now: t - 30_000 });
  await db.store.triggerRun({ tenantId: 'acme', jobId: 'a', scheduledFor: t - 1000, now: t });
  await db.store.triggerRun({ tenantId: 'acme', jobId: 'b', scheduledFor: t + 5000, now: t });
  await db.store.triggerRun({ tenantId: 'other', jobId: 'x', scheduledFor: t - 1, now: t });
}

describe('GET /v1/status', () => {
  test('nodes, shard ownership and backlog, for a cluster-admin', async () => {
    const t = db.clock.nowMs();
    await registerNodes(t);
    await addBacklog(t);

    const a = await http('GET', '/v1/status', { key: keys['cluster-admin'] });
    expect(a.status, a.text).toBe(200);
    expect(a.headers.get('content-type')).toMatch(/^application\/json/);
    expect(a.json).toEqual({
      server_time: iso(t),
      scope: 'cluster',
      next_cursor: null,
      nodes: [
        // By role, then newest first.
        {
          node_id: 'sched-2',
          role: 'scheduler',
          tenant_id: null,
          started_at: iso(t - 500),
          last_seen_at: iso(t - 100),
          live: true,
          clock_offset_ms: null,
          clock_uncertainty_ms: null,
          shards: 32,
          info: { live_ms: LEASE_MS },
        },
        {
          node_id: 'sched-1',
          role: 'scheduler',
          tenant_id: null,
          started_at: iso(t - 1000),
          last_seen_at: iso(t - 200),
          live: true,
          clock_offset_ms: 1.5,
          clock_uncertainty_ms: 0.25,
          shards: 32,
          info: SCHED_1_INFO,
        },
        {
          node_id: 'worker-1',
          role: 'worker',
          tenant_id: null,
          started_at: iso(t - 2000),
          last_seen_at: iso(t - 2000),
          live: true,
          clock_offset_ms: -3,
          clock_uncertainty_ms: 1,
          shards: 0,
          info: { pool: 'default', concurrency: 4, in_flight: 1, live_ms: 15_000 },
        },
        {
          node_id: 'worker-gone',
          role: 'worker',
          tenant_id: null,
          started_at: iso(t - 20_000),
          last_seen_at: iso(t - 20_000),
          live: false,
          clock_offset_ms: null,
          clock_uncertainty_ms: null,
          shards: 0,
          info: { live_ms: 15_000 },
        },
        {
          node_id: 'worker-plain',
          role: 'worker',
          tenant_id: null,
          started_at: iso(t - 29_000),
          last_seen_at: iso(t - 29_000),
          live: true,
          clock_offset_ms: null,
          clock_uncertainty_ms: null,
          shards: 0,
          info: {},
        },
      ],
      shards: {
        count: 64,
        owned: 64,
        unowned: 0,
        by_owner: { 'sched-1': range(0, 32), 'sched-2': range(32, 64) },
      },
      backlog: {
        due_jobs: 4,
        ready_runs: 2,
        queues: [
          { pool: 'default', priority: 0, ready: 1 },
          { pool: 'default', priority: 50, ready: 1 },
        ],
        queues_more: 0,
      },
      // worker-1 runs any handler of pool default for every tenant.
      unserved: { runs: 0, groups: 0, items: [] },
    });

    // The typed client reads the same answer.
    expect(await new TockClient({ url: api.base, key: keys['cluster-admin'] }).status()).toEqual(a.json);
    // Pages of two nodes, by role then newest first, chained by next_cursor.
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Answer = await http('GET', `/v1/status?limit=2${cursor ? `&cursor=${cursor}` : ''}`, {
        key: keys['cluster-admin'],
      });
      expect(page.status, page.text).toBe(200);
      expect(page.json.nodes.length).toBeLessThanOrEqual(2);
      expect(page.json.shards).toEqual(a.json.shards);
      ids.push(...page.json.nodes.map((n: { node_id: string }) => n.node_id));
      cursor = page.json.next_cursor;
    } while (cursor !== null);
    expect(ids).toEqual(a.json.nodes.map((n: { node_id: string }) => n.node_id));
    expectError(
      await http('GET', '/v1/status?limit=501', { key: keys['cluster-admin'] }),
      400,
      'validation_error',
    );
    expectError(
      await http('GET', '/v1/status?cursor=nope', { key: keys['cluster-admin'] }),
      400,
      'validation_error',
    );
  });

  test('once the leases run out and the nodes fall silent: no shard is owned and nobody is live', async () => {
    const t = db.clock.nowMs();
    await registerNodes(t);

    // sched-1's leases run out at t + 9800, sched-2's at t + 9900.
    db.clock.set(t + 9850);
    const half = (await http('GET', '/v1/status', { key: keys['cluster-admin'] })).json;
    expect(half.shards).toEqual({
      count: 64,
      owned: 32,
      unowned: 32,
      by_owner: { 'sched-2': range(32, 64) },
    });
    expect(half.nodes.map((n: { node_id: string; shards: number }) => [n.node_id, n.shards])).toEqual([
      ['sched-2', 32],
      ['sched-1', 0],
      ['worker-1', 0],
      ['worker-gone', 0],
      ['worker-plain', 0],
    ]);

    db.clock.set(t + 31_000);
    const later = await http('GET', '/v1/status', { key: keys['cluster-admin'] });
    expect(later.status, later.text).toBe(200);
    expect(later.json.server_time).toBe(iso(t + 31_000));
    expect(later.json.shards).toEqual({ count: 64, owned: 0, unowned: 64, by_owner: {} });
    expect(later.json.nodes.map((n: { node_id: string; live: boolean }) => [n.node_id, n.live])).toEqual([
      ['sched-2', false],
      ['sched-1', false],
      ['worker-1', false],
      ['worker-gone', false],
      ['worker-plain', false],
    ]);
    expect(later.json.backlog).toEqual({ due_jobs: 0, ready_runs: 0, queues: [], queues_more: 0 });
  });

  test('an empty cluster: no nodes, every shard unowned', async () => {
    const a = await http('GET', '/v1/status', { key: keys['cluster-admin'] });
    expect(a.status, a.text).toBe(200);
    expect(a.json).toEqual({
      server_time: iso(db.clock.nowMs()),
      scope: 'cluster',
      next_cursor: null,
      nodes: [],
      shards: { count: 64, owned: 0, unowned: 64, by_owner: {} },
      backlog: { due_jobs: 0, ready_runs: 0, queues: [], queues_more: 0 },
      unserved: { runs: 0, groups: 0, items: [] },
    });
  });

  test('runs waiting for a handler no live worker serves are named: pool, handler and tenant must all match', async () => {
    const t = db.clock.nowMs();
    // A worker on the database restricted to acme, running h1 in pool default.
    await db.store.touchNode({
      nodeId: 'w-acme',
      role: 'worker',
      now: t - 1000,
      info: { pool: 'default', handlers: ['h1'], tenants: ['acme'], live_ms: 15_000 },
    });
    // One that ran h3, silent for longer than its window.
    await db.store.touchNode({
      nodeId: 'w-gone',
      role: 'worker',
      now: t - 20_000,
      info: { pool: 'default', handlers: ['h3'], live_ms: 15_000 },
    });
    // A remote worker of beta running h2 in pool gpu (reported through PUT /v1/workers/{id}).
    const beta = await keysFor(db, 'beta');
    const reported = await http('PUT', '/v1/workers/gpu-1', {
      key: beta.worker,
      body: { pool: 'gpu', handlers: ['h2'], concurrency: 2, in_flight: 0 },
    });
    expect(reported.status, reported.text).toBe(200);
    let n = 0;
    const waiting = async (tenantId: string, handler: string, pool: string, ageMs: number) => {
      const jobId = `j${n++}`;
      await upsertJob(db.store, { tenantId, job: job({ jobId, handler, pool }), now: t - 60_000 });
      await db.store.triggerRun({ tenantId, jobId, scheduledFor: t - ageMs, now: t });
    };
    await waiting('acme', 'h1', 'default', 9000); // served by w-acme
    await waiting('acme', 'h3', 'default', 8000); // w-gone is not live
    await waiting('acme', 'h3', 'default', 7000);
    await waiting('other', 'h1', 'default', 6000); // w-acme serves acme only
    await waiting('beta', 'h2', 'gpu', 5000); // served by gpu-1
    await waiting('beta', 'h2', 'default', 4000); // gpu-1 claims from gpu
    await waiting('other', 'h2', 'gpu', 3000); // gpu-1 is beta's
    await waiting('acme', 'h9', 'default', -5000); // not claimable yet: not waiting

    const a = await http('GET', '/v1/status', { key: keys['cluster-admin'] });
    expect(a.status, a.text).toBe(200);
    expect(a.json.unserved).toEqual({
      runs: 5,
      groups: 4,
      items: [
        { tenant_id: 'acme', pool: 'default', handler: 'h3', runs: 2, since: iso(t - 8000) },
        { tenant_id: 'other', pool: 'default', handler: 'h1', runs: 1, since: iso(t - 6000) },
        { tenant_id: 'beta', pool: 'default', handler: 'h2', runs: 1, since: iso(t - 4000) },
        { tenant_id: 'other', pool: 'gpu', handler: 'h2', runs: 1, since: iso(t - 3000) },
      ],
    });
    const gpu = a.json.nodes.find((x: { node_id: string }) => x.node_id === 'beta/gpu-1');
    expect(gpu.info).toMatchObject({ pool: 'gpu', handlers: ['h2'], concurrency: 2, in_flight: 0 });

    // A tenant's operator sees its own tenant's only.
    const own = await http('GET', '/v1/status', { key: keys.operator });
    expect(own.json.unserved).toEqual({
      runs: 2,
      groups: 1,
      items: [{ tenant_id: 'acme', pool: 'default', handler: 'h3', runs: 2, since: iso(t - 8000) }],
    });
    // Once a worker for h3 reports, acme's runs are served.
    await db.store.touchNode({
      nodeId: 'w-h3',
      role: 'worker',
      now: t,
      info: { pool: 'default', live_ms: 15_000 },
    });
    expect((await http('GET', '/v1/status', { key: keys.operator })).json.unserved.runs).toBe(0);
    expect((await http('GET', '/v1/status', { key: keys['cluster-admin'] })).json.unserved.runs).toBe(1);
  });

  test('worker and reader keys are refused (403); no key is 401', async () => {
    await registerNodes(db.clock.nowMs());
    expectError(await http('GET', '/v1/status', { key: keys.worker }), 403, 'forbidden');
    expectError(await http('GET', '/v1/status', { key: keys.reader }), 403, 'forbidden');
    expectError(await http('GET', '/v1/status'), 401, 'unauthorized');
  });
});
