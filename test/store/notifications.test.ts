/**
 * The notification outbox in the store: a dead letter writes no delivery when no notification
 * wants it (nothing for the tenant, or another event), one per notification that does; two nodes
 * claiming at once never take the same delivery, a claimed one is off the others until its lease
 * runs out, and an attempt's outcome is recorded only at the attempt that was claimed.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ConflictError, MAX_NOTIFICATIONS_PER_TENANT, validateNotification } from '../../src/core/index.js';
import { pickDeliveries } from '../../src/store/notifications.js';
import { lateDeliveries, notificationsLateLock } from '../../src/store/queries/notifications.js';
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
  const [a, b] = (
    await Promise.all([
      db.store.claimDeliveries({ now, limit: 4, leaseMs: 10_000 }),
      other.claimDeliveries({ now, limit: 4, leaseMs: 10_000 }),
    ])
  ).map((c) => c.deliveries);
  const ids = [...a!, ...b!].map((d) => d.deliveryId);
  expect(ids).toHaveLength(6);
  expect(new Set(ids).size).toBe(6);
  expect(
    (await db.store.claimDeliveries({ now: now + 9_999, limit: 10, leaseMs: 10_000 })).deliveries,
  ).toEqual([]);
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
  const { deliveries: again } = await db.store.claimDeliveries({
    now: now + 10_000,
    limit: 10,
    leaseMs: 10_000,
  });
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

/** Every plan node that reads `run_queue`: the rows it returned and those it read and filtered out. */
function queueReads(plan: Record<string, unknown>): number[] {
  const own =
    plan['Relation Name'] === 'run_queue'
      ? [Number(plan['Actual Rows']) + Number(plan['Rows Removed by Filter'] ?? 0)]
      : [];
  const children = (plan.Plans as Record<string, unknown>[] | undefined) ?? [];
  return [...own, ...children.flatMap(queueReads)];
}

test("a late scan's statement reads at most its page of the queue, however many runs are late or the tenant has queued", async () => {
  await put('bulk', 'late', ['run.late']);
  await put('few', 'late', ['run.late']);
  // 2,000 late runs of one tenant at one instant (a cron minute), then 3 of another, in one pool.
  const insert = async (tenant: string, n: number, at: string) => {
    await db.pool.query(
      `WITH r AS (
         INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
           backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at)
         SELECT $1, 'j', $3::timestamptz + i * interval '1 ms', 1, 'h', '{}', 'default', 0, 1, 60, $3, $3, $3
         FROM generate_series(1, $2::int) i RETURNING *)
       INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
       SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key FROM r`,
      [tenant, n, at],
    );
  };
  await insert('bulk', 2000, '2026-02-01T00:00:00Z');
  await insert('few', 3, '2026-02-01T00:00:01Z');
  await db.pool.query('ANALYZE run_queue');
  const now = new Date('2026-02-02T00:00:00Z');
  for (const [tenant, from] of [
    ['bulk', null],
    ['few', null],
    ['bulk', new Date('2026-02-01T00:00:00Z')],
  ] as const) {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${lateDeliveries}`, [
        tenant,
        'late',
        from,
        null,
        now,
        10,
        now,
      ]);
      const reads = queueReads(rows[0]['QUERY PLAN'][0].Plan);
      expect(reads.length).toBeGreaterThan(0);
      expect(Math.max(...reads)).toBeLessThanOrEqual(10);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  }
});

test('a claim keeps to the caps: per notification and per tenant, less what the node has in flight', async () => {
  for (const name of ['n1', 'n2', 'n3']) {
    await put('capped', name, ['worker.lost']);
    await db.pool.query(
      `INSERT INTO notification_deliveries (tenant_id, name, event, data, created_at, next_attempt_at)
       SELECT 'capped', $1, 'worker.lost', '{}', $2, $2 FROM generate_series(1, 5)`,
      [name, new Date(T0)],
    );
  }
  const now = T0 + 7 * 86_400_000;
  const claim = (busy: { tenantId: string; name: string; count: number }[]) =>
    db.store.claimDeliveries({ now, limit: 100, leaseMs: 60_000, perNotification: 2, perTenant: 3, busy });
  // n1 has one in flight: the tenant has two places left (3 − 1), taken by turns: n1's first, n2's first.
  const first = (await claim([{ tenantId: 'capped', name: 'n1', count: 1 }])).deliveries;
  const of = (ds: { tenantId: string; name: string }[]) =>
    ds.filter((d) => d.tenantId === 'capped').map((d) => d.name);
  expect(of(first).sort()).toEqual(['n1', 'n2']);
  // The tenant at its cap: nothing of it.
  expect(of((await claim([{ tenantId: 'capped', name: 'n2', count: 3 }])).deliveries)).toEqual([]);
  // Nothing in flight: three of the tenant, the first of each notification before any second.
  expect(of((await claim([])).deliveries).sort()).toEqual(['n1', 'n2', 'n3']);
});

test('a node whose picks another node is claiming picks again, and takes other due deliveries rather than none', async () => {
  await put('zz-racing', 'r', ['worker.lost']);
  await db.pool.query(
    `INSERT INTO notification_deliveries (tenant_id, name, event, data, created_at, next_attempt_at)
     SELECT 'zz-racing', 'r', 'worker.lost', '{}', $1, $1 FROM generate_series(1, 8)`,
    [new Date(T0)],
  );
  const claim = {
    now: T0 + 8 * 86_400_000,
    limit: 4,
    leaseMs: 60_000,
    after: { tenantId: 'zz-racing', name: '' },
    walk: 1,
  };
  // What a claim picks first; another node's claim of those same rows holds their locks until it commits.
  const first = (await pickDeliveries(db.pool, claim)).picked.map((r) => r.delivery_id as string);
  expect(first).toHaveLength(4);
  const other = await db.pool.connect();
  try {
    await other.query('BEGIN');
    await other.query(
      'SELECT 1 FROM notification_deliveries WHERE delivery_id = ANY($1::bigint[]) FOR UPDATE',
      [first],
    );
    const ids = (await db.store.claimDeliveries(claim)).deliveries.map((d) => d.deliveryId);
    expect(ids).toHaveLength(4);
    expect(ids.filter((id) => first.includes(id))).toEqual([]);
  } finally {
    await other.query('ROLLBACK');
    other.release();
  }
});
