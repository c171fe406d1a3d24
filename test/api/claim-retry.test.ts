/**
 * Retry-safe claims over real HTTP (issue 14, item 10). A claim whose answer never reaches its
 * worker must not strand its runs for a whole lease: (a) the worker retries with the same
 * `claim_id`, to the same server or another on the same database, and gets the same runs and
 * tokens, with nothing new claimed; (b) a server whose client went away while its claim ran gives
 * the runs back without spending an attempt; (c) `HttpLeaseSource`, whose first claim's answer a
 * loopback proxy drops after the server sent it, retries with the claim id and gets those leases.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect, createServer, type Server } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { CLAIM_RETRIES, HttpLeaseSource } from '../../src/client/index.js';
import type { ClaimedRun } from '../../src/store/index.js';
import * as C from '../../src/store/queries/claims.js';
import { Worker } from '../../src/worker/index.js';
import { LEASE_TOO_SHORT } from '../../src/worker/worker.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { once } from '../setup/events.js';
import { pauseAfter, uniqueId } from '../setup/factories.js';
import { type Api, client, keysFor, type RoleKeys, startApi, until } from './helpers.js';

let db: TestDatabase;
let api: Api;
let second: Api;
let keys: RoleKeys;
let other: RoleKeys;
const iso = (ms: number) => new Date(ms).toISOString();

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  // "Any server": a second app on the same database.
  second = await startApi(db, { store: db.newStore() });
  keys = await keysFor(db, 'acme');
  other = await keysFor(db, 'globex');
});

afterAll(async () => {
  // After the aborted request the client's pool leaves a connection open that never sends a request
  // (Node counts it active until its headers timeout): end it rather than wait for that.
  api?.app.server.closeAllConnections();
  await api?.close();
  await second?.close();
  await db?.teardown();
});

/** `n` ready runs of a fresh job (of acme, or of the tenant of `by`) in a pool of their own; returns the pool. */
async function readyPool(n: number, by: RoleKeys = keys, pool = uniqueId('p')): Promise<string> {
  const http = client(api.base);
  const jobId = uniqueId('j');
  const put = await http('PUT', `/v1/jobs/${jobId}`, {
    key: by.operator,
    body: { schedule: '@every 1h', handler: 'h', pool },
  });
  expect(put.status, put.text).toBe(200);
  for (let i = 0; i < n; i++) {
    const t = await http('POST', `/v1/jobs/${jobId}/runs`, {
      key: by.operator,
      body: { scheduled_for: iso(db.clock.nowMs() - (n - i) * 1000) },
    });
    expect(t.status, t.text).toBe(201);
  }
  return pool;
}

const leases = (runs: { run_id: string; lease_token: string; lease_expires_at: string }[]) =>
  runs.map((r) => [r.run_id, r.lease_token, r.lease_expires_at]);

async function rowsOf(sql: string, params: unknown[]) {
  return (await db.pool.query(sql, params)).rows;
}

test('a claim retried with its claim_id, to the same or another server, gets the same runs and tokens; nothing new is claimed', async () => {
  const pool = await readyPool(4);
  const claim_id = randomUUID();
  const body = { worker_id: 'w-retry', pool, max: 2, claim_id };
  const first = await client(api.base)('POST', '/v1/leases', { key: keys.worker, body });
  expect(first.status, first.text).toBe(200);
  expect(first.json.runs).toHaveLength(2);
  db.clock.advance(1000);
  for (const base of [api.base, second.base]) {
    const again = await client(base)('POST', '/v1/leases', { key: keys.worker, body: { ...body, max: 3 } });
    expect(again.status, again.text).toBe(200);
    expect(leases(again.json.runs)).toEqual(leases(first.json.runs));
    expect(again.json.server_time).toBe(iso(db.clock.nowMs()));
  }
  expect(await rowsOf('SELECT lease_token FROM run_claims WHERE claim_id = $1', [claim_id])).toHaveLength(1);
  expect(await rowsOf('SELECT run_id FROM run_queue WHERE pool = $1', [pool])).toHaveLength(2);

  // Another tenant's worker key with the same claim id gets nothing of acme's.
  const thief = await client(second.base)('POST', '/v1/leases', { key: other.worker, body });
  expect(thief.status, thief.text).toBe(200);
  expect(thief.json.runs).toEqual([]);

  // A claim_id that is not a uuid is a 400.
  const bad = await client(api.base)('POST', '/v1/leases', {
    key: keys.worker,
    body: { ...body, claim_id: 'not-a-uuid' },
  });
  expect(bad.status).toBe(400);
});

test('a claim id another tenant, or another worker of the tenant, already used claims their own runs (F6)', async () => {
  // One pool name, runs of both tenants in it. Before migration 0010 the claim id was unique across
  // tenants and workers: the second and third claims hit the unique index and answered no runs.
  const pool = await readyPool(2);
  await readyPool(2, other, pool);
  const claim_id = randomUUID();
  const body = { worker_id: 'w-shared', pool, max: 1, claim_id };
  const http = client(api.base);
  const acme = await http('POST', '/v1/leases', { key: keys.worker, body });
  expect(acme.status, acme.text).toBe(200);
  expect(acme.json.runs).toHaveLength(1);
  const globex = await http('POST', '/v1/leases', { key: other.worker, body });
  expect(globex.status, globex.text).toBe(200);
  expect(globex.json.runs).toHaveLength(1);
  const acmeTwin = await http('POST', '/v1/leases', {
    key: keys.worker,
    body: { ...body, worker_id: 'w-twin' },
  });
  expect(acmeTwin.status, acmeTwin.text).toBe(200);
  expect(acmeTwin.json.runs).toHaveLength(1);
  const ids = [acme, globex, acmeTwin].map((a) => a.json.runs[0].run_id);
  expect(new Set(ids).size).toBe(3);
  // Each run is its claimer's tenant's.
  const tenantOf = async (runId: string) =>
    (await rowsOf('SELECT tenant_id FROM runs WHERE run_id = $1', [runId]))[0]?.tenant_id;
  expect(await Promise.all(ids.map(tenantOf))).toEqual(['acme', 'globex', 'acme']);
  // Each retry (max 2 now) answers its own claim, same run and token, and claims nothing more.
  for (const [key, b, first] of [
    [keys.worker, body, acme],
    [other.worker, body, globex],
    [keys.worker, { ...body, worker_id: 'w-twin' }, acmeTwin],
  ] as const) {
    const again = await http('POST', '/v1/leases', { key, body: { ...b, max: 2 } });
    expect(again.status, again.text).toBe(200);
    expect(leases(again.json.runs)).toEqual(leases(first.json.runs));
  }
  expect(await rowsOf('SELECT run_id FROM run_queue WHERE pool = $1', [pool])).toHaveLength(1);
});

test.each([
  ['with', randomUUID()],
  ['without', undefined],
])(
  'a client that goes away while its claim (%s a claim id) runs: the runs are queued again, attempt unchanged, not stranded',
  async (_, claimId) => {
    const pool = await readyPool(2);
    let closed = 0;
    const onRequest = (_req: IncomingMessage, res: ServerResponse) => {
      // The same event the route watches: the response closing before it was sent.
      res.once('close', () => {
        if (!res.writableFinished) closed += 1;
      });
    };
    api.app.server.on('request', onRequest);
    const gone = new AbortController();
    // The barrier: the claim has run (and committed) but the route has not answered yet. The client
    // disconnects now, and the route sees its connection closed before it sends the answer.
    pauseAfter(
      db.pool,
      (sql) => sql === C.runClaim,
      async () => {
        gone.abort();
        await until(() => closed > 0, 'the server to see the client go');
        await new Promise<void>((r) => setImmediate(r));
      },
    );
    const answer = await fetch(`${api.base}/v1/leases`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.worker}`, 'content-type': 'application/json' },
      body: JSON.stringify({ worker_id: 'w-gone', pool, max: 2, claim_id: claimId }),
      signal: gone.signal,
    }).catch((err: unknown) => err);
    expect(answer).toBeInstanceOf(Error);
    api.app.server.off('request', onRequest);
    // The route finishes after the client left: wait (bounded) until it has given the runs back.
    const queued = async () => (await rowsOf('SELECT run_id FROM run_queue WHERE pool = $1', [pool])).length;
    const deadline = Date.now() + 5000;
    while ((await queued()) < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(await queued()).toBe(2);
    const runs = await rowsOf(
      `SELECT r.state, r.attempt, a.outcome, a.error FROM run_states r JOIN runs x USING (run_id)
     LEFT JOIN attempts a ON a.run_id = r.run_id WHERE x.pool = $1 ORDER BY r.run_id`,
      [pool],
    );
    expect(runs).toEqual([
      { state: 'pending', attempt: 1, outcome: 'released', error: 'client gone' },
      { state: 'pending', attempt: 1, outcome: 'released', error: 'client gone' },
    ]);
    expect(await rowsOf('SELECT 1 FROM run_claims WHERE worker_id = $1', ['w-gone'])).toEqual([]);
  },
);

/**
 * A loopback TCP proxy to `target` that forwards requests, but for the first `drops` connections
 * whose request is a claim, cuts the connection as soon as the answer comes back instead of
 * delivering it.
 */
async function lossyProxy(
  target: string,
  drops = 1,
): Promise<{ url: string; dropped: () => number; close: () => void }> {
  const port = Number(new URL(target).port);
  let dropped = 0;
  const server: Server = createServer((down) => {
    const up = connect(port, '127.0.0.1');
    let claim = false;
    down.on('data', (chunk) => {
      if (dropped < drops && chunk.toString('latin1').startsWith('POST /v1/leases')) claim = true;
      up.write(chunk);
    });
    up.on('data', (chunk) => {
      if (claim) {
        dropped += 1;
        down.destroy();
        up.destroy();
        return;
      }
      down.write(chunk);
    });
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy is not listening on TCP');
  return { url: `http://127.0.0.1:${address.port}`, dropped: () => dropped, close: () => server.close() };
}

test('HttpLeaseSource: a claim whose answer is lost is retried with its claim id and gets the same leases; nothing stranded', async () => {
  const pool = await readyPool(2);
  const proxy = await lossyProxy(api.base);
  try {
    const store = new HttpLeaseSource({
      url: proxy.url,
      key: keys.worker,
      waitMs: 0,
      clock: db.clock,
      resultLingerMs: 0,
      workerId: 'w-lossy',
    });
    const claimed = await store.claimRuns({ workerId: 'w-lossy', pool, max: 2 });
    expect(proxy.dropped()).toBe(1);
    // The one claim the lost answer was for, and no other: its runs and tokens are the worker's.
    const claims = await rowsOf('SELECT lease_token, run_ids FROM run_claims WHERE worker_id = $1', [
      'w-lossy',
    ]);
    expect(claims).toHaveLength(1);
    expect(claimed).toHaveLength(2);
    expect(new Set(claimed.map((r) => r.leaseToken))).toEqual(new Set([claims[0].lease_token]));
    expect(claimed.map((r) => r.runId).sort()).toEqual([...claims[0].run_ids].sort());
    expect(await rowsOf('SELECT run_id FROM run_queue WHERE pool = $1', [pool])).toEqual([]);
    // The worker holds them: it completes both under their leases.
    const done = await store.completeRuns({
      leases: claimed.map((r) => ({ runId: r.runId, leaseToken: r.leaseToken })),
    });
    expect(done.lost).toEqual([]);
    const states = await rowsOf('SELECT state FROM run_states WHERE run_id = ANY($1::uuid[])', [
      claimed.map((r) => r.runId),
    ]);
    expect(states).toEqual([{ state: 'succeeded' }, { state: 'succeeded' }]);
    expect(await rowsOf('SELECT 1 FROM run_claims WHERE worker_id = $1', ['w-lossy'])).toEqual([]);
  } finally {
    proxy.close();
  }
});

/**
 * A loopback TCP proxy to `target` that holds the answer to the first claim until `deliver()`:
 * `held` resolves once the server has answered (the claim has been made).
 */
async function slowProxy(target: string) {
  const port = Number(new URL(target).port);
  let deliver!: () => void;
  const delivered = new Promise<void>((r) => {
    deliver = r;
  });
  let answered!: () => void;
  const held = new Promise<void>((r) => {
    answered = r;
  });
  let claims = 0;
  const server: Server = createServer((down) => {
    const up = connect(port, '127.0.0.1');
    let hold = false;
    down.on('data', (chunk) => {
      if (chunk.toString('latin1').startsWith('POST /v1/leases') && claims++ === 0) hold = true;
      up.write(chunk);
    });
    up.on('data', (chunk) => {
      if (!hold) return void down.write(chunk);
      answered();
      void delivered.then(() => down.write(chunk));
    });
    down.on('close', () => up.destroy());
    up.on('close', () => void delivered.then(() => down.destroy()));
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy is not listening on TCP');
  return { url: `http://127.0.0.1:${address.port}`, held, deliver, close: () => server.close() };
}

test('HttpLeaseSource gives a claim up after CLAIM_RETRIES retries whose answers are lost too', async () => {
  const pool = await readyPool(1);
  const proxy = await lossyProxy(api.base, Number.POSITIVE_INFINITY);
  try {
    // The system clock: the retries after the first wait a little (backoff), for real.
    const store = new HttpLeaseSource({ url: proxy.url, key: keys.worker, waitMs: 0, workerId: 'w-lost' });
    await expect(store.claimRuns({ workerId: 'w-lost', pool, max: 1 })).rejects.toThrow(/other side closed/);
    expect(proxy.dropped()).toBe(1 + CLAIM_RETRIES);
    // Every retry was answered with the one claim: nothing more was claimed.
    expect(await rowsOf('SELECT retried FROM run_claims WHERE worker_id = $1', ['w-lost'])).toEqual([
      { retried: true },
    ]);
  } finally {
    proxy.close();
  }
});

test('a Worker over HTTP whose claim answer arrives after the lease expired does not start the run', async () => {
  const pool = await readyPool(1);
  const proxy = await slowProxy(api.base);
  const calls: string[] = [];
  const worker = new Worker({
    store: new HttpLeaseSource({
      url: proxy.url,
      key: keys.worker,
      waitMs: 0,
      clock: db.clock,
      resultLingerMs: 0,
    }),
    clock: db.clock,
    logger: pino({ level: 'silent' }),
    handlers: { h: (ctx) => void calls.push(ctx.runId) },
    pool,
    pollIntervalMs: 3_600_000,
    heartbeatCheckMs: 3_600_000,
  });
  try {
    const dropped = once<[ClaimedRun, string]>(worker, 'run:dropped');
    worker.start();
    // The server has claimed and answered; the answer is on its way, slowly: the lease runs out.
    await proxy.held;
    db.clock.advance(31_000);
    proxy.deliver();
    const [, reason] = await dropped;
    expect(reason).toBe(LEASE_TOO_SHORT);
    expect(calls).toEqual([]);
  } finally {
    await worker.stop(0);
    proxy.close();
  }
});
