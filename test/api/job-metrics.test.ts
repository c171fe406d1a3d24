/**
 * Issue 22, item 3: the per-job gauges read from run history. `tock_job_scheduling_delay_seconds`
 * and `tock_job_dead_runs` are a top N over the recent window of slots (N + k late jobs give N
 * series), their values are those of the runs inserted (the largest delay of a job's ended runs,
 * the wait so far of a queued one; its dead runs), a job whose runs left the window loses its
 * series, and a burst of scrapes reads the database once per sample interval. Misfires
 * (`tock_job_misfired_slots`, `tock_job_last_misfire_timestamp_seconds`) are what real ticks
 * recorded in `jobs`, for the N jobs with the latest misfire in the window. The last success
 * (`tock_job_last_success_timestamp_seconds`) is read from the database: two servers show the same,
 * and a success another process recorded shows up; only the N jobs whose last success is oldest.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { METRICS_SAMPLE_MS, Metrics, RunGaugeSampler } from '../../src/api/index.js';
import { FakeClock } from '../../src/core/index.js';
import type { Store } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { alignUp, type DelayRun, insertDelayRuns, job, upsertJob } from '../setup/factories.js';

const WINDOW = 60_000;
const TOP = 3;

let db: TestDatabase;

beforeAll(async () => {
  db = await setupDatabase();
});

afterAll(async () => {
  await db?.teardown();
});

/** The series of one metric in the registry's text: `{tenant,job}` → value. */
async function series(metrics: Metrics, name: string): Promise<Record<string, number>> {
  const text = await metrics.registry.metrics();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}\\{tenant="([^"]*)",job="([^"]*)"\\} (.+)$`).exec(line);
    if (m) out[`${m[1]}/${m[2]}`] = Number(m[3]);
  }
  return out;
}

/** A sampler on its own clock, and the count of its reads of the per-job view. */
function sampling(clock: FakeClock) {
  const metrics = new Metrics({ processMetrics: false, jobGauges: { topJobs: TOP, windowMs: WINDOW } });
  const reads = { n: 0 };
  const store = new Proxy(db.store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop !== 'recentJobDelays' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        reads.n += 1;
        return value.apply(target, args);
      };
    },
  }) as Store;
  return { metrics, reads, sampler: new RunGaugeSampler({ store, clock, metrics }) };
}

describe('per-job gauges from run history', () => {
  test('top N late jobs and top N dying jobs, their values from the runs, gone with their runs', async () => {
    const now = db.clock.nowMs();
    const clock = new FakeClock(now);
    const run = (tenantId: string, jobId: string, ago: number, r: Partial<DelayRun>): DelayRun => ({
      tenantId,
      jobId,
      slot: now - ago,
      delayMs: 0,
      ...r,
    });
    await insertDelayRuns(db.pool, [
      // Five late jobs (N + 2), each its largest delay of several runs: late-1 .. late-5 at 1..5 s.
      ...[1, 2, 3, 4, 5].flatMap((s) => [
        run('acme', `late-${s}`, 50_000, { delayMs: s * 1000 }),
        run('acme', `late-${s}`, 40_000, { delayMs: s * 100 }),
      ]),
      // A queued run due 30 s ago that has not started: the latest of all.
      run('beta', 'stuck', 30_000, { delayMs: null, state: 'pending' }),
      // Dead runs: two of dying-a, one of dying-b (each also late by 10 ms only).
      run('acme', 'dying-a', 20_000, { delayMs: 10, state: 'dead' }),
      run('acme', 'dying-a', 10_000, { delayMs: 10, state: 'dead' }),
      run('acme', 'dying-b', 10_000, { delayMs: 10, state: 'dead' }),
      // Out of the window: a slot before it, however late; a cancelled run.
      run('acme', 'old', WINDOW + 1000, { delayMs: 900_000, state: 'dead' }),
      run('acme', 'cancelled', 5000, { delayMs: 900_000, state: 'cancelled' }),
    ]);
    const { metrics, sampler } = sampling(clock);
    await sampler.refresh();

    expect(await series(metrics, 'tock_job_scheduling_delay_seconds')).toEqual({
      'beta/stuck': 30,
      'acme/late-5': 5,
      'acme/late-4': 4,
    });
    expect(await series(metrics, 'tock_job_dead_runs')).toEqual({ 'acme/dying-a': 2, 'acme/dying-b': 1 });
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^tock_job_window_jobs 8$/m);

    // Past the window (and a sample interval): no run left in it, no series.
    clock.advance(WINDOW + METRICS_SAMPLE_MS);
    await insertDelayRuns(db.pool, [
      run('acme', 'fresh', -WINDOW - METRICS_SAMPLE_MS + 1000, { delayMs: 250 }),
    ]);
    await sampler.refresh();
    expect(await series(metrics, 'tock_job_scheduling_delay_seconds')).toEqual({
      // The stuck run still waits: its slot left the window, so it no longer counts.
      'acme/fresh': 0.25,
    });
    expect(await series(metrics, 'tock_job_dead_runs')).toEqual({});
    expect(await metrics.registry.metrics()).toMatch(/^tock_job_window_jobs 1$/m);
  });

  test('a burst of scrapes reads the per-job view once per sample interval', async () => {
    const { reads, sampler } = sampling(new FakeClock(db.clock.nowMs()));
    await Promise.all(Array.from({ length: 20 }, () => sampler.refresh()));
    for (let i = 0; i < 20; i++) await sampler.refresh();
    expect(reads.n).toBe(1);
  });

  test('misfires: the N jobs with the latest misfire in the window, as the ticks recorded them', async () => {
    // A day on from the other tests' runs, on the 10 s grid of the jobs' `@every 10s`.
    const a = alignUp(db.clock.nowMs() + 86_400_000, 10_000);
    const outage = 350_000; // past the 60 s threshold: `skip` drops the 35 slots after the first
    const tick = (now: number) => db.store.tick({ now, lookaheadMs: 0, batchSize: 100 });
    // A job that misfired before the window, then was paused.
    await upsertJob(db.store, { tenantId: 'acme', job: job({ jobId: 'old', misfire: 'skip' }), now: a });
    await tick(a);
    await tick(a + outage);
    await db.store.pauseJob({ tenantId: 'acme', jobId: 'old', now: a + outage });
    // Four (N + 1) jobs that misfire at the same later tick.
    const b = a + 400_000;
    for (const jobId of ['m-1', 'm-2', 'm-3', 'm-4'])
      await upsertJob(db.store, { tenantId: 'acme', job: job({ jobId, misfire: 'skip' }), now: b });
    await tick(b);
    expect((await tick(b + outage)).dropped).toBe(4 * 35);

    const { metrics, sampler } = sampling(new FakeClock(b + outage));
    await sampler.refresh();
    expect(await series(metrics, 'tock_job_misfired_slots')).toEqual({
      'acme/m-1': 35,
      'acme/m-2': 35,
      'acme/m-3': 35,
    });
    const at = (b + outage) / 1000;
    expect(await series(metrics, 'tock_job_last_misfire_timestamp_seconds')).toEqual({
      'acme/m-1': at,
      'acme/m-2': at,
      'acme/m-3': at,
    });
    expect(await metrics.registry.metrics()).toMatch(/^tock_job_misfired_jobs 4$/m);
  });

  test('last success per job from the database: two servers report the same, a success another process recorded shows up, the N oldest', async () => {
    // A database of its own: the other tests' succeeded runs are not in its N oldest.
    const own = await setupDatabase();
    try {
      const worker = own.newStore(); // the process that runs the jobs and records their successes
      const succeed = async (jobId: string, slot: number, at: number) => {
        const run = await worker.triggerRun({ tenantId: 'ls', jobId, scheduledFor: slot, now: at });
        const [lease] = await worker.claimRuns({ workerId: 'w', pool: 'default', max: 1, now: at });
        expect(lease?.runId).toBe(run.runId);
        const done = await worker.completeRuns({
          leases: [{ runId: lease!.runId, leaseToken: lease!.leaseToken }],
          now: at,
        });
        expect(done.completed).toEqual([run.runId]);
      };
      for (const jobId of ['a', 'b', 'c', 'd', 'never'])
        await upsertJob(worker, { tenantId: 'ls', job: job({ jobId }), now: T0 });
      // a, b, c, d succeed 40, 30, 20, 10 s before the sample; `never` does not.
      const now = T0 + 600_000;
      for (const [i, jobId] of ['a', 'b', 'c', 'd'].entries())
        await succeed(jobId, now - 45_000, now - 40_000 + i * 10_000);
      // Two servers, each with its own store and metrics.
      const servers = [own.newStore(), own.newStore()].map((store) => {
        const clock = new FakeClock(now);
        const metrics = new Metrics({ processMetrics: false, jobGauges: { topJobs: TOP, windowMs: WINDOW } });
        return { clock, metrics, sampler: new RunGaugeSampler({ store, clock, metrics }) };
      });
      const sampled = async () => {
        const out = [];
        for (const s of servers) {
          await s.sampler.refresh();
          const text = await s.metrics.registry.metrics();
          out.push({
            series: await series(s.metrics, 'tock_job_last_success_timestamp_seconds'),
            jobs: /^tock_job_last_success_jobs (\d+)$/m.exec(text)?.[1],
          });
        }
        return out;
      };
      const first = {
        'ls/a': (now - 40_000) / 1000,
        'ls/b': (now - 30_000) / 1000,
        'ls/c': (now - 20_000) / 1000,
      };
      expect(await sampled()).toEqual([
        { series: first, jobs: '4' },
        { series: first, jobs: '4' },
      ]);
      // The other process records a success of a; the next sample of each server shows it.
      await succeed('a', now - 5000, now);
      for (const s of servers) s.clock.advance(METRICS_SAMPLE_MS);
      const second = {
        'ls/b': (now - 30_000) / 1000,
        'ls/c': (now - 20_000) / 1000,
        'ls/d': (now - 10_000) / 1000,
      };
      expect(await sampled()).toEqual([
        { series: second, jobs: '4' },
        { series: second, jobs: '4' },
      ]);
      // A paused job and a one-shot that has run (enabled, no next slot: what the tick leaves of an
      // @at job) have no slot to come: they leave the oldest, else any tenant's such jobs would fill
      // the gauge for good; the next oldest take their places.
      await worker.pauseJob({ tenantId: 'ls', jobId: 'b', now });
      await own.pool.query(`UPDATE jobs SET next_run_at = NULL WHERE tenant_id = 'ls' AND job_id = 'c'`);
      for (const s of servers) s.clock.advance(METRICS_SAMPLE_MS);
      const third = { 'ls/d': (now - 10_000) / 1000, 'ls/a': now / 1000 };
      expect(await sampled()).toEqual([
        { series: third, jobs: '2' },
        { series: third, jobs: '2' },
      ]);
    } finally {
      await own.teardown();
    }
  });
});
