/**
 * `tock demo`: the reference design's walk-through, replayed on a FakeClock against the real store
 * (a throwaway schema on the real database). It prints ten lines; each states an outcome the
 * store produced, and the demo fails loudly if an outcome differs from the design's.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  ConflictError,
  countSlotsIn,
  FakeClock,
  type JobInput,
  parseSchedule,
  seededRandom,
  validateJob,
} from '../core/index.js';
import { type ClaimedRun, createPool, type Job, PostgresStore, type TickResult } from '../store/index.js';
import { openDatabase } from './database.js';

const T = (s: number) => s * 1000;
const secs = (d: Date) => String(d.getTime() / 1000);
const quoted = (xs: readonly string[]) => `[${xs.map((x) => `'${x}'`).join(', ')}]`;

function expect(condition: boolean, what: string): void {
  if (!condition) throw new Error(`demo: ${what}`);
}

export interface DemoOptions {
  logger: Logger;
  databaseUrl?: string;
  dataDir?: string;
  print: (line: string) => void;
}

export async function runDemo(o: DemoOptions): Promise<void> {
  const schema = `tock_demo_${randomBytes(4).toString('hex')}`;
  const db = await openDatabase({
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    logger: o.logger,
    schema,
    poolSize: 4,
  });
  try {
    await walkThrough(new PostgresStore(db.pool, { leaseMs: 30_000, random: seededRandom(42) }), o.print);
  } finally {
    const admin = createPool(db.url, { max: 1 });
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await admin.end();
    await db.close();
  }
}

/** What every step of the walk-through shares: the store, the demo's clock and its output. */
interface Demo {
  store: PostgresStore;
  clock: FakeClock;
  tenantId: string;
  /** Prints one of the ten lines: what happened, and the outcome the store produced. */
  line(label: string, outcome: string): void;
  /** Registers (or updates) one job at the demo's time. */
  put(job: JobInput): Promise<Job>;
}

async function walkThrough(store: PostgresStore, print: (line: string) => void): Promise<void> {
  const demo = startDemo(store, print);
  await registerDemoJobs(demo);
  const first = await firstTickCreatesRuns(demo);
  await replayedTickCreatesNothing(demo, first);
  await claimsFollowPriority(demo);
  const stale = await workerDiesHoldingLease(demo);
  await reaperRequeues(demo);
  await lateCompletionRejected(demo, stale);
  await requeuedRunSucceeds(demo, stale);
  await flakyJobDeadLetters(demo);
  await misfirePoliciesAfterDowntime(demo);
}

function startDemo(store: PostgresStore, print: (line: string) => void): Demo {
  const tenantId = 'demo';
  const clock = new FakeClock(T(1000));
  return {
    store,
    clock,
    tenantId,
    line: (label, outcome) => print(`${label.padEnd(35)}-> ${outcome}`),
    put: async (job) =>
      (await store.upsertJobs({ tenantId, jobs: [validateJob(job)], now: clock.nowMs(), withJobs: true }))
        .changes[0]!.job,
  };
}

async function registerDemoJobs({ put }: Demo): Promise<void> {
  await put({ jobId: 'billing', schedule: '@every 500s', handler: 'bill', priority: 5 });
  await put({
    jobId: 'metrics',
    schedule: '@every 10s',
    handler: 'rollup',
    priority: 1,
    misfire: 'fire_once',
  });
  await put({
    jobId: 'report',
    schedule: '@every 100s',
    handler: 'report',
    priority: 9,
    misfire: 'catch_up',
    catchUpLimit: 3,
  });
}

/** 1. The first tick materialises one run per due job. */
async function firstTickCreatesRuns({ store, clock, line }: Demo): Promise<TickResult> {
  const first = await store.tick({ now: clock.nowMs(), lookaheadMs: 0, batchSize: 100 });
  const firstJobs = first.created.map((r) => r.jobId).sort();
  expect(firstJobs.length === 3, 'the first tick should create three runs');
  line(`tick at t=${secs(clock.now())}: ${first.jobs} jobs due`, `runs ${quoted(firstJobs)}`);
  return first;
}

/** 2. A second scheduler replays the same tick, and re-inserts the same slots: the unique index wins. */
async function replayedTickCreatesNothing(
  { store, clock, tenantId, line }: Demo,
  first: TickResult,
): Promise<void> {
  const replay = await store.tick({ now: clock.nowMs(), lookaheadMs: 0, batchSize: 100 });
  let duplicates = 0;
  for (const r of first.created) {
    try {
      await store.triggerRun({
        tenantId,
        jobId: r.jobId,
        scheduledFor: r.scheduledFor.getTime(),
        now: clock.nowMs(),
      });
      duplicates += 1;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
    }
  }
  expect(replay.created.length + duplicates === 0, 'a replayed tick must create no run');
  line('the same tick replayed', `${replay.created.length + duplicates} new runs (unique on job_id + slot)`);
}

/** 3. Worker 1 claims twice: the highest priority first. */
async function claimsFollowPriority({ store, clock, line }: Demo): Promise<void> {
  const executed: string[] = [];
  for (let i = 0; i < 2; i++) {
    const [run] = await store.claimRuns({ workerId: 'w-1', pool: 'default', max: 1, now: clock.nowMs() });
    expect(run !== undefined, 'w-1 should get a run');
    executed.push(run!.jobId);
    await store.completeRuns({ leases: [run!], now: clock.nowMs() });
  }
  expect(executed.join() === 'report,billing', 'priority 9 should run before 5');
  line('w-1 claims twice', `executed ${quoted(executed)} (priority 9 before 5)`);
}

/** 4. Worker 2 claims the last run and dies holding it. */
async function workerDiesHoldingLease({ store, clock, line }: Demo): Promise<ClaimedRun> {
  const [stale] = await store.claimRuns({ workerId: 'w-2', pool: 'default', max: 1, now: clock.nowMs() });
  expect(stale?.jobId === 'metrics', 'w-2 should get metrics');
  line(`w-2 claims ${stale!.jobId} then dies`, `lease held until t=${secs(stale!.leaseExpiresAt)}`);
  return stale!;
}

/** 5. Past the lease, the reaper requeues the run for its next attempt. */
async function reaperRequeues({ store, clock, line }: Demo): Promise<void> {
  clock.advance(T(31));
  const reaped = await store.reapExpired({ now: clock.nowMs(), batchSize: 100 });
  expect(reaped.requeued.length === 1, 'the reaper should requeue one run');
  line(
    '31 s later, the reaper runs',
    `requeued ${quoted(reaped.requeued.map((r) => r.jobId))}, attempt ${reaped.requeued[0]!.attempt}`,
  );
}

/** 6. The dead worker wakes up: its token is stale, so its completion is refused. */
async function lateCompletionRejected({ store, clock, line }: Demo, stale: ClaimedRun): Promise<void> {
  const late = await store.completeRuns({ leases: [stale], now: clock.nowMs() });
  expect(late.lost.length === 1, 'the late completion must be rejected');
  line(
    'w-2 wakes up and completes late',
    `rejected: w-2 no longer holds the lease on ${stale.runId.slice(0, 8)}`,
  );
}

/** 7. After the backoff, worker 3 picks it up and succeeds. */
async function requeuedRunSucceeds({ store, clock, tenantId, line }: Demo, stale: ClaimedRun): Promise<void> {
  clock.advance(T(5));
  const [retry] = await store.claimRuns({ workerId: 'w-3', pool: 'default', max: 1, now: clock.nowMs() });
  expect(retry?.runId === stale.runId && retry.attempt === 2, 'w-3 should get attempt 2 of the same run');
  await store.completeRuns({ leases: [retry!], now: clock.nowMs() });
  const counts = Object.entries(await store.countRuns({ tenantId })).filter(([, n]) => n > 0);
  line(
    'w-3 picks up the requeued run',
    `executed ${retry!.jobId}#${retry!.attempt}, states {${counts.map(([s, n]) => `'${s}': ${n}`).join(', ')}}`,
  );
}

/** 8. A flaky job fails on both of its attempts and is dead-lettered. */
async function flakyJobDeadLetters({ store, clock, tenantId, line, put }: Demo): Promise<void> {
  await put({ jobId: 'flaky', schedule: '@every 3600s', handler: 'call-upstream', maxAttempts: 2 });
  await store.triggerRun({ tenantId, jobId: 'flaky', now: clock.nowMs() });
  for (let attempt = 1; attempt <= 2; attempt++) {
    const [run] = await store.claimRuns({ workerId: 'w-1', pool: 'default', max: 1, now: clock.nowMs() });
    expect(run?.jobId === 'flaky', `flaky attempt ${attempt} should be claimable`);
    await store.failRun({
      runId: run!.runId,
      leaseToken: run!.leaseToken,
      error: 'upstream 500',
      now: clock.nowMs(),
    });
    clock.advance(T(3));
  }
  const dead = (await store.listRuns({ tenantId, state: 'dead', limit: 50 })).items;
  line(
    `flaky fails twice (max_attempts 2)`,
    `dead letters [${dead.map((r) => `('${r.jobId}', '${r.lastError}')`).join(', ')}]`,
  );
}

/** 9-10. The scheduler is down for 350 s after its last tick; the misfire policies decide. */
async function misfirePoliciesAfterDowntime({ store, clock, line }: Demo): Promise<void> {
  clock.set(T(1350));
  const after = await store.tick({ now: clock.nowMs(), lookaheadMs: 0, batchSize: 100 });
  const report = after.created
    .filter((r) => r.jobId === 'report')
    .map((r) => secs(r.scheduledFor))
    .sort();
  const metrics = after.created.filter((r) => r.jobId === 'metrics');
  const missed = countSlotsIn(parseSchedule('@every 10s'), T(1010), T(1350));
  expect(report.length === 3 && metrics.length === 1, 'catch_up should backfill 3 and fire_once create 1');
  line('scheduler down 350 s, catch_up 3', `report backfilled ${report.length} slots at ${quoted(report)}`);
  line('metrics uses fire_once', `${metrics.length} run, not ${missed}`);
}
