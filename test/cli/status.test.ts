/**
 * `tock status`: how the status answer reads as text (`formatStatus`, line by line), and the real
 * binary (built `dist/`) against an API listening in this process on the test database's store and
 * FakeClock: `--json` prints the answer as the server gave it, the plain form prints exactly
 * `formatStatus` of it, and a key without the permission fails with the server's 403.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { formatStatus } from '../../src/cli/format/status.js';
import type { StatusAnswer } from '../../src/client/index.js';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, upsertJob } from '../setup/factories.js';
import { runTock } from '../setup/proc.js';

const TENANT = 'acme';

/** A representative answer: two schedulers sharing the shards, one that died, one busy worker. */
const ANSWER: StatusAnswer = {
  server_time: '2026-01-01T00:10:00.000Z',
  scope: 'cluster',
  next_cursor: null,
  nodes: [
    {
      node_id: 'sched-a',
      role: 'scheduler',
      tenant_id: null,
      started_at: '2026-01-01T00:00:00.000Z',
      last_seen_at: '2026-01-01T00:09:59.000Z',
      live: true,
      clock_offset_ms: 1.2,
      clock_uncertainty_ms: 0.5,
      shards: 32,
      info: { pid: 101, url: 'http://10.0.0.1:8080', backlog: 3, live_ms: 10_000 },
    },
    {
      node_id: 'sched-b',
      role: 'scheduler',
      tenant_id: null,
      started_at: '2026-01-01T00:01:00.000Z',
      last_seen_at: '2026-01-01T00:09:59.750Z',
      live: true,
      clock_offset_ms: -0.4,
      clock_uncertainty_ms: 0.1,
      shards: 32,
      info: { backlog: 0, live_ms: 10_000 },
    },
    {
      node_id: 'sched-c',
      role: 'scheduler',
      tenant_id: null,
      started_at: '2026-01-01T00:00:00.000Z',
      last_seen_at: '2026-01-01T00:05:00.000Z',
      live: false,
      clock_offset_ms: null,
      clock_uncertainty_ms: null,
      shards: 0,
      info: {},
    },
    {
      node_id: 'worker-1',
      role: 'worker',
      tenant_id: null,
      started_at: '2026-01-01T00:02:00.000Z',
      last_seen_at: '2026-01-01T00:09:55.000Z',
      live: true,
      clock_offset_ms: 0,
      clock_uncertainty_ms: 2,
      shards: 0,
      info: { pool: 'default', concurrency: 8, in_flight: 2, live_ms: 15_000 },
    },
  ],
  shards: { count: 64, owned: 64, unowned: 0, by_owner: { 'sched-a': [], 'sched-b': [] } },
  backlog: {
    due_jobs: 5,
    ready_runs: 7,
    queues: [
      { pool: 'default', priority: 0, ready: 5 },
      { pool: 'mail', priority: 10, ready: 2 },
    ],
    queues_more: 0,
  },
};

describe('formatStatus', () => {
  test('a summary of shards and backlog, then one aligned line per node', () => {
    expect(formatStatus(ANSWER).split('\n')).toEqual([
      'shards   64: 64 under a live lease, 0 not',
      'backlog  5 jobs due and not materialised, 7 runs waiting for a worker',
      'ready    default p0: 5, mail p10: 2',
      '',
      'NODE      ROLE       LIVE  LAST SEEN  CLOCK OFFSET   SHARDS  DETAIL',
      'sched-a   scheduler  yes   1.0s ago   +1.2ms ±0.5ms  32      backlog 3, api http://10.0.0.1:8080',
      'sched-b   scheduler  yes   250ms ago  -0.4ms ±0.1ms  32      backlog 0',
      'sched-c   scheduler  NO    5m ago     -              0       backlog -',
      'worker-1  worker     yes   5.0s ago   +0.0ms ±2.0ms          pool default, 2/8 running, handlers any',
      '',
    ]);
  });

  test('unowned shards are called out; no nodes says so', () => {
    const empty: StatusAnswer = {
      server_time: '2026-01-01T00:00:00.000Z',
      scope: 'cluster',
      next_cursor: null,
      nodes: [],
      shards: { count: 64, owned: 40, unowned: 24, by_owner: {} },
      backlog: { due_jobs: 0, ready_runs: 0, queues: [], queues_more: 0 },
    };
    expect(formatStatus(empty)).toBe(
      [
        'shards   64: 40 under a live lease, 24 not (nobody ticks those now)',
        'backlog  0 jobs due and not materialised, 0 runs waiting for a worker',
        '',
        'no nodes have registered',
        '',
      ].join('\n'),
    );
  });

  test('one job and one run are singular ("1 run", not "1 runs")', () => {
    const one: StatusAnswer = {
      server_time: '2026-01-01T00:00:00.000Z',
      scope: 'cluster',
      next_cursor: null,
      nodes: [],
      shards: { count: 1, owned: 1, unowned: 0, by_owner: {} },
      backlog: {
        due_jobs: 1,
        ready_runs: 1,
        queues: [{ pool: 'default', priority: 0, ready: 1 }],
        queues_more: 3,
      },
    };
    expect(formatStatus(one).split('\n').slice(1, 3)).toEqual([
      'backlog  1 job due and not materialised, 1 run waiting for a worker',
      'ready    default p0: 1, and 3 more',
    ]);
  });

  test("a tenant's answer: no shards or backlog, its remote workers", () => {
    const tenant: StatusAnswer = {
      server_time: '2026-01-01T00:10:00.000Z',
      scope: 'tenant',
      next_cursor: null,
      nodes: [
        {
          node_id: 'acme/w-1',
          role: 'worker',
          tenant_id: 'acme',
          started_at: '2026-01-01T00:02:00.000Z',
          last_seen_at: '2026-01-01T00:09:58.000Z',
          live: true,
          clock_offset_ms: null,
          clock_uncertainty_ms: null,
          shards: 0,
          info: { via: 'http', pool: 'default', live_ms: 60_000 },
        },
      ],
    };
    expect(formatStatus(tenant).split('\n')).toEqual([
      "scope    this tenant's remote workers (a cluster-admin key shows the cluster)",
      '',
      'NODE      ROLE    LIVE  LAST SEEN  CLOCK OFFSET  SHARDS  DETAIL',
      'acme/w-1  worker  yes   2.0s ago   -                     pool default, -/- running, handlers any',
      '',
    ]);
  });

  test('runs no live worker serves are named after the summary; a worker lists its handlers and tenants', () => {
    const worker = ANSWER.nodes[3]!;
    const answer: StatusAnswer = {
      ...ANSWER,
      nodes: [
        {
          ...worker,
          info: {
            pool: 'default',
            concurrency: 8,
            in_flight: 2,
            handlers: ['a', 'b', 'c', 'd', 'e', 'f', 'g'],
            tenants: ['acme'],
          },
        },
      ],
      unserved: {
        runs: 4,
        groups: 3,
        items: [
          {
            tenant_id: 'acme',
            pool: 'default',
            handler: 'report',
            runs: 3,
            since: '2026-01-01T00:05:00.000Z',
          },
          { tenant_id: 'beta', pool: 'gpu', handler: 'train', runs: 1, since: '2026-01-01T00:09:58.000Z' },
        ],
      },
    };
    expect(formatStatus(answer).split('\n')).toEqual([
      'shards   64: 64 under a live lease, 0 not',
      'backlog  5 jobs due and not materialised, 7 runs waiting for a worker',
      'ready    default p0: 5, mail p10: 2',
      '',
      'unserved 4 runs wait for a handler no live worker serves (start a worker with that pool and handler, for that tenant):',
      'TENANT  POOL     HANDLER  RUNS  WAITING',
      'acme    default  report   3     5m',
      'beta    gpu      train    1     2.0s',
      '… and 1 more group of runs',
      '',
      'NODE      ROLE    LIVE  LAST SEEN  CLOCK OFFSET   SHARDS  DETAIL',
      'worker-1  worker  yes   5.0s ago   +0.0ms ±2.0ms          pool default, 2/8 running, handlers a,b,c,d,e,… (7), tenants acme',
      '',
    ]);
  });
});

describe('tock status (the binary)', () => {
  let db: TestDatabase;
  let api: Api;
  let clusterKey: string;
  let operatorKey: string;
  let workerKey: string;

  const tock = (args: string[], key: string) =>
    runTock(args, { DATABASE_URL: undefined, TOCK_SCHEMA: undefined, TOCK_URL: api.base, TOCK_KEY: key });

  beforeAll(async () => {
    db = await setupDatabase();
    api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
    const now = db.clock.nowMs();
    const key = (role: 'cluster-admin' | 'operator' | 'worker') =>
      db.store.createApiKey({ tenantId: TENANT, role, name: role, now }).then((k) => k.secret);
    clusterKey = await key('cluster-admin');
    operatorKey = await key('operator');
    workerKey = await key('worker');

    await db.store.shardStep({
      nodeId: 'sched-1',
      now: now - 1500,
      leaseMs: 10_000,
      clock: { offsetMs: 0.75, uncertaintyMs: 0.25 },
      info: { backlog: 1, url: 'http://127.0.0.1:8080', live_ms: 10_000 },
    });
    await db.store.touchNode({
      nodeId: 'worker-1',
      role: 'worker',
      now: now - 4000,
      info: { pool: 'default', concurrency: 2, in_flight: 0, live_ms: 15_000 },
    });
    await upsertJob(db.store, { tenantId: TENANT, job: job({ jobId: 'due' }), now: now - 20_000 });
  });

  afterAll(async () => {
    await api?.close();
    await db?.teardown();
  });

  test('--json prints the answer; the plain form prints formatStatus of it (a cluster-admin key)', async () => {
    const json = await tock(['status', '--json'], clusterKey);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const answer = JSON.parse(json.stdout) as StatusAnswer;
    const now = db.clock.nowMs();
    expect(answer.server_time).toBe(new Date(now).toISOString());
    expect(answer.nodes.map((n) => [n.node_id, n.role, n.live, n.shards])).toEqual([
      ['sched-1', 'scheduler', true, 64],
      ['worker-1', 'worker', true, 0],
    ]);
    expect(answer.shards).toEqual({
      count: 64,
      owned: 64,
      unowned: 0,
      by_owner: { 'sched-1': Array.from({ length: 64 }, (_, i) => i) },
    });
    expect(answer.backlog).toEqual({ due_jobs: 1, ready_runs: 0, queues: [], queues_more: 0 });

    const plain = await tock(['status'], clusterKey);
    expect(plain.stderr).toBe('');
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe(formatStatus(answer));
    expect(plain.stdout).toContain(
      'sched-1   scheduler  yes   1.5s ago   +0.8ms ±0.3ms  64      backlog 1, api http://127.0.0.1:8080\n',
    );
  });

  test("a tenant operator's key: its remote workers only, every page of them", async () => {
    const now = db.clock.nowMs();
    // More than one page (500 nodes) of this tenant's remote workers, and one of another tenant.
    for (let i = 0; i < 520; i++) {
      await db.store.touchRemoteWorker({
        tenantId: TENANT,
        workerId: `w-${String(i).padStart(3, '0')}`,
        now: now - i,
        info: { via: 'http', pool: 'default', live_ms: 60_000 },
        cap: 1000,
      });
    }
    await db.store.touchRemoteWorker({ tenantId: 'other', workerId: 'spy', now, info: {}, cap: 1000 });
    const json = await tock(['status', '--json'], operatorKey);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const answer = JSON.parse(json.stdout) as StatusAnswer;
    expect(answer.scope).toBe('tenant');
    expect(answer.next_cursor).toBeNull();
    expect(answer.shards).toBeUndefined();
    expect(answer.backlog).toBeUndefined();
    expect(answer.nodes).toHaveLength(520);
    expect(new Set(answer.nodes.map((n) => n.tenant_id))).toEqual(new Set([TENANT]));
    expect(json.stdout).not.toContain('sched-1');
    expect(json.stdout).not.toContain('spy');
    await db.pool.query('DELETE FROM nodes WHERE tenant_id IS NOT NULL');
  });

  test('a worker key: exit 1 with the 403', async () => {
    const out = await tock(['status'], workerKey);
    expect(out.code).toBe(1);
    expect(out.stdout).toBe('');
    expect(out.stderr).toMatch(/^tock: 403 forbidden: /);
  });
});
