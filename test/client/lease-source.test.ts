/**
 * `HttpLeaseSource`, the lease contract over HTTP, against the real API on loopback (the test
 * database's store and FakeClock): lease expiries converted to the worker's clock whatever the
 * skew, a handler's start converted back to the server's, results sent without the fields an older
 * server refuses, and the one worker id a source serves, fixed when it is made (its heartbeats and
 * reports go under it before any claim, and a claim for another worker is refused). Its retried
 * claims are in test/api/claim-retry.test.ts.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { listenForRuns, RunWakeups } from '../../src/api/index.js';
import { HttpLeaseSource } from '../../src/client/index.js';
import { FakeClock, type LeaseSource, SystemClock } from '../../src/core/index.js';
import type { PostgresStore } from '../../src/store/index.js';
import { Worker } from '../../src/worker/index.js';
import { client, keysFor, jobWithRuns as putJobWithRuns, type RoleKeys, until } from '../api/helpers.js';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { queueRuns } from '../setup/factories.js';

/** The store's default lease (the test store is built without `leaseMs`). */
const LEASE_MS = 30_000;

// The database is one implementation of the contract, this source the other (checked by tsc).
const _database: LeaseSource = null as unknown as PostgresStore;
const _http: LeaseSource = null as unknown as HttpLeaseSource;
void [_database, _http];

let db: TestDatabase;
let api: Api;
let keys: RoleKeys;
let stopListening: () => Promise<void>;

beforeAll(async () => {
  db = await setupDatabase();
  // As `tock server` wires it: one listener whose notifications wake the waiting long-polls (which
  // otherwise sleep on the test's clock, which only the tests move).
  const wakeups = new RunWakeups(db.clock);
  stopListening = await listenForRuns((w, l) => db.store.listen(w, l), wakeups, { warn() {}, info() {} });
  api = await startApi(db, { wakeups });
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await api?.close();
  await stopListening?.();
  await db?.teardown();
});

/** A job in its own pool and `n` triggered runs of it (distinct slots), oldest first. */
const jobWithRuns = (jobId: string, pool: string, n: number) =>
  putJobWithRuns(api.base, keys.operator, db.clock.nowMs(), { jobId, pool, n });

test("HttpLeaseSource puts the server's lease expiries on the worker's own clock, whatever the skew", async () => {
  const [runId] = await jobWithRuns('skewed', 'p-skew', 1);
  // The worker's clock is an hour behind the server's.
  const workerClock = new FakeClock(db.clock.nowMs() - 3_600_000);
  const store = new HttpLeaseSource({
    url: api.base,
    key: keys.worker,
    clock: workerClock,
    waitMs: 0,
    resultLingerMs: 0,
    workerId: 'w-skew',
  });
  const [claimed] = await store.claimRuns({ workerId: 'w-skew', pool: 'p-skew', max: 1 });
  expect(claimed!.runId).toBe(runId);
  // On the worker's clock the lease ends a whole lease from now, not an hour and a lease from now.
  expect(claimed!.leaseExpiresAt.getTime()).toBe(workerClock.nowMs() + LEASE_MS);
  db.clock.advance(10_000);
  workerClock.advance(10_000);
  const { renewed, lost } = await store.heartbeatRuns({ leases: [claimed!] });
  expect(lost).toEqual([]);
  expect(renewed).toEqual([{ runId, leaseExpiresAt: new Date(workerClock.nowMs() + LEASE_MS) }]);
  // A worker clock ahead of the server's: the same.
  workerClock.advance(7_200_000);
  const again = await store.heartbeatRuns({ leases: [claimed!] });
  expect(again.renewed[0]!.leaseExpiresAt.getTime()).toBe(workerClock.nowMs() + LEASE_MS);
  // A handler start goes the other way: on the server's clock, not the worker's hour-ahead one.
  const startedLocal = workerClock.nowMs();
  const startedOnServer = db.clock.nowMs();
  db.clock.advance(500);
  workerClock.advance(500);
  expect(await store.completeRuns({ leases: [{ ...claimed!, startedAt: startedLocal }] })).toMatchObject({
    completed: [runId],
  });
  expect((await db.store.getRun({ tenantId: 'acme', runId: runId! })).startedAt).toEqual(
    new Date(startedOnServer),
  );
});

test('a heartbeat renews more leases than the server takes in one request (1000): in requests of at most 1000', async () => {
  await jobWithRuns('many-leases', 'p-many', 0);
  await queueRuns(db.pool, {
    tenantId: 'acme',
    jobId: 'many-leases',
    pool: 'p-many',
    n: 1500,
    firstMs: db.clock.nowMs() - 3_600_000,
    stepMs: 1,
  });
  const workerClock = new FakeClock(db.clock.nowMs());
  const source = new HttpLeaseSource({
    url: api.base,
    key: keys.worker,
    clock: workerClock,
    waitMs: 0,
    resultLingerMs: 0,
    workerId: 'w-many',
  });
  const claimed = [];
  for (let i = 0; i < 3; i++)
    claimed.push(...(await source.claimRuns({ workerId: 'w-many', pool: 'p-many', max: 500 })));
  expect(claimed).toHaveLength(1500);
  db.clock.advance(10_000);
  workerClock.advance(10_000);
  const { renewed, lost } = await source.heartbeatRuns({ leases: claimed });
  expect(lost).toEqual([]);
  expect(renewed.map((r) => r.runId).sort()).toEqual(claimed.map((c) => c.runId).sort());
  for (const r of renewed) expect(r.leaseExpiresAt.getTime()).toBe(workerClock.nowMs() + LEASE_MS);
  // Renewed in the database too, every one of its claims.
  const { rows } = await db.pool.query(
    `SELECT count(*)::int AS claims, min(lease_expires_at) AS first FROM run_claims WHERE worker_id = 'w-many'`,
  );
  expect(rows[0].claims).toBeGreaterThan(0);
  expect(rows[0].first).toEqual(new Date(db.clock.nowMs() + LEASE_MS));
});

test('HttpLeaseSource talking to a server from before started_at, error_stack and batched results sends its results one by one without them', async () => {
  // What such a server does: no route for a batch of results, and its strict bodies refuse the
  // new fields as unknown.
  const bodies: Record<string, unknown>[] = [];
  let batches = 0;
  const older = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk) => {
      text += chunk;
    });
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/v1/runs/complete') {
        batches += 1;
        res.statusCode = 404;
        res.end(JSON.stringify({ error: { code: 'not_found', message: 'no route POST /v1/runs/complete' } }));
        return;
      }
      const body = JSON.parse(text) as Record<string, unknown>;
      bodies.push(body);
      res.setHeader('content-type', 'application/json');
      if ('started_at' in body || 'error_stack' in body) {
        res.statusCode = 400;
        res.end(
          JSON.stringify({
            error: { code: 'validation_error', message: 'body must NOT have additional properties' },
          }),
        );
      } else res.end(JSON.stringify({ state: body.status === 'failed' ? 'dead' : 'succeeded' }));
    });
  });
  await new Promise<void>((resolve) => older.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(older.address() as AddressInfo).port}`;
    const store = new HttpLeaseSource({
      url,
      key: 'k',
      clock: new FakeClock(db.clock.nowMs()),
      waitMs: 0,
      resultLingerMs: 0,
    });
    const lease = { runId: '00000000-0000-4000-8000-000000000001', leaseToken: 't' };
    expect(await store.completeRuns({ leases: [{ ...lease, startedAt: db.clock.nowMs() }] })).toEqual({
      completed: [lease.runId],
      lost: [],
    });
    expect(bodies.map((b) => 'started_at' in b)).toEqual([true, false]);
    // Known to be older now: the next results go without the fields at once.
    await store.failRun({ ...lease, error: 'boom', errorStack: 'Error: boom', startedAt: db.clock.nowMs() });
    expect(bodies).toHaveLength(3);
    expect(bodies[2]).toMatchObject({ status: 'failed', error: 'boom' });
    expect(bodies[2]).not.toHaveProperty('error_stack');
    // The batch route was asked once; known to be missing, it is not asked again.
    expect(batches).toBe(1);
  } finally {
    await new Promise((resolve) => older.close(resolve));
  }
});

test('a source serves the worker it was made for: heartbeats and reports go under it before any claim', async () => {
  const store = new HttpLeaseSource({
    url: api.base,
    key: keys.worker,
    clock: db.clock,
    workerId: 'w-bound',
  });
  expect(store.workerId).toBe('w-bound');
  // No claim yet: the report and the access check name the worker all the same.
  await store.checkAccess();
  await store.touchNode({ nodeId: 'w-bound', info: { pool: 'p-bound', concurrency: 3, in_flight: 0 } });
  const http = client(api.base);
  const nodes = (await http('GET', '/v1/status', { key: keys.operator })).json.nodes as { node_id: string }[];
  expect(nodes.map((n) => n.node_id)).toContain('acme/w-bound');
  expect(nodes.map((n) => n.node_id).filter((id) => id.startsWith('acme/worker'))).toEqual([]);
  // A claim for another worker is refused before anything is sent.
  await expect(store.claimRuns({ workerId: 'w-other', pool: 'p-bound', max: 1 })).rejects.toThrow(
    /serves worker w-bound, not w-other/,
  );
  await store.leaveNode({ nodeId: 'w-bound' });
});

test('a Worker takes its id from its source, and refuses a source bound to another worker', () => {
  const logger = pino({ level: 'silent' });
  const handlers = { h: () => {} };
  const bound = new HttpLeaseSource({ url: api.base, key: keys.worker, workerId: 'w-src' });
  expect(new Worker({ store: bound, clock: db.clock, logger, handlers }).workerId).toBe('w-src');
  expect(new Worker({ store: bound, clock: db.clock, logger, handlers, workerId: 'w-src' }).workerId).toBe(
    'w-src',
  );
  expect(() => new Worker({ store: bound, clock: db.clock, logger, handlers, workerId: 'w-else' })).toThrow(
    /differs from its lease source's/,
  );
  // Made without one, a source has an id of its own, in the worker's default form.
  expect(new HttpLeaseSource({ url: api.base }).workerId).toMatch(/^worker-[0-9a-f]{12}$/);
});

test('a worker on a long-polling source claims again at once after a short answer, not after its poll interval', async () => {
  // Found building the http benchmark: a claim that got fewer runs than it asked for made the
  // worker sleep its poll interval (1 s by default), as if nothing had waited for work, so runs
  // that became claimable meanwhile waited up to that long over HTTP.
  const http = client(api.base);
  await http('PUT', '/v1/jobs/lp', {
    key: keys.operator,
    body: { schedule: '@every 1h', handler: 'lp', pool: 'p-lp' },
  });
  const trigger = async (i: number) => {
    const a = await http('POST', '/v1/jobs/lp/runs', {
      key: keys.operator,
      body: { scheduled_for: new Date(db.clock.nowMs() - 1000 * (10 - i)).toISOString() },
    });
    expect(a.status, a.text).toBe(201);
    return a.json.run_id as string;
  };
  const finished: string[] = [];
  const worker = new Worker({
    store: new HttpLeaseSource({ url: api.base, key: keys.worker, waitMs: 5000, workerId: 'w-lp' }),
    clock: new SystemClock(),
    logger: pino({ level: 'silent' }),
    handlers: { lp: () => undefined },
    pool: 'p-lp',
    concurrency: 5,
    claimAheadMs: 0,
    // A poll interval no test waits out: only claiming again at once finds the second run.
    pollIntervalMs: 3_600_000,
  });
  worker.on('run:succeeded', (run) => finished.push(run.runId));
  const first = await trigger(1);
  worker.start();
  try {
    await until(() => finished.includes(first), 'the first run to succeed', 10_000);
    const second = await trigger(2);
    // Unfixed: the claim of the first run (1 of 5) left the worker asleep for an hour.
    await until(() => finished.includes(second), 'the second run to succeed', 5_000);
  } finally {
    await worker.stop(1000);
  }
});

/**
 * A stand-in for a Tock server on loopback: each request's JSON answer is `answer(path, body)`.
 * Runs `use` with its URL, then closes it.
 */
async function withFakeServer(
  answer: (path: string, body: string) => unknown,
  use: (url: string) => Promise<void>,
): Promise<void> {
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk) => {
      text += chunk;
    });
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(answer(req.url ?? '', text)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await use(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** A server's answer to `POST /v1/runs/complete`: every result done. */
const allDone = (body: string, serverNow: number) => ({
  results: (JSON.parse(body) as { results: { run_id: string }[] }).results.map((r) => ({
    run_id: r.run_id,
    outcome: 'done',
    status: 200,
    state: 'succeeded',
  })),
  server_time: new Date(serverNow).toISOString(),
});

/** One leased run as `POST /v1/leases` answers it, claimed at `serverNow` for `leaseMs`. */
const leasedRun = (serverNow: number, leaseMs: number) => ({
  run_id: '00000000-0000-4000-8000-000000000002',
  tenant_id: 't',
  job_id: 'j',
  handler: 'h',
  payload: {},
  pool: 'p',
  scheduled_for: new Date(serverNow).toISOString(),
  attempt: 1,
  max_attempts: 3,
  lease_token: '00000000-0000-4000-8000-00000000000a',
  lease_expires_at: new Date(serverNow + leaseMs).toISOString(),
  available_at: new Date(serverNow).toISOString(),
  timeout_seconds: null,
});

/** A heartbeat's answer that renews nothing, at `serverNow`. */
const noRenewals = (serverNow: number) => ({
  renewed: [],
  lost: [],
  server_time: new Date(serverNow).toISOString(),
});

const FIRST_LEASE = { runId: '00000000-0000-4000-8000-000000000001', leaseToken: 't' };

test("a long-poll's wait is not taken for clock skew: handler starts go to the server's clock with the least offset seen", async () => {
  // Found by the http benchmark: the offset was the last answer's server_time − when its request
  // left, and after a claim that waited 5 s on the server every start was sent 5 s late.
  const clock = new FakeClock(Date.parse('2026-12-04T10:00:00Z'));
  const bodies: Record<string, unknown>[] = [];
  const answer = (path: string, body: string) => {
    const now = clock.nowMs();
    // Answered after a 5 s wait on the server (the worker's clock is not moved: only the
    // answer's time says how long it took).
    if (path === '/v1/leases') return { runs: [], server_time: new Date(now + 5000).toISOString() };
    if (path.endsWith('/heartbeat')) return noRenewals(now);
    bodies.push(JSON.parse(body));
    return allDone(body, now);
  };
  await withFakeServer(answer, async (url) => {
    const source = new HttpLeaseSource({
      url,
      key: 'k',
      clock,
      waitMs: 5000,
      workerId: 'w-offset',
      resultLingerMs: 0,
    });
    await source.heartbeatRuns({ leases: [FIRST_LEASE] });
    await source.claimRuns({ workerId: 'w-offset', pool: 'p', max: 1 });
    const startedAt = clock.nowMs() - 100;
    const lease = { ...FIRST_LEASE, startedAt };
    expect(await source.completeRuns({ leases: [lease] })).toEqual({ completed: [lease.runId], lost: [] });
    // Unfixed: 5 s later, the claim's wait.
    expect(bodies[0]).toMatchObject({ results: [{ started_at: new Date(startedAt).toISOString() }] });
  });
});

test("a long-poll's wait does not shorten the leases it answers: expiries go to the worker's clock with the least offset seen", async () => {
  // Found by the console's browser test: a claim that waited on the server longer than the lease
  // came back with leases already run out on the worker's clock (dated from when the request
  // left), and the worker dropped their runs unstarted.
  const clock = new FakeClock(Date.parse('2026-12-05T10:00:00Z'));
  const answer = (path: string) => {
    if (path !== '/v1/leases') return noRenewals(clock.nowMs());
    // Claimed after an 8 s wait on the server (8 s pass on the worker too), with a 6 s lease.
    clock.advance(8000);
    const now = clock.nowMs();
    return { runs: [leasedRun(now, 6000)], server_time: new Date(now).toISOString() };
  };
  await withFakeServer(answer, async (url) => {
    const source = new HttpLeaseSource({
      url,
      key: 'k',
      clock,
      waitMs: 10_000,
      workerId: 'w-wait',
      resultLingerMs: 0,
    });
    // A quick round trip first: the offset is known to be at most 0.
    await source.heartbeatRuns({ leases: [FIRST_LEASE] });
    const [run] = await source.claimRuns({ workerId: 'w-wait', pool: 'p', max: 1 });
    // On the worker's clock the lease runs 6 s from the claim (8 s after the request left), not
    // 2 s before it; and never later than the server's expiry.
    expect(run!.leaseExpiresAt.getTime()).toBe(clock.nowMs() + 6000);
  });
});

test("a lease's expiry is never later than the real one when the offset moved since the latest answers (a clock stepped): the stale least bound is not used", async () => {
  const clock = new FakeClock(Date.parse('2026-12-05T10:00:00Z'));
  /** How far the server's clock is ahead of the worker's: 0, then stepped 60 s ahead. */
  let skew = 0;
  const answer = (path: string) => {
    const serverNow = clock.nowMs() + skew;
    if (path !== '/v1/leases') return noRenewals(serverNow);
    return { runs: [leasedRun(serverNow, 6000)], server_time: new Date(serverNow).toISOString() };
  };
  await withFakeServer(answer, async (url) => {
    const source = new HttpLeaseSource({
      url,
      key: 'k',
      clock,
      waitMs: 0,
      workerId: 'w-step',
      resultLingerMs: 0,
    });
    await source.heartbeatRuns({ leases: [FIRST_LEASE] });
    // The worker's clock is stepped back a minute (or the server's forward): the offset is 60 s now.
    skew = 60_000;
    const [run] = await source.claimRuns({ workerId: 'w-step', pool: 'p', max: 1 });
    // The server's reaper takes the lease back 6 s from now on the worker's clock; unfixed: 66 s.
    expect(run!.leaseExpiresAt.getTime()).toBeLessThanOrEqual(clock.nowMs() + 6000);
  });
});

test('a worker through a server loses nothing its handler reported just before it returned: the result carries it', async () => {
  const [runId] = await jobWithRuns('tail', 'p-tail', 1);
  const worker = new Worker({
    store: new HttpLeaseSource({ url: api.base, key: keys.worker, waitMs: 0, workerId: 'w-tail' }),
    clock: new SystemClock(),
    logger: pino({ level: 'silent' }),
    handlers: {
      'tail-handler': (ctx) => {
        ctx.progress(90, 'nearly');
        ctx.log('last words');
        return 'done';
      },
    },
    pool: 'p-tail',
    claimAheadMs: 0,
    pollIntervalMs: 3_600_000,
  });
  const done = new Promise<void>((resolve) => worker.once('run:succeeded', () => resolve()));
  worker.start();
  try {
    await worker.claimOnce();
    await done;
  } finally {
    await worker.stop(1000);
  }
  const run = await client(api.base)('GET', `/v1/runs/${runId}`, { key: keys.reader });
  expect(run.json.attempts[0]).toMatchObject({
    progress: 90,
    progress_message: 'nearly',
    logs: ['last words'],
  });
});

test('results handed in within the linger go in one request; with no linger, each turn sends its own', async () => {
  const batches: number[] = [];
  const answer = (_path: string, body: string) => {
    const done = allDone(body, Date.now());
    batches.push(done.results.length);
    return done;
  };
  const lease = (i: number) => ({ runId: `00000000-0000-4000-8000-00000000000${i}`, leaseToken: 't' });
  const spaced = async (source: HttpLeaseSource) => {
    const sent: Promise<unknown>[] = [];
    for (let i = 1; i <= 3; i++) {
      sent.push(source.completeRuns({ leases: [lease(i)] }));
      await new Promise((r) => setTimeout(r, 10));
    }
    return Promise.all(sent);
  };
  await withFakeServer(answer, async (url) => {
    const lingering = new HttpLeaseSource({ url, key: 'k', waitMs: 0, resultLingerMs: 200 });
    const answers = await spaced(lingering);
    expect(answers).toEqual([1, 2, 3].map((i) => ({ completed: [lease(i).runId], lost: [] })));
    expect(batches).toEqual([3]);
    batches.length = 0;
    await spaced(new HttpLeaseSource({ url, key: 'k', waitMs: 0, resultLingerMs: 0 }));
    expect(batches).toEqual([1, 1, 1]);
    expect(() => new HttpLeaseSource({ url, resultLingerMs: -1 })).toThrow(RangeError);
  });
});
