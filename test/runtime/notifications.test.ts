/**
 * Notifications wired end to end in one process (`createTock` with the API, the scheduler and a
 * worker, `notifyAllow` on loopback): a notification written through the API, a handler that fails
 * permanently, and the receiver gets the signed `run.dead` POST from the scheduler's notifier; a URL
 * outside `notifyAllow` is refused by the API.
 */
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTock, PermanentError, type Tock, TockApiError, TockClient } from '../../src/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';

const SECRET = 'a-secret-of-24-characters';
let db: TestDatabase;
let server: Server;
let t: Tock | null = null;

beforeAll(async () => {
  db = await setupDatabase();
});

afterAll(async () => {
  await t?.stop();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await db?.teardown();
});

test('a dead run reaches the receiver, signed, from the scheduler of a createTock', async () => {
  let arrived: (r: { headers: Record<string, unknown>; raw: string }) => void = () => {};
  const first = new Promise<{ headers: Record<string, unknown>; raw: string }>((resolve) => {
    arrived = resolve;
  });
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => {
      raw += c.toString('utf8');
    });
    req.on('end', () => {
      res.writeHead(204).end();
      arrived({ headers: req.headers, raw });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const hook = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

  t = createTock({
    database: { url: db.url, schema: db.schema, poolSize: 5 },
    logger: pino({ level: 'silent' }),
    scheduler: { tickMs: 50, shardLeaseMs: 2000 },
    worker: { pollIntervalMs: 50, graceMs: 5000 },
    api: { port: 0, auth: 'open' },
    notifyAllow: ['http://127.0.0.1:'],
    handlers: {
      fails: () => {
        throw new PermanentError('no');
      },
    },
  });
  await t.start();
  const client = new TockClient({ url: t.url! });
  const refused = await client
    .putNotification('elsewhere', { url: 'https://hooks.example.com/', events: ['run.dead'] })
    .catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(TockApiError);
  expect((refused as TockApiError).status).toBe(400);
  const put = await client.putNotification('ops', { url: hook, events: ['run.dead'], secret: SECRET });
  expect(put).toMatchObject({ created: true, secret_set: true });

  await t.upsertJobs([{ jobId: 'dies', schedule: '@every 1h', handler: 'fails' }]);
  const run = await t.trigger('dies');
  const got = await Promise.race([
    first,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no delivery within 10 s')), 10_000)),
  ]);
  const body = JSON.parse(got.raw);
  expect(body).toMatchObject({
    event: 'run.dead',
    notification: 'ops',
    data: { run_id: run.runId, job_id: 'dies' },
  });
  const mac = createHmac('sha256', SECRET)
    .update(`${got.headers['x-tock-timestamp']}.${got.raw}`)
    .digest('hex');
  expect(got.headers['x-tock-signature']).toBe(`sha256=${mac}`);
  const log = await client.listDeliveries('ops');
  expect(log.deliveries[0]).toMatchObject({ event: 'run.dead' });
});
