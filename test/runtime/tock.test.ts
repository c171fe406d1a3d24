/**
 * createTock(), through the library's entry point, on the test database (a schema of this file's
 * own): a registered job's handler runs on the in-process worker and its success is recorded;
 * stop() lets a running handler finish and records its result before it resolves; input is
 * validated before anything is written; the API serves the same jobs; a pool of the caller's is
 * migrated and left open; a clock of the caller's is the time of every operation.
 */
import pino from 'pino';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import {
  createTock,
  FakeClock,
  type Handler,
  NotFoundError,
  type Tock,
  TockClient,
  type TockOptions,
  ValidationError,
} from '../../src/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once } from '../setup/events.js';
import { countRows, runRow } from '../setup/factories.js';

let db: TestDatabase;
const running: Tock[] = [];

beforeAll(async () => {
  db = await setupDatabase();
});

afterEach(async () => {
  for (const t of running.splice(0)) await t.stop();
  await db.pool.query('DELETE FROM runs');
  await db.pool.query('DELETE FROM jobs');
});

afterAll(async () => {
  await db?.teardown();
});

const logger = pino({ level: 'silent' });

/** A Tock on this file's schema, stopped after the test; fast ticks and polls. */
function tock(o: Partial<TockOptions> = {}): Tock {
  const t = createTock({
    database: { url: db.url, schema: db.schema, poolSize: 5 },
    logger,
    scheduler: { tickMs: 50, shardLeaseMs: 2000 },
    worker: o.handlers ? { pollIntervalMs: 50, graceMs: 5000 } : false,
    ...o,
  });
  running.push(t);
  return t;
}

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

test('a registered job runs on the in-process worker and its success is recorded', async () => {
  const seen: unknown[] = [];
  const hello: Handler = ({ payload, jobId }) => {
    seen.push({ jobId, payload });
    return 'hello';
  };
  const t = tock({ handlers: { hello } });
  await t.start();
  expect(t.url).toBeNull();
  const changes = await t.upsertJobs([
    { jobId: 'hello', schedule: '@every 1s', handler: 'hello', payload: { name: 'world' } },
  ]);
  expect(changes).toEqual([{ jobId: 'hello', change: 'created' }]);
  // Registering the same definition again changes nothing.
  expect(
    await t.upsertJobs([
      { jobId: 'hello', schedule: '@every 1s', handler: 'hello', payload: { name: 'world' } },
    ]),
  ).toEqual([{ jobId: 'hello', change: 'unchanged' }]);

  const worker = t.worker!;
  const [run] = await once<[{ runId: string }]>(worker, 'run:succeeded', () => true, 10_000);
  expect(seen[0]).toEqual({ jobId: 'hello', payload: { name: 'world' } });
  const row = await runRow(db.pool, run.runId);
  expect(row).toMatchObject({ job_id: 'hello', state: 'succeeded' });
}, 20_000);

test('stop() drains: a running handler finishes and its result is recorded before stop resolves', async () => {
  const release = gate();
  const t = tock({
    scheduler: false,
    handlers: {
      slow: async () => {
        await release.promise;
        return 'finished';
      },
    },
  });
  await t.start();
  await t.upsertJobs([{ jobId: 'slow', schedule: '@every 1h', handler: 'slow' }]);
  const worker = t.worker!;
  const started = once(worker, 'run:started', () => true, 10_000);
  const run = await t.trigger('slow');
  await started;

  let stopped = false;
  const stopping = t.stop().then(() => {
    stopped = true;
  });
  // Not before the handler has finished: the worker stopped claiming and waits for it.
  await new Promise((resolve) => setImmediate(resolve));
  expect(stopped).toBe(false);
  release.open();
  await stopping;
  expect(await runRow(db.pool, run.runId)).toMatchObject({ state: 'succeeded' });
  await expect(t.upsertJobs([{ jobId: 'x', schedule: '@daily', handler: 'slow' }])).rejects.toThrow(
    /not running/,
  );
  // Stopping again is harmless.
  await t.stop();
}, 20_000);

test('input is validated before anything is written', async () => {
  const t = tock({ scheduler: false });
  await expect(t.upsertJobs([{ jobId: 'a', schedule: '@daily', handler: 'h' }])).rejects.toThrow(/start\(\)/);
  await t.start();
  expect(t.worker).toBeNull();
  const err = await t
    .upsertJobs([
      { jobId: 'good', schedule: '@daily', handler: 'h' },
      { jobId: 'bad', schedule: 'every tuesday', handler: 'h' },
    ])
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ValidationError);
  expect((err as ValidationError).message).toMatch(/^jobs\[1\]: /);
  expect((err as ValidationError).details).toMatchObject({ index: 1 });
  const twice = await t
    .upsertJobs([
      { jobId: 'same', schedule: '@daily', handler: 'h' },
      { jobId: 'same', schedule: '@hourly', handler: 'h' },
    ])
    .catch((e: unknown) => e);
  expect((twice as ValidationError).message).toBe('jobs[1]: job_id "same" appears twice');
  await expect(t.upsertJobs([])).rejects.toBeInstanceOf(ValidationError);
  expect(await countRows(db.pool, 'jobs')).toBe(0);
  await expect(t.trigger('no/such job')).rejects.toBeInstanceOf(ValidationError);
  await expect(t.trigger('missing')).rejects.toBeInstanceOf(NotFoundError);
  expect(() => createTock({ database: db.url, worker: true })).toThrow(/needs handlers/);
  // An API without keys is for this machine only, as tock dev's.
  for (const host of ['0.0.0.0', '::', '10.1.2.3'])
    expect(() => createTock({ database: db.url, api: { port: 0, host, auth: 'open' } })).toThrow(
      /loopback only/,
    );
  expect(() => createTock({ database: db.url, api: { port: 0, host: '0.0.0.0' } })).not.toThrow();
});

test('with api, the HTTP API serves the same jobs', async () => {
  const t = tock({ scheduler: false, api: { port: 0, auth: 'open' } });
  await t.start();
  expect(t.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  await t.upsertJobs([{ jobId: 'nightly', schedule: '0 3 * * *', handler: 'h' }]);
  const client = new TockClient({ url: t.url! });
  const job = await client.getJob('nightly');
  expect(job).toMatchObject({ job_id: 'nightly', schedule: '0 3 * * *' });
});

test("a pool of the caller's is migrated and left open; a clock of the caller's is the time of every write", async () => {
  const pool = db.newPool(2);
  const clock = new FakeClock(T0);
  const t = tock({ database: { pool }, clock, scheduler: false });
  await t.start();
  await t.upsertJobs([{ jobId: 'once', schedule: '@every 1h', handler: 'h' }]);
  const run = await t.trigger('once', { scheduledFor: new Date(T0 + 5000) });
  expect(run.scheduledFor).toEqual(new Date(T0 + 5000));
  expect(run.createdAt).toEqual(new Date(T0));
  const own = await t.trigger('once', { scheduledFor: new Date(T0 + 6000), payload: { only: 'this run' } });
  expect(own.payload).toEqual({ only: 'this run' });
  await expect(t.trigger('once', { payload: { bad: 'x\u0000' } })).rejects.toBeInstanceOf(ValidationError);
  await t.stop();
  const { rows } = await pool.query('SELECT count(*)::int AS n FROM runs');
  expect(rows[0].n).toBe(2);
});

test('agingStepMs is the step of the sort keys it writes; a step out of 1s-1d is refused before anything starts', async () => {
  for (const agingStepMs of [0, 999, 86_400_001])
    expect(() => createTock({ database: db.url, agingStepMs })).toThrow(/^agingStepMs must be from 1s to 1d/);
  const clock = new FakeClock(T0);
  const t = tock({ clock, scheduler: false, agingStepMs: 5000 });
  await t.start();
  await t.upsertJobs([{ jobId: 'aged', schedule: '@every 1h', handler: 'h', priority: 4 }]);
  const run = await t.trigger('aged', { scheduledFor: new Date(T0) });
  const { rows } = await db.pool.query('SELECT sort_key FROM runs WHERE run_id = $1', [run.runId]);
  expect(rows[0].sort_key).toEqual(new Date(T0 - 4 * 5000));
});
