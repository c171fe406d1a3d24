/**
 * Issue 14, item 7, over real loopback HTTP on a real store: `/metrics` needs a cluster-admin key
 * (open only in open mode, `tock dev`); a burst of scrapes reads the run counts from the database
 * once per METRICS_SAMPLE_MS, not once per scrape; and the `pool` label takes at most
 * MAX_POOL_LABELS values however many pools there are.
 * Issue 15, item 13: process metrics are `tock_process_*` (not `tock_process_process_*`); a run
 * triggered for a past instant is not scheduling delay; each job's last success is a gauge, for at
 * most a bounded number of jobs.
 * Issue 21, item 3: Tock's tables' dead tuples, live tuples, HOT update ratio, bytes and last
 * autovacuum are gauges of the same sample, read after real churn (claims delete queue rows,
 * completions update runs).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  MAX_POOL_LABELS,
  METRICS_SAMPLE_MS,
  Metrics,
  RunGaugeSampler,
  schedulingDelayMs,
} from '../../src/api/index.js';
import { FakeClock } from '../../src/core/index.js';
import type { Store } from '../../src/store/index.js';
import { PostgresStore } from '../../src/store/index.js';
import { TOCK_TABLES } from '../../src/store/queries/table-stats.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, upsertJob } from '../setup/factories.js';
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
  sampleRunCounts: number;
  readyDepth: number;
  unservedRuns: number;
}
function countingStore(store: Store): { store: Store; calls: SampleCalls } {
  const calls: SampleCalls = { sampleRunCounts: 0, readyDepth: 0, unservedRuns: 0 };
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (prop === 'sampleRunCounts' || prop === 'readyDepth' || prop === 'unservedRuns') calls[prop] += 1;
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
    await upsertJob(db.store, { tenantId: 'acme', job: job({ jobId: 'm' }), now: t });
    await db.store.triggerRun({ tenantId: 'acme', jobId: 'm', scheduledFor: t - 1000, now: t });
    db.clock.advance(METRICS_SAMPLE_MS); // past any sample an earlier test took
    const before = { ...sampled.calls };
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })),
    );
    for (const a of answers) expect(a.status).toBe(200);
    expect(sampled.calls.sampleRunCounts - before.sampleRunCounts).toBe(1);
    expect(sampled.calls.readyDepth - before.readyDepth).toBe(1);
    expect(sampled.calls.unservedRuns - before.unservedRuns).toBe(1);
    // Every scrape shows that one sample: the pending run is counted, and no worker serves it.
    for (const a of answers) {
      expect(a.text).toMatch(/^tock_runs\{state="pending"\} 1$/m);
      expect(a.text).toMatch(/^tock_unserved_runs 1$/m);
    }

    // Within the interval: no read. After it: one.
    db.clock.advance(METRICS_SAMPLE_MS - 1);
    await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] });
    expect(sampled.calls.sampleRunCounts - before.sampleRunCounts).toBe(1);
    db.clock.advance(1);
    await Promise.all(
      Array.from({ length: 20 }, () => call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })),
    );
    expect(sampled.calls.sampleRunCounts - before.sampleRunCounts).toBe(2);
  });

  test(`after claims in 500 pools the pool label has at most ${MAX_POOL_LABELS} values, the rest "other"`, async () => {
    const t = db.clock.nowMs();
    for (let i = 0; i < 500; i++)
      api.metrics.runStarted({ pool: `tenant-pool-${i}`, availableAt: new Date(t - 10) }, t);
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

describe('a sample slower than a scrape waits', () => {
  test('the first sample is waited for; later, a scrape waits waitMs at most and shows the last sample', async () => {
    const clock = new FakeClock(db.clock.nowMs());
    let release: () => void = () => {};
    let gate: Promise<void> | null = null;
    // The real store; its run counts held back while \`gate\` is set (a sample on a large history).
    const store = new Proxy(db.store, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== 'sampleRunCounts' || typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          if (gate) await gate;
          return value.apply(target, args);
        };
      },
    });
    const metrics = new Metrics({ processMetrics: false });
    const sampler = new RunGaugeSampler({ store, clock, metrics, waitMs: 25 });
    const pending = async () =>
      (await metrics.runsByState.get()).values.find((v) => v.labels.state === 'pending')?.value;

    await sampler.refresh();
    const before = await pending();
    await upsertJob(db.store, { tenantId: 'slow', job: job({ jobId: 'slow' }), now: clock.nowMs() });
    await db.store.triggerRun({
      tenantId: 'slow',
      jobId: 'slow',
      scheduledFor: clock.nowMs() - 1000,
      now: clock.nowMs(),
    });

    gate = new Promise((resolve) => {
      release = resolve;
    });
    clock.advance(METRICS_SAMPLE_MS);
    let answered = false;
    const scrape = sampler.refresh().then(() => {
      answered = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(answered).toBe(false); // waiting, on the sampler's clock
    clock.advance(25);
    await scrape; // answered with the last sample while the read goes on
    expect(await pending()).toBe(before);

    release();
    for (let i = 0; i < 200 && (await pending()) === before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await pending()).toBe((before ?? 0) + 1);
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

/** The sample of a metric line (`name{labels} value`), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metric names and meanings (issue 15)', () => {
  test('process metrics are tock_process_* and tock_nodejs_*, never tock_process_process_*', async () => {
    const text = await new Metrics().registry.metrics();
    expect(text).toMatch(/^tock_process_cpu_seconds_total /m);
    expect(text).toMatch(/^tock_nodejs_heap_size_total_bytes /m);
    expect(text).not.toContain('tock_process_process_');
  });

  test('scheduling delay counts from the later of available_at and creation', () => {
    const t = Date.UTC(2026, 0, 1);
    // A run materialised ahead of its slot, started 3 s after it: 3 s.
    expect(schedulingDelayMs({ availableAt: new Date(t), createdAt: new Date(t - 1000) }, t + 3000)).toBe(
      3000,
    );
    // Triggered now for a slot two days ago, started 50 ms later: 50 ms, not two days.
    expect(
      schedulingDelayMs({ availableAt: new Date(t - 2 * 86_400_000), createdAt: new Date(t) }, t + 50),
    ).toBe(50);
    // Started before it was due (claimed ahead): 0. No creation time: from available_at.
    expect(schedulingDelayMs({ availableAt: new Date(t) }, t - 100)).toBe(0);
    expect(schedulingDelayMs({ availableAt: new Date(t) }, t + 20)).toBe(20);
  });

  test('a manual trigger for a slot in the past adds no scheduling delay; a late start of a due run does', async () => {
    const api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
    try {
      const t = db.clock.nowMs();
      await upsertJob(db.store, { tenantId: 'acme', job: job({ jobId: 'past', pool: 'p-delay' }), now: t });
      const past = new Date(t - 207_540_000).toISOString();
      const trig = await call(api.base, 'POST', '/v1/jobs/past/runs', {
        key: keys.admin,
        body: { scheduled_for: past },
      });
      expect(trig.status, trig.text).toBe(201);
      db.clock.advance(40);
      const lease = (body: Record<string, unknown>) =>
        call(api.base, 'POST', '/v1/leases', { key: keys.worker, body: { worker_id: 'w-delay', ...body } });
      const first = await lease({ pool: 'p-delay', max: 10 });
      expect(first.status, first.text).toBe(200);
      expect(first.json.runs).toHaveLength(1);
      let m = (await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })).text;
      expect(sample(m, 'tock_scheduling_delay_seconds_count{pool="p-delay"}')).toBe(1);
      expect(sample(m, 'tock_scheduling_delay_seconds_sum{pool="p-delay"}')).toBeCloseTo(0.04, 6);

      // A run due 1 s from now, started 3 s after its slot: 3 s of delay.
      const slot = db.clock.nowMs() + 1000;
      await db.store.triggerRun({
        tenantId: 'acme',
        jobId: 'past',
        scheduledFor: slot,
        now: db.clock.nowMs(),
      });
      db.clock.set(slot + 3000);
      expect((await lease({ pool: 'p-delay', max: 10 })).json.runs).toHaveLength(1);
      m = (await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })).text;
      expect(sample(m, 'tock_scheduling_delay_seconds_count{pool="p-delay"}')).toBe(2);
      expect(sample(m, 'tock_scheduling_delay_seconds_sum{pool="p-delay"}')).toBeCloseTo(3.04, 6);
    } finally {
      await api.close();
    }
  });

  test('a success over HTTP sets its job’s last-success gauge (tenant, job; Unix seconds)', async () => {
    const api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
    try {
      const t = db.clock.nowMs();
      await upsertJob(db.store, { tenantId: 'acme', job: job({ jobId: 'ok', pool: 'p-ok' }), now: t });
      await db.store.triggerRun({ tenantId: 'acme', jobId: 'ok', scheduledFor: t, now: t });
      const got = await call(api.base, 'POST', '/v1/leases', {
        key: keys.worker,
        body: { worker_id: 'w-ok', pool: 'p-ok' },
      });
      const [run] = got.json.runs;
      db.clock.advance(1500);
      const done = await call(api.base, 'POST', `/v1/runs/${run.run_id}/complete`, {
        key: keys.worker,
        body: { lease_token: run.lease_token, status: 'succeeded' },
      });
      expect(done.status, done.text).toBe(200);
      const m = (await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })).text;
      expect(sample(m, 'tock_job_last_success_timestamp_seconds{tenant="acme",job="ok"}')).toBe(
        db.clock.nowMs() / 1000,
      );
    } finally {
      await api.close();
    }
  });
});

describe('table gauges (issue 21, item 3)', () => {
  test('after claims and completions: dead tuples in the queue, a HOT ratio in [0, 1] for runs, every Tock table sized', async () => {
    // The churn on one connection, so that one pg_stat_force_next_flush() publishes all of its
    // counts before the scrape (a backend otherwise publishes them up to 10 s later).
    const pool = db.newPool(1);
    const store = new PostgresStore(pool);
    // The per-job gauges read the runs of their window, and reading a page prunes its dead row
    // versions (opportunistic pruning): with the churned runs in the window, the sample's own read
    // could empty the dead-tuple count it reports. A 1 s window ends before their slots.
    const metrics = new Metrics({ processMetrics: false, jobGauges: { windowMs: 1000 } });
    const api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 }, metrics });
    try {
      const t = db.clock.nowMs();
      await upsertJob(store, { tenantId: 'acme', job: job({ jobId: 'churn', pool: 'p-churn' }), now: t });
      for (let i = 0; i < 50; i++)
        await store.triggerRun({
          tenantId: 'acme',
          jobId: 'churn',
          scheduledFor: t - 1000 * (i + 1),
          now: t,
        });
      const claimed = await store.claimRuns({ workerId: 'w-churn', pool: 'p-churn', max: 50, now: t });
      expect(claimed).toHaveLength(50);
      const { completed } = await store.completeRuns({ leases: claimed, now: t + 10 });
      expect(completed).toHaveLength(50);
      await pool.query('SELECT pg_stat_force_next_flush()');

      db.clock.advance(METRICS_SAMPLE_MS); // past any sample an earlier test took
      const m = (await call(api.base, 'GET', '/metrics', { key: keys['cluster-admin'] })).text;
      expect(m).toContain('# TYPE tock_table_dead_tuples gauge');
      // Each claimed run left a dead row in run_queue; each completion a dead version of its run.
      expect(sample(m, 'tock_table_dead_tuples{table="run_queue"}')).toBeGreaterThanOrEqual(50);
      expect(sample(m, 'tock_table_dead_tuples{table="runs"}')).toBeGreaterThan(0);
      expect(sample(m, 'tock_table_live_tuples{table="runs"}')).toBeGreaterThanOrEqual(50);
      // The completions updated runs (fillfactor 40): HOT, or not, the ratio is a share.
      const hot = sample(m, 'tock_table_hot_update_ratio{table="runs"}');
      expect(hot).toBeGreaterThanOrEqual(0);
      expect(hot).toBeLessThanOrEqual(1);
      // A table never updated has no ratio (0/0), rather than NaN or a misleading 0.
      expect(m).not.toMatch(/^tock_table_hot_update_ratio\{table="tenant_retention"\}/m);
      expect(m).not.toMatch(/NaN/);
      // Every Tock table, and only those, has a size; autovacuum is off on the test server.
      const sized = [...m.matchAll(/^tock_table_bytes\{table="([^"]+)"\} (\d+)$/gm)];
      expect(sized.map((s) => s[1]).sort()).toEqual([...TOCK_TABLES].sort());
      for (const s of sized) expect(Number(s[2])).toBeGreaterThan(0);
    } finally {
      await api.close();
      await pool.end();
    }
  });
});
