/**
 * Connections that die under Tock (a database restart, an idle-in-transaction timeout, an
 * administrator's terminate): the operation fails with an error, the process does not crash, and
 * the pool carries on with a fresh connection.
 */
import pino from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { FakeClock, TockError } from '../../src/core/index.js';
import { TickLoop } from '../../src/scheduler/index.js';
import {
  createPool,
  inTransaction,
  PostgresStore,
  type Store,
  type TickResult,
} from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

test('a connection killed inside a transaction rejects that transaction; the pool goes on', async () => {
  const pool = db.newPool(1);
  const admin = db.newPool(1);
  const failed = inTransaction(pool, async (client) => {
    const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
    // The server has closed the session: this statement cannot succeed.
    await client.query('SELECT 1');
  });
  await expect(failed).rejects.toThrow();
  // The dead client was destroyed, not returned: the single-connection pool still answers.
  const { rows } = await pool.query('SELECT 41 + 1 AS n');
  expect(rows[0].n).toBe(42);
});

test('a session ended by the idle-in-transaction timeout fails its transaction and crashes nothing', async () => {
  const { createPool } = await import('../../src/store/index.js');
  const pool = createPool(db.url, { schema: db.schema, max: 1, idleInTransactionMs: 200 });
  try {
    const failed = inTransaction(pool, async (client) => {
      await client.query('SELECT 1');
      // Frozen past the timeout (a paused process), then back.
      await new Promise((r) => setTimeout(r, 600));
      await client.query('SELECT 1');
    });
    await expect(failed).rejects.toThrow();
    expect((await pool.query('SELECT 1 AS n')).rows[0].n).toBe(1);
  } finally {
    await pool.end();
  }
});

test('a loop whose step fails keeps going without an error listener (it logs instead)', async () => {
  const clock = new FakeClock(T0);
  let calls = 0;
  const store = {
    tick: async (): Promise<TickResult> => {
      calls += 1;
      throw new Error('database is shutting down');
    },
  } as unknown as Store;
  const logged: string[] = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => logged.push(JSON.parse(line).msg) });
  const loop = new TickLoop({ store, clock, logger, intervalMs: 1000 });
  loop.start();
  await new Promise((r) => setImmediate(r));
  expect(calls).toBe(1);
  // The backoff after one failure is 2 s; the loop is still alive and retries.
  clock.advance(2000);
  await new Promise((r) => setImmediate(r));
  expect(calls).toBe(2);
  await loop.stop();
  expect(logged).toEqual(['tick failed; retrying with backoff', 'tick failed; retrying with backoff']);
});

test('a connection lost while checking a past one-shot is that error, not a validation error', async () => {
  const pool = createPool(db.url, { schema: db.schema, max: 1 });
  const store = new PostgresStore(pool);
  // A first upsert reads the shard count, so the next one's first statement is the check's read.
  await upsertJob(store, {
    tenantId: 't-lost',
    job: { jobId: 'warm', schedule: '@daily', handler: 'h' },
    now: T0,
  });
  await pool.end();
  const once = { jobId: 'once', schedule: `@at ${new Date(T0 - 3_600_000).toISOString()}`, handler: 'h' };
  for (const write of [
    () => upsertJob(store, { tenantId: 't-lost', job: once, now: T0 }),
    () => store.upsertJobs({ tenantId: 't-lost', jobs: [once], now: T0 }),
  ]) {
    const err = await write().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(TockError);
    expect((err as Error).message).toMatch(/pool/);
  }
});
