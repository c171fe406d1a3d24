/**
 * `tock notifications set|get|list|deliveries|delete` of the real `tock` binary (built `dist/`)
 * against a real API in this process (its allow-list `https://hooks.example.com/`): the secret
 * comes from the environment and is never printed, bad events are refused before any request, and
 * the delivery log shows a dead run's delivery.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';
import { runTock } from '../setup/proc.js';

const TENANT = 'acme';
const SECRET = 'a-secret-of-24-characters';

let db: TestDatabase;
let api: Api;
let adminKey: string;

const tock = (args: string[], env: Record<string, string | undefined> = {}) =>
  runTock(args, { DATABASE_URL: undefined, TOCK_URL: api.base, TOCK_KEY: adminKey, ...env });

async function ok(args: string[], env: Record<string, string | undefined> = {}): Promise<string> {
  const out = await tock(args, env);
  expect(out.stderr, `tock ${args.join(' ')}`).toBe('');
  expect(out.code, `tock ${args.join(' ')}`).toBe(0);
  return out.stdout;
}

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db, {
    quota: { perSecond: 1_000_000, burst: 1_000_000 },
    notificationAllow: ['https://hooks.example.com/'],
  });
  adminKey = (
    await db.store.createApiKey({ tenantId: TENANT, role: 'admin', name: 't', now: db.clock.nowMs() })
  ).secret;
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

test('set, get, list, deliveries and delete', async () => {
  const set = ['notifications', 'set', 'ops', '--webhook', 'https://hooks.example.com/tock'];
  const created = await ok([...set, '--events', 'run.dead,run.late', '--late-after', '10m'], {
    TOCK_NOTIFICATION_SECRET: SECRET,
  });
  expect(created).toMatch(/^created notification ops\n/);
  expect(created).toMatch(/^events\s+run\.dead, run\.late$/m);
  expect(created).toMatch(/^late_after\s+10m$/m);
  expect(created).toMatch(/^signed\s+yes/m);
  expect(created).not.toContain(SECRET);
  const json = JSON.parse(await ok(['notifications', 'get', 'ops', '--json']));
  expect(json).toMatchObject({ name: 'ops', secret_set: true, events: ['run.dead', 'run.late'] });
  expect(JSON.stringify(json)).not.toContain(SECRET);

  // A replace without the secret unsets it.
  expect(await ok([...set, '--events', 'run.dead'])).toMatch(/^signed\s+no$/m);
  const list = (await ok(['notifications', 'list'])).split('\n');
  expect(list[0]).toMatch(/^NAME\s+EVENTS\s+URL\s+SIGNED\s+UPDATED$/);
  expect(list[1]).toMatch(/^ops\s+run\.dead\s+https:\/\/hooks\.example\.com\/tock\s+no\s/);

  expect(await ok(['notifications', 'deliveries', 'ops'])).toBe('no deliveries\n');
  const now = db.clock.nowMs();
  await upsertJob(db.store, {
    tenantId: TENANT,
    job: { jobId: 'dies', schedule: '@every 1h', handler: 'h', maxAttempts: 1 },
    now,
  });
  await db.store.triggerRun({ tenantId: TENANT, jobId: 'dies', now });
  const [lease] = await db.store.claimRuns({ workerId: 'w', pool: 'default', max: 1, now });
  await db.store.failRun({ ...lease!, error: 'boom', now });
  const deliveries = (await ok(['notifications', 'deliveries', 'ops'])).split('\n');
  expect(deliveries[0]).toMatch(/^ID\s+EVENT\s+STATE\s+ATTEMPTS\s+STATUS\s+CREATED\s+LAST_ATTEMPT\s+ERROR$/);
  expect(deliveries[1]).toMatch(/^\d+\s+run\.dead\s+pending\s+0\s/);

  expect(await ok(['notifications', 'delete', 'ops'])).toBe('deleted notification ops\n');
  const gone = await tock(['notifications', 'get', 'ops']);
  expect(gone.code).toBe(1);
  expect(gone.stderr).toBe('tock: 404 not_found: notification "ops" does not exist\n');
});

test('an unknown event, or a URL outside the allow-list, is refused', async () => {
  const bad = await tock([
    'notifications',
    'set',
    'x',
    '--webhook',
    'https://hooks.example.com/',
    '--events',
    'run.ok',
  ]);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toContain('"run.ok" is not one of run.dead, job.misfired, run.late, worker.lost');
  const outside = await tock([
    'notifications',
    'set',
    'x',
    '--webhook',
    'https://evil.example/',
    '--events',
    'run.dead',
  ]);
  expect(outside.code).toBe(1);
  expect(outside.stderr).toContain("outside the server's notification allow-list");
  expect(await db.store.listNotifications({ tenantId: TENANT, limit: 10 })).toEqual({
    items: [],
    nextCursor: null,
  });
});
