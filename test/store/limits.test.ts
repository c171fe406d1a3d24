/**
 * Named limits in the store: create and replace (PUT semantics, the token arithmetic with an
 * injected now, slots in use kept), read, list by pages without jobs' own gates, delete (refused
 * while a job lists the key), bad input that writes nothing, tenant isolation, and the gauges'
 * sample (runs held back only by an exhausted limit).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { HELD_SCAN } from '../../src/store/index.js';
import * as L from '../../src/store/queries/limits.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import {
  countRows,
  expectTockError,
  job,
  queueLimitedRuns,
  slotsHeld,
  uniqueId,
  upsertJob,
} from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

async function limitRows(tenantId: string) {
  const { rows } = await db.pool.query('SELECT * FROM limits WHERE tenant_id = $1 ORDER BY key', [tenantId]);
  return rows;
}

/** A queued run of `jobId` passing `gates`, written as the claim's queue holds it. */
async function queueRun(tenantId: string, jobId: string, gates: string[], availableAt: number, n: number) {
  const at = new Date(availableAt);
  const { rows } = await db.pool.query(
    `INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
       backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, gates)
     VALUES ($1, $2, $3, 3, 'noop', '{}', 'default', 0, 2, 3600, $4, $4, $4, $5) RETURNING run_id`,
    [tenantId, jobId, new Date(T0 + n * 1000), at, gates],
  );
  await db.pool.query(
    `INSERT INTO run_queue (run_id, tenant_id, pool, handler, priority, available_at, sort_key, job_id, gates)
     VALUES ($1, $2, 'default', 'noop', 0, $3, $3, $4, $5)`,
    [rows[0].run_id, tenantId, at, jobId, gates],
  );
}

/**
 * `n` runs of `jobId` passing `gate` (whose limit must exist), queued and then claimed: running,
 * each holding a slot of the gate (its claim row lists the gate).
 */
async function holdSlots(tenantId: string, jobId: string, gate: string, n: number, now: number) {
  for (let i = 0; i < n; i++) await queueRun(tenantId, jobId, [gate], now - 1000, 100 + i);
  const claimed = await db.store.claimRuns({ workerId: 'w-holds', pool: 'default', max: n, now, tenantId });
  expect(claimed).toHaveLength(n);
}

describe('put', () => {
  test('creates a limit full of tokens, then replaces it: refilled at the old rate, capped by the new burst', async () => {
    const tenantId = uniqueId('t-put');
    const now = db.clock.nowMs();
    const first = await db.store.putLimit({
      tenantId,
      key: 'payments-api',
      limit: { rate: 2, burst: 10 },
      now,
    });
    expect(first.created).toBe(true);
    expect(first.limit).toMatchObject({
      tenantId,
      key: 'payments-api',
      rate: 2,
      burst: 10,
      maxConcurrency: null,
      tokens: 10,
      inUse: 0,
      createdAt: new Date(now),
      updatedAt: new Date(now),
    });

    // Spend 8 tokens as a claim would, at now.
    await db.pool.query(`UPDATE limits SET tokens = 2 WHERE tenant_id = $1 AND key = 'payments-api'`, [
      tenantId,
    ]);
    // 1.5 s later at 2/s: 2 + 3 = 5 tokens.
    const read = await db.store.getLimit({ tenantId, key: 'payments-api', now: now + 1500 });
    expect(read.tokens).toBeCloseTo(5, 9);
    // Never more than the burst.
    expect((await db.store.getLimit({ tenantId, key: 'payments-api', now: now + 60_000 })).tokens).toBe(10);

    // Replaced 1.5 s later with rate 100, burst 4: tokens refilled at the OLD rate (5), capped by 4.
    const second = await db.store.putLimit({
      tenantId,
      key: 'payments-api',
      limit: { rate: 100, burst: 4, maxConcurrency: 3 },
      now: now + 1500,
    });
    expect(second.created).toBe(false);
    expect(second.limit).toMatchObject({ rate: 100, burst: 4, maxConcurrency: 3, tokens: 4 });
    expect(second.limit.createdAt).toEqual(new Date(now));
    expect(second.limit.updatedAt).toEqual(new Date(now + 1500));
    const [row] = await limitRows(tenantId);
    expect(row.tokens).toBe(4);
    expect(row.refilled_at).toEqual(new Date(now + 1500));

    // Replaced 10 ms later with a bigger burst, from 0.5 tokens stored.
    await db.pool.query(`UPDATE limits SET tokens = 0.5 WHERE tenant_id = $1`, [tenantId]);
    const third = await db.store.putLimit({
      tenantId,
      key: 'payments-api',
      limit: { rate: 1, burst: 50 },
      now: now + 1510,
    });
    // 0.5 + 100/s × 0.01 s = 1.5 (old rate), under the new burst.
    expect(third.limit.tokens).toBeCloseTo(1.5, 9);
    // PUT replaces: max_concurrency not given is null now.
    expect(third.limit.maxConcurrency).toBeNull();
  });

  test('an update keeps in_use; a new limit counts the holds its gate already has', async () => {
    const tenantId = uniqueId('t-inuse');
    const now = db.clock.nowMs();
    // Two runs still hold slots of a limit that was deleted: the new limit starts with them.
    const gate = `${tenantId}/db`;
    await db.store.putLimit({ tenantId, key: 'db', limit: { maxConcurrency: 5 }, now });
    await holdSlots(tenantId, 'j-db', gate, 2, now);
    await db.store.deleteLimit({ tenantId, key: 'db' });
    expect(await slotsHeld(db.pool, gate)).toBe(2);
    const created = await db.store.putLimit({ tenantId, key: 'db', limit: { maxConcurrency: 5 }, now });
    expect(created.limit).toMatchObject({
      inUse: 2,
      tokens: null,
      rate: null,
      burst: null,
      maxConcurrency: 5,
    });

    await db.pool.query(`UPDATE limits SET in_use = 4 WHERE tenant_id = $1 AND key = 'db'`, [tenantId]);
    const updated = await db.store.putLimit({
      tenantId,
      key: 'db',
      limit: { maxConcurrency: 2, rate: 1, burst: 3 },
      now,
    });
    // A limit that gains a rate starts full.
    expect(updated.limit).toMatchObject({ inUse: 4, maxConcurrency: 2, tokens: 3 });
  });

  test("the tenant's own key is a limit like any; another tenant's is refused", async () => {
    const tenantId = uniqueId('t-own');
    const now = db.clock.nowMs();
    const own = await db.store.putLimit({
      tenantId,
      key: `tenant:${tenantId}`,
      limit: { maxConcurrency: 10 },
      now,
    });
    expect(own.limit.key).toBe(`tenant:${tenantId}`);
    const err = await expectTockError(
      db.store.putLimit({ tenantId, key: 'tenant:someone-else', limit: { maxConcurrency: 10 }, now }),
      'validation_error',
    );
    expect(err.details.field).toBe('key');
  });

  test.each([
    ['a negative rate', { rate: -1, burst: 5 }, 'rate'],
    ['a zero rate', { rate: 0, burst: 5 }, 'rate'],
    ['a burst below 1', { rate: 1, burst: 0 }, 'burst'],
    ['a fractional burst', { rate: 1, burst: 1.5 }, 'burst'],
    ['a cap of 0', { maxConcurrency: 0 }, 'max_concurrency'],
    ['a burst without a rate', { burst: 5 }, 'rate'],
    ['a rate without a burst', { rate: 5 }, 'burst'],
    ['nothing', {}, 'rate'],
    ['an unknown field', { maxConcurrency: 1, ceiling: 3 }, 'ceiling'],
  ])('%s is refused, naming the field, and nothing is written', async (_, limit, field) => {
    const tenantId = uniqueId('t-bad');
    const err = await expectTockError(
      db.store.putLimit({ tenantId, key: 'k', limit: limit as never, now: db.clock.nowMs() }),
      'validation_error',
    );
    expect(err.details.field).toBe(field);
    expect(await limitRows(tenantId)).toEqual([]);
  });

  test('a rate of 0 or below is "above 0", not a bound of 5e-324', async () => {
    for (const rate of [0, -1]) {
      const err = await expectTockError(
        db.store.putLimit({ tenantId: 't-rate', key: 'k', limit: { rate, burst: 1 }, now: db.clock.nowMs() }),
        'validation_error',
      );
      expect(err.message).toBe('rate must be above 0');
    }
  });

  test.each([
    ['job:nightly', 'a job key'],
    ['', 'an empty key'],
    ['has space', 'a key with a space'],
    ['..', 'a dot-dot key'],
  ])('%s (%s) is refused naming key; a job gate is never written', async (key) => {
    const tenantId = uniqueId('t-badkey');
    const now = db.clock.nowMs();
    await db.pool.query(
      `INSERT INTO limits (tenant_id, key, max_concurrency, refilled_at, created_at, updated_at, overlap)
       VALUES ($1, 'job:nightly', 1, $2, $2, $2, 'skip')`,
      [tenantId, new Date(now)],
    );
    const before = await limitRows(tenantId);
    const err = await expectTockError(
      db.store.putLimit({ tenantId, key, limit: { maxConcurrency: 9 }, now: now + 1 }),
      'validation_error',
    );
    expect(err.details.field).toBe('key');
    expect(await limitRows(tenantId)).toEqual(before);
    await expectTockError(db.store.deleteLimit({ tenantId, key }), 'validation_error');
    expect(await limitRows(tenantId)).toEqual(before);
  });
});

describe('get and list', () => {
  test("another tenant's limit is not found", async () => {
    const a = uniqueId('t-a');
    const b = uniqueId('t-b');
    const now = db.clock.nowMs();
    await db.store.putLimit({ tenantId: a, key: 'shared-name', limit: { maxConcurrency: 1 }, now });
    await expectTockError(db.store.getLimit({ tenantId: b, key: 'shared-name', now }), 'not_found');
    await expectTockError(db.store.deleteLimit({ tenantId: b, key: 'shared-name' }), 'not_found');
    expect((await db.store.listLimits({ tenantId: b, limit: 10, now })).items).toEqual([]);
    expect(await countRows(db.pool, 'limits', 'tenant_id = $1', [a])).toBe(1);
  });

  test('pages by key with an opaque cursor, without jobs own gates', async () => {
    const tenantId = uniqueId('t-list');
    const now = db.clock.nowMs();
    for (const key of ['e', 'a', 'c', 'b', 'd', `tenant:${tenantId}`]) {
      await db.store.putLimit({ tenantId, key, limit: { rate: 1, burst: 2 }, now });
    }
    await db.pool.query(
      `INSERT INTO limits (tenant_id, key, max_concurrency, refilled_at, created_at, updated_at)
       VALUES ($1, 'job:x', 1, $2, $2, $2)`,
      [tenantId, new Date(now)],
    );
    const keys: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await db.store.listLimits({ tenantId, limit: 2, cursor, now: now + 500 });
      keys.push(...page.items.map((l) => l.key));
      for (const l of page.items) expect(l.tokens).toBe(2);
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== null);
    expect(keys).toEqual(['a', 'b', 'c', 'd', 'e', `tenant:${tenantId}`]);
    expect(pages).toBe(3);
    await expectTockError(
      db.store.listLimits({ tenantId, limit: 2, cursor: 'bm90LWEtY3Vyc29y', now }),
      'validation_error',
    );
  });
});

describe('delete', () => {
  test('refused while a job lists the key (naming it), then deleted; holds stay', async () => {
    const tenantId = uniqueId('t-del');
    const now = db.clock.nowMs();
    await db.store.putLimit({ tenantId, key: 'payments-api', limit: { maxConcurrency: 2 }, now });
    const def = job({ limits: ['payments-api'] });
    await upsertJob(db.store, { tenantId, job: def, now });
    const held = `${tenantId}/payments-api`;
    await holdSlots(tenantId, def.jobId, held, 1, now);

    const err = await expectTockError(db.store.deleteLimit({ tenantId, key: 'payments-api' }), 'conflict');
    expect(err.details.job_id).toBe(def.jobId);
    expect(err.message).toContain(def.jobId);
    expect(await countRows(db.pool, 'limits', 'tenant_id = $1', [tenantId])).toBe(1);

    // Another tenant's job listing the same key does not hold this tenant's limit.
    await upsertJob(db.store, { tenantId, job: { ...def, limits: [] }, now });
    const other = uniqueId('t-other');
    await db.store.putLimit({ tenantId: other, key: 'payments-api', limit: { maxConcurrency: 1 }, now });
    await upsertJob(db.store, { tenantId: other, job: job({ limits: ['payments-api'] }), now });
    await db.store.deleteLimit({ tenantId, key: 'payments-api' });
    expect(await countRows(db.pool, 'limits', 'tenant_id = $1', [tenantId])).toBe(0);
    expect(await slotsHeld(db.pool, held)).toBe(1);
    await expectTockError(db.store.deleteLimit({ tenantId, key: 'payments-api' }), 'not_found');
  });

  test("the tenant's own key can always be deleted", async () => {
    const tenantId = uniqueId('t-delown');
    const now = db.clock.nowMs();
    await db.store.putLimit({ tenantId, key: `tenant:${tenantId}`, limit: { maxConcurrency: 2 }, now });
    await upsertJob(db.store, { tenantId, job: job(), now });
    await db.store.deleteLimit({ tenantId, key: `tenant:${tenantId}` });
    expect(await limitRows(tenantId)).toEqual([]);
  });
});

describe('gauges', () => {
  test('count the runs an exhausted limit holds back, per kind of gate; 0 for a limit with room', async () => {
    const tenantId = uniqueId('t-gauge');
    const now = db.clock.nowMs();
    const put = (key: string, limit: Parameters<typeof db.store.putLimit>[0]['limit']) =>
      db.store.putLimit({ tenantId, key, limit, now });
    await put('full', { maxConcurrency: 1 });
    await put('dry', { rate: 0.5, burst: 2 });
    await put('roomy', { maxConcurrency: 5 });
    await put(`tenant:${tenantId}`, { maxConcurrency: 3 });
    await db.pool.query(
      `UPDATE limits SET in_use = CASE key WHEN 'full' THEN 1 WHEN 'roomy' THEN 1 ELSE 3 END, tokens = 0.25
       WHERE tenant_id = $1`,
      [tenantId],
    );
    await db.pool.query(
      `INSERT INTO limits (tenant_id, key, max_concurrency, in_use, refilled_at, created_at, updated_at)
       VALUES ($1, 'job:j1', 1, 1, $2, $2, $2)`,
      [tenantId, new Date(now)],
    );
    const g = (k: string) => `${tenantId}/${k}`;
    await queueRun(tenantId, 'j1', [g('full')], now, 1);
    await queueRun(tenantId, 'j1', [g('full'), g('dry')], now, 2);
    await queueRun(tenantId, 'j2', [g('dry'), g('roomy')], now, 3);
    await queueRun(tenantId, 'j2', [g('full')], now + 60_000, 4); // not available yet
    await queueRun(uniqueId('t-elsewhere'), 'j1', [g('full')], now, 5); // another tenant's

    // 1 s later the dry bucket holds 0.25 + 0.5 = 0.75 < 1: exhausted.
    const { limits: sample, total } = await db.store.limitGauges({ now: now + 1000, limit: 1000 });
    expect(total).toBe(await countRows(db.pool, 'limits'));
    const mine = Object.fromEntries(sample.filter((s) => s.tenantId === tenantId).map((s) => [s.key, s]));
    expect(Object.keys(mine).sort()).toEqual(['dry', 'full', 'job:j1', 'roomy', `tenant:${tenantId}`]);
    expect(mine.full).toMatchObject({ heldRuns: 2, inUse: 1, maxConcurrency: 1, tokens: null });
    expect(mine.dry!.heldRuns).toBe(2);
    expect(mine.dry!.tokens).toBeCloseTo(0.75, 9);
    expect(mine.roomy!.heldRuns).toBe(0);
    expect(mine[`tenant:${tenantId}`]!.heldRuns).toBe(3);
    expect(mine['job:j1']!.heldRuns).toBe(2);

    // 2 s later the bucket has a whole token: nothing held by it.
    const { limits: later } = await db.store.limitGauges({ now: now + 2000, limit: 1000 });
    expect(later.find((s) => s.tenantId === tenantId && s.key === 'dry')!.heldRuns).toBe(0);

    // Bounded: at most `limit` rows, by gate.
    const two = await db.store.limitGauges({ now, limit: 2 });
    expect(two.limits).toHaveLength(2);
    expect(two.total).toBe(total);
    expect(sample.every((l) => !l.heldCapped)).toBe(true);
  });

  test('many exhausted limits of one tenant: its queue is read once, and each counts its own runs', async () => {
    const tenantId = uniqueId('t-many');
    const now = db.clock.nowMs();
    const keys = Array.from({ length: 5 }, (_, i) => `api-${i}`);
    for (const key of keys) await db.store.putLimit({ tenantId, key, limit: { maxConcurrency: 1 }, now });
    await db.pool.query('UPDATE limits SET in_use = 1 WHERE tenant_id = $1', [tenantId]);
    // Run n passes api-0 … api-(n mod 5): api-k is passed by the runs with n mod 5 >= k.
    for (let n = 0; n < 10; n++)
      await queueRun(
        tenantId,
        `j${n}`,
        keys.slice(0, (n % 5) + 1).map((k) => `${tenantId}/${k}`),
        now - 1000,
        n,
      );
    const page = await db.store.listLimits({ tenantId, limit: 50, now });
    expect(page.items.map((l) => [l.key, l.heldRuns])).toEqual(keys.map((k, i) => [k, 10 - 2 * i]));
    const { rows } = await db.pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${L.limitList}`, [
      tenantId,
      null,
      51,
      new Date(now),
    ]);
    const scans: { loops: number }[] = [];
    const walk = (node: Record<string, unknown>) => {
      if (node['Relation Name'] === 'run_queue') scans.push({ loops: node['Actual Loops'] as number });
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk(rows[0]['QUERY PLAN'][0].Plan);
    expect(scans).toEqual([{ loops: 1 }]);
  });

  test("a backlog past HELD_SCAN: each limit reads that many of its tenant's due runs and says the count stopped there", async () => {
    const tenantId = uniqueId('t-backlog');
    const now = db.clock.nowMs();
    await db.store.putLimit({ tenantId, key: 'api', limit: { maxConcurrency: 1 }, now });
    await db.store.putLimit({ tenantId, key: 'other', limit: { maxConcurrency: 1 }, now });
    await db.pool.query('UPDATE limits SET in_use = 1 WHERE tenant_id = $1', [tenantId]);
    await queueLimitedRuns(db.pool, { tenantId, jobId: 'j', pool: 'default', n: HELD_SCAN + 5, at: now });
    const api = await db.store.getLimit({ tenantId, key: 'api', now });
    expect(api).toMatchObject({ heldRuns: HELD_SCAN, heldCapped: true });
    // None of the runs read passes this gate: 0 held among them, and the count says it stopped.
    const other = await db.store.getLimit({ tenantId, key: 'other', now });
    expect(other).toMatchObject({ heldRuns: 0, heldCapped: true });
    // A limit with room holds nothing and reads nothing.
    await db.pool.query(`UPDATE limits SET in_use = 0 WHERE tenant_id = $1 AND key = 'api'`, [tenantId]);
    expect(await db.store.getLimit({ tenantId, key: 'api', now })).toMatchObject({
      heldRuns: 0,
      heldCapped: false,
    });
  });
});
