/**
 * The notification outbox in the store: a dead letter writes no delivery when no notification
 * wants it (nothing for the tenant, or another event), one per notification that does; two nodes
 * claiming at once never take the same delivery, a claimed one is off the others until its lease
 * runs out, and an attempt's outcome is recorded only at the attempt that was claimed.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ConflictError, MAX_NOTIFICATIONS_PER_TENANT, validateNotification } from '../../src/core/index.js';
import { notificationsLateLock } from '../../src/store/queries/notifications.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { countRows, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
const ALLOW = ['https://hooks.example.com/'];

beforeAll(async () => {
  db = await setupDatabase();
});

afterAll(async () => {
  await db.teardown();
});

async function put(tenantId: string, name: string, events: string[]) {
  const lateAfter = events.includes('run.late') ? '1m' : undefined;
  const notification = validateNotification({ url: 'https://hooks.example.com/x', events, lateAfter }, ALLOW);
  await db.store.putNotification({ tenantId, name, notification, now: T0 });
}

/** `n` runs of tenant `t` dead-lettered at `now` (one attempt each). */
async function deadRuns(t: string, n: number, now: number, error = 'boom') {
  await upsertJob(db.store, {
    tenantId: t,
    job: { jobId: 'dies', schedule: '@every 1h', handler: 'h', maxAttempts: 1 },
    now: T0,
  });
  for (let i = 0; i < n; i++)
    await db.store.triggerRun({ tenantId: t, jobId: 'dies', scheduledFor: now + i, now });
  const leases = await db.store.claimRuns({ workerId: 'w', pool: 'default', max: n, now: now + n });
  for (const l of leases) await db.store.failRun({ ...l, error, now: now + n });
}

test('a dead letter writes a delivery only for the notifications that want it', async () => {
  await put('quiet', 'misfires', ['job.misfired']);
  await deadRuns('quiet', 2, T0);
  await deadRuns('nobody', 2, T0);
  expect(await countRows(db.pool, 'notification_deliveries')).toBe(0);
  await put('loud', 'a', ['run.dead']);
  await put('loud', 'b', ['run.dead', 'worker.lost']);
  await deadRuns('loud', 3, T0);
  expect(await countRows(db.pool, 'notification_deliveries')).toBe(6);
});

test('nodes claiming at once take different deliveries; a claim holds them until its lease runs out', async () => {
  const other = db.newStore();
  const now = T0 + 60_000;
  const [a, b] = await Promise.all([
    db.store.claimDeliveries({ now, limit: 4, leaseMs: 10_000 }),
    other.claimDeliveries({ now, limit: 4, leaseMs: 10_000 }),
  ]);
  const ids = [...a!, ...b!].map((d) => d.deliveryId);
  expect(ids).toHaveLength(6);
  expect(new Set(ids).size).toBe(6);
  expect(await db.store.claimDeliveries({ now: now + 9_999, limit: 10, leaseMs: 10_000 })).toEqual([]);
  // The first node records its attempt; the second died: its deliveries come due again, attempt 2.
  for (const d of a!)
    expect(
      await db.store.finishDelivery({
        deliveryId: d.deliveryId,
        attempt: 1,
        state: 'delivered',
        status: 200,
        error: null,
        nextAttemptAt: null,
        now,
      }),
    ).toBe(true);
  const again = await db.store.claimDeliveries({ now: now + 10_000, limit: 10, leaseMs: 10_000 });
  expect(again.map((d) => d.deliveryId).sort()).toEqual(b!.map((d) => d.deliveryId).sort());
  expect(again.every((d) => d.attempt === 2)).toBe(true);
  // The dead node's late record of attempt 1 is refused.
  const late = b![0]!;
  const stale = {
    deliveryId: late.deliveryId,
    attempt: 1,
    status: 200,
    error: null,
    nextAttemptAt: null,
    now,
  };
  expect(await db.store.finishDelivery({ ...stale, state: 'delivered' })).toBe(false);
});

test('a scan for late runs holding its notifications does not hold up a dead letter of their tenant', async () => {
  await put('scanned', 'late', ['run.late', 'run.dead']);
  const scanner = await db.newPool(1).connect();
  try {
    // The scan's lock, held as a scan holds it until it commits.
    await scanner.query('BEGIN');
    const locked = await scanner.query(notificationsLateLock, [null, null, 100]);
    expect(locked.rows.map((r) => r.tenant_id)).toContain('scanned');
    const dead = deadRuns('scanned', 1, T0 + 3_600_000);
    const waited = await Promise.race([
      dead.then(() => 'written'),
      new Promise((resolve) => setTimeout(() => resolve('blocked'), 3000)),
    ]);
    expect(waited).toBe('written');
    await scanner.query('COMMIT');
  } finally {
    scanner.release();
  }
  expect(await countRows(db.pool, 'notification_deliveries', "tenant_id = 'scanned'")).toBe(1);
});

test('a tenant holds at most MAX_NOTIFICATIONS_PER_TENANT notifications, created at once or not: each dead letter writes one delivery per notification', async () => {
  const names = Array.from({ length: MAX_NOTIFICATIONS_PER_TENANT + 10 }, (_, i) => `n${i}`);
  const results = await Promise.allSettled(names.map((name) => put('many', name, ['run.dead'])));
  const refused = results.filter((r) => r.status === 'rejected');
  expect(refused).toHaveLength(10);
  for (const r of refused) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(ConflictError);
  expect(await countRows(db.pool, 'notifications', "tenant_id = 'many'")).toBe(MAX_NOTIFICATIONS_PER_TENANT);
  // At the cap, one held may still be replaced; another tenant is not counted.
  const held = (await db.store.listNotifications({ tenantId: 'many', limit: 1 })).items[0]!;
  await put('many', held.name, ['run.dead', 'worker.lost']);
  await put('few', 'one', ['run.dead']);
});

test("a run.dead delivery carries at most 1000 characters of the run's error (the run keeps it whole)", async () => {
  await put('wordy', 'dead', ['run.dead']);
  await deadRuns('wordy', 1, T0, 'x'.repeat(60_000));
  const { rows } = await db.pool.query(
    "SELECT length(data->>'error') AS n FROM notification_deliveries WHERE tenant_id = 'wordy'",
  );
  expect(rows.map((r) => r.n)).toEqual([1000]);
});
