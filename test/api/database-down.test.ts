/**
 * The database unreachable (issue 14, item 11): every route that needs it answers 503
 * `unavailable` with `Retry-After` and the envelope, not 500 `internal`; the auth hook too (it
 * reads the key). The store is a real `PostgresStore` on a real pool pointed at (a) a loopback port
 * where nothing listens (connection refused) and (b) a socket that accepts and never answers, as a
 * paused PostgreSQL does (the pool's connection timeout).
 */
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import type pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type App, buildApp, Metrics } from '../../src/api/index.js';
import { DATABASE_RETRY_AFTER_S } from '../../src/api/plugins/errors.js';
import { FakeClock } from '../../src/core/index.js';
import { createPool, PostgresStore } from '../../src/store/index.js';
import { type Answer, client, expectError } from './helpers.js';

const RUN = '00000000-0000-4000-8000-000000000000';
const KEY = `tock_${'a'.repeat(40)}`;

/** Every /v1 route that reads or writes the database, with a valid body. */
const ROUTES: [string, string, unknown?][] = [
  ['GET', '/v1/jobs'],
  ['PUT', '/v1/jobs', { jobs: [{ job_id: 'a', schedule: '@every 1m', handler: 'h' }] }],
  ['GET', '/v1/jobs/a'],
  ['PUT', '/v1/jobs/a', { schedule: '@every 1m', handler: 'h' }],
  ['DELETE', '/v1/jobs/a'],
  ['POST', '/v1/jobs/a/runs', {}],
  ['POST', '/v1/jobs/a/backfill', { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' }],
  ['GET', '/v1/runs'],
  ['GET', `/v1/runs/${RUN}`],
  ['POST', `/v1/runs/${RUN}/replay`, {}],
  ['POST', '/v1/leases', { worker_id: 'w', wait_ms: 1000 }],
  ['POST', `/v1/runs/${RUN}/heartbeat`, { lease_token: RUN }],
  ['POST', `/v1/runs/${RUN}/complete`, { lease_token: RUN, status: 'succeeded' }],
  ['POST', `/v1/runs/${RUN}/release`, { lease_token: RUN }],
  ['POST', '/v1/workers/w/heartbeat', { leases: [{ run_id: RUN, lease_token: RUN }] }],
  ['GET', '/v1/keys'],
  ['POST', '/v1/keys', { role: 'reader' }],
  ['GET', '/v1/status'],
];

function expectUnavailable(a: Answer, what: string): void {
  expect([what, a.status]).toEqual([what, 503]);
  expectError(a, 503, 'unavailable');
  expect(a.headers.get('retry-after')).toBe(String(DATABASE_RETRY_AFTER_S));
}

async function appOn(pool: pg.Pool, auth: 'keys' | 'open'): Promise<{ app: App; base: string }> {
  const app = await buildApp({
    store: new PostgresStore(pool),
    clock: new FakeClock(Date.UTC(2026, 0, 1)),
    logger: pino({ level: 'silent' }),
    metrics: new Metrics({ processMetrics: false }),
    auth,
    readiness: async () => ({ database: false, migrations: false }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  return { app, base: `http://127.0.0.1:${address.port}` };
}

/** A loopback port nobody listens on: bound, then closed. */
async function deadPort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as { port: number }).port;
  s.close();
  await once(s, 'close');
  return port;
}

describe.each([
  ['nothing listens (connection refused)', 'refused'],
  ['the server accepts and never answers (paused)', 'paused'],
] as const)('database unreachable: %s', (_name, kind) => {
  let silent: Server | undefined;
  const held: Socket[] = [];
  let pool: pg.Pool;
  const apps: App[] = [];
  let keyed: ReturnType<typeof client>;
  let open: ReturnType<typeof client>;

  beforeAll(async () => {
    let port: number;
    if (kind === 'refused') port = await deadPort();
    else {
      silent = createServer((socket) => held.push(socket));
      silent.listen(0, '127.0.0.1');
      await once(silent, 'listening');
      port = (silent.address() as { port: number }).port;
    }
    pool = createPool(`postgres://postgres@127.0.0.1:${port}/test`, { connectionTimeoutMs: 300 });
    const k = await appOn(pool, 'keys');
    const o = await appOn(pool, 'open');
    apps.push(k.app, o.app);
    keyed = client(k.base);
    open = client(o.base);
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await pool?.end().catch(() => {});
    for (const s of held) s.destroy();
    silent?.close();
  });

  test('the auth hook (it reads the key) answers 503 on every route', async () => {
    for (const [method, path, body] of ROUTES) {
      expectUnavailable(await keyed(method, path, { key: KEY, body }), `${method} ${path}`);
    }
  });

  test('every route in open mode (no key to read) answers 503', async () => {
    for (const [method, path, body] of ROUTES) {
      expectUnavailable(await open(method, path, { body }), `${method} ${path}`);
    }
  });

  test('health still answers, and readiness says not ready', async () => {
    expect((await open('GET', '/healthz')).status).toBe(200);
    expect((await open('GET', '/readyz')).status).toBe(503);
  });
});
