/**
 * Issue 14, item 7, over real loopback HTTP on a real store: `/metrics` needs a cluster-admin key
 * (open only in open mode, `tock dev`); a burst of scrapes reads the run counts from the database
 * once per METRICS_SAMPLE_MS, not once per scrape; and the `pool` label takes at most
 * MAX_POOL_LABELS values however many pools there are.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_POOL_LABELS, METRICS_SAMPLE_MS, Metrics } from '../../src/api/index.js';
import type { Store } from '../../src/store/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job } from '../setup/factories.js';
import { type Api, call, expectError, keysFor, type RoleKeys, startApi } from './helpers.js';

let db: TestDatabase;
let keys: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await db?.teardown();
});

/** The real store, counting the calls of the methods a metrics sample makes. */
interface SampleCalls {
  countRuns: number;
  readyDepth: number;
}
function countingStore(store: Store): { store: Store; calls: SampleCalls } {
  const calls: SampleCalls = { countRuns: 0, readyDepth: 0 };
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (prop === 'countRuns' || prop === 'readyDepth') calls[prop] += 1;
        return value.apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

describe('GET /metrics', () => {
  let api: Api;
  let sampled: ReturnType<typeof countingStore>;

  beforeAll(async () => {
    sampled = countingStore(db.store);
    api = await startApi(db, { store: sampled.store, quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  });

  afterAll(async () => {
    await api?.close();
  });

  test('no key is 401; a key of any tenant role is 403; a cluster-admin key reads them', async () => {
    expectError(await call(api.base, 'GET', '/metrics'), 401, 'unauthorized');
    for (const role of ['admin', 'operator', 'worker', 'reader'] as const) {
      expectError(await call(api.base, 'GET', '/metrics', { key: keys[role] }), 403, 'forbidden');
    }
    const a = await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] });
    expect(a.status, a.text).toBe(200);
    expect(a.text).toContain('# TYPE tock_runs gauge');
  });

  test('100 scrapes at once read the run counts from the database once; the next interval once more', async () => {
    const t = db.clock.nowMs();
    await db.store.upsertJob({ tenantId: 'acme', job: job({ jobId: 'm' }), now: t });
    await db.store.triggerRun({ tenantId: 'acme', jobId: 'm', scheduledFor: t - 1000, now: t });
    db.clock.advance(METRICS_SAMPLE_MS); // past any sample an earlier test took
    const before = { ...sampled.calls };
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })),
    );
    for (const a of answers) expect(a.status).toBe(200);
    expect(sampled.calls.countRuns - before.countRuns).toBe(1);
    expect(sampled.calls.readyDepth - before.readyDepth).toBe(1);
    // Every scrape shows that one sample: the pending run is counted.
    for (const a of answers) expect(a.text).toMatch(/^tock_runs\{state="pending"\} 1$/m);

    // Within the interval: no read. After it: one.
    db.clock.advance(METRICS_SAMPLE_MS - 1);
    await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] });
    expect(sampled.calls.countRuns - before.countRuns).toBe(1);
    db.clock.advance(1);
    await Promise.all(
      Array.from({ length: 20 }, () => call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })),
    );
    expect(sampled.calls.countRuns - before.countRuns).toBe(2);
  });

  test(`after claims in 500 pools the pool label has at most ${MAX_POOL_LABELS} values, the rest "other"`, async () => {
    const t = db.clock.nowMs();
    for (let i = 0; i < 500; i++) api.metrics.runStarted(`tenant-pool-${i}`, t - 10, t);
    const a = await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] });
    expect(a.status).toBe(200);
    const pools = new Set([...a.text.matchAll(/^tock_claims_total\{pool="([^"]*)"\}/gm)].map((m) => m[1]));
    // This app's Metrics saw no pool before: the first MAX_POOL_LABELS keep their names.
    expect(pools.size).toBe(MAX_POOL_LABELS + 1);
    expect(pools.has('other')).toBe(true);
    expect(a.text).not.toContain('tenant-pool-499');
    const other = /^tock_claims_total\{pool="other"\} (\d+)$/m.exec(a.text);
    expect(Number(other?.[1])).toBe(500 - MAX_POOL_LABELS);
    const delaySeries = a.text.split('\n').filter((l) => l.startsWith('tock_scheduling_delay_seconds_count'));
    expect(delaySeries.length).toBeLessThanOrEqual(MAX_POOL_LABELS + 1);
  });
});

describe('GET /metrics in open mode (tock dev)', () => {
  test('needs no key', async () => {
    const open = await startApi(db, { auth: 'open', metrics: new Metrics({ processMetrics: false }) });
    try {
      const a = await call(open.base, 'GET', '/metrics');
      expect(a.status, a.text).toBe(200);
      expect(a.text).toContain('# TYPE tock_runs gauge');
    } finally {
      await open.close();
    }
  });
});
