/**
 * createTock({ jobs }) with jobs defined in code (`defineJob`), through the library's entry point:
 * start() upserts them (and starting again with the same definitions changes nothing), the worker
 * serves their handlers with the payload of the schema's type, a trigger whose payload fails the
 * schema is refused with nothing written, and a name defined twice is refused before anything
 * starts.
 */
import pino from 'pino';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { createTock, defineJob, type Tock, Type, ValidationError } from '../../src/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { once } from '../setup/events.js';
import { attemptRows, countRows, runRow } from '../setup/factories.js';

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
const seen: { to: string; count: number }[] = [];

const Report = Type.Object({ to: Type.String(), count: Type.Integer({ minimum: 1 }) });
const report = defineJob({
  id: 'report',
  schedule: '@every 1h',
  timezone: 'Europe/Berlin',
  priority: 3,
  payload: Report,
  defaultPayload: { to: 'ops', count: 1 },
  handler: (ctx) => {
    seen.push(ctx.payload);
    return `sent ${ctx.payload.count} to ${ctx.payload.to.toUpperCase()}`;
  },
});
const ping = defineJob({ id: 'ping', schedule: '@every 1h', handler: () => 'pong' });

function tock(jobs = [report, ping]): Tock {
  const t = createTock({
    database: { url: db.url, schema: db.schema, poolSize: 5 },
    logger,
    scheduler: false,
    worker: { pollIntervalMs: 50, graceMs: 5000 },
    jobs,
  });
  running.push(t);
  return t;
}

async function jobRows() {
  const { rows } = await db.pool.query(
    'SELECT job_id, handler, payload, payload_schema, priority, version, updated_at FROM jobs ORDER BY job_id',
  );
  return rows;
}

test('start() upserts the definitions and the worker runs their handlers with the typed payload', async () => {
  seen.length = 0;
  const t = tock();
  await t.start();
  const rows = await jobRows();
  expect(rows.map((r) => [r.job_id, r.handler, r.priority, r.version])).toEqual([
    ['ping', 'ping', 0, 1],
    ['report', 'report', 3, 1],
  ]);
  expect(rows[1].payload).toEqual({ to: 'ops', count: 1 });
  expect(rows[1].payload_schema).toEqual(JSON.parse(JSON.stringify(Report)));
  expect(rows[0].payload_schema).toBeNull();

  const worker = t.worker!;
  const done = once<[{ runId: string }]>(worker, 'run:succeeded', () => true, 10_000);
  const run = await t.trigger('report', { payload: { to: 'dev', count: 2 } });
  await done;
  expect(seen).toEqual([{ to: 'dev', count: 2 }]);
  expect(await runRow(db.pool, run.runId)).toMatchObject({ state: 'succeeded' });
  expect((await attemptRows(db.pool, run.runId))[0]).toMatchObject({ output: 'sent 2 to DEV' });
}, 20_000);

test('starting again with the same definitions changes nothing', async () => {
  const first = tock();
  await first.start();
  const before = await jobRows();
  await first.stop();
  const again = tock();
  await again.start();
  expect(await jobRows()).toEqual(before);
  // A changed definition is an update.
  await again.stop();
  const changed = defineJob({ id: 'ping', schedule: '@every 2h', handler: () => 'pong' });
  await tock([report, changed]).start();
  const rows = await jobRows();
  expect(rows.map((r) => [r.job_id, r.version])).toEqual([
    ['ping', 2],
    ['report', 1],
  ]);
}, 20_000);

test("a trigger whose payload fails the definition's schema is refused and writes nothing", async () => {
  const t = tock();
  await t.start();
  const err = await t.trigger('report', { payload: { to: 'dev', count: 0 } }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ValidationError);
  expect((err as ValidationError).details.field).toBe('payload.count');
  await expect(t.trigger('report', { payload: { to: 'dev' } })).rejects.toThrow(
    /^payload\.count does not match/,
  );
  expect(await countRows(db.pool, 'runs')).toBe(0);
  // The job without a schema takes anything.
  await t.trigger('ping', { payload: ['any', 1] });
  expect(await countRows(db.pool, 'runs')).toBe(1);
});

test('a name defined twice, or something that is no definition, is refused before anything starts', async () => {
  const database = { url: db.url, schema: db.schema };
  expect(() => createTock({ database, jobs: [report], handlers: { report: () => {} } })).toThrow(
    'handler "report" of job "report" is defined twice: also in handlers',
  );
  expect(() => createTock({ database, jobs: [report, report] })).toThrow('job "report" is defined twice');
  expect(() => createTock({ database, jobs: [{ id: 'x' } as never] })).toThrow(
    'jobs[0] is not a job definition',
  );
  expect(await countRows(db.pool, 'jobs')).toBe(0);
});
