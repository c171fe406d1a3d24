/**
 * Starvation (issue 18): priority ageing bounds how long a low-priority run waits behind a stream
 * of higher-priority ones. A priority-p run available at t has the key t − p × step; a priority-q
 * run available at u has u − q × step: the first goes first exactly when u > t + (q − p) × step
 * (docs/architecture.md, "Priority ageing"). Here, on a FakeClock with a 1 s step, a priority-9 job
 * gets one (or two) new runs every 500 ms tick and a worker claims one run per tick; a priority-0
 * run arrives off the tick grid (no tie of keys). Checked on the history of claims: which runs went
 * before it, and when it was claimed. With a one-day step (no ageing within the test) the same
 * stream starves it, so the bound is ageing's doing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FakeClock, MAX_AGING_STEP_MS, sortKey, ValidationError } from '../../src/core/index.js';
import { PostgresStore } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const STEP = 1000;
const TICK = 500;
/** The priority-0 run becomes available 100 ms after the tenth tick: keys never tie. */
const LOW_AT = T0 + 10 * TICK + 100;
/** Ticks each stream runs at most: 40 s, four times the bound of a stream the worker keeps up with. */
const HORIZON = 80;

interface Claimed {
  runId: string;
  priority: number;
  availableAt: number;
  claimedAt: number;
}

/**
 * Runs the stream on `store` in a tenant of its own: each tick, `arrivals` new priority-9 runs
 * available at the tick, the priority-0 run once its instant has passed, then one claim of one run.
 * Stops once the priority-0 run is claimed, or after HORIZON ticks. Returns every claim in order.
 */
async function stream(store: PostgresStore, arrivals: number): Promise<{ claims: Claimed[]; low: string }> {
  const tenantId = uniqueId('starve');
  // A clock of its own per stream (each in its own tenant), every stream from T0.
  const clock = new FakeClock(T0);
  const now0 = clock.nowMs();
  const high = [];
  for (let k = 0; k < arrivals; k++) {
    const def = job({ priority: 9 });
    await upsertJob(store, { tenantId, job: def, now: now0 });
    high.push(def.jobId);
  }
  const lowJob = job({ priority: 0 });
  await upsertJob(store, { tenantId, job: lowJob, now: now0 });
  const priorities = new Map<string, number>();
  const availability = new Map<string, number>();
  let low: string | null = null;
  const claims: Claimed[] = [];
  for (let i = 0; i < HORIZON; i++) {
    clock.set(T0 + i * TICK);
    const now = clock.nowMs();
    for (const jobId of high) {
      const run = await store.triggerRun({ tenantId, jobId, scheduledFor: now, now });
      priorities.set(run.runId, 9);
      availability.set(run.runId, run.availableAt.getTime());
    }
    if (low === null && LOW_AT <= now) {
      const run = await store.triggerRun({
        tenantId,
        jobId: lowJob.jobId,
        scheduledFor: LOW_AT,
        now: LOW_AT,
      });
      expect(run.availableAt.getTime()).toBe(LOW_AT);
      low = run.runId;
      priorities.set(run.runId, 0);
      availability.set(run.runId, LOW_AT);
    }
    const taken = await store.claimRuns({ workerId: 'w-starve', pool: 'default', max: 1, now, tenantId });
    expect(taken).toHaveLength(1);
    for (const r of taken)
      claims.push({
        runId: r.runId,
        priority: priorities.get(r.runId) ?? -1,
        availableAt: availability.get(r.runId) ?? Number.NaN,
        claimedAt: now,
      });
    if (low !== null && claims.some((c) => c.runId === low)) break;
  }
  if (low === null) throw new Error('the priority-0 run was never triggered');
  return { claims, low };
}

/** The priority-9 runs that went before `low`, and every priority-9 run available before the cut-off. */
function split(claims: Claimed[], low: string, cutoff: number) {
  const at = claims.findIndex((c) => c.runId === low);
  const before = at < 0 ? claims : claims.slice(0, at);
  return {
    claimedAt: at < 0 ? null : (claims[at]?.claimedAt ?? null),
    before,
    overtakers: before.filter((c) => c.availableAt > cutoff),
  };
}

describe('a priority-0 run amid a steady stream of priority-9 runs', () => {
  test('is claimed within 9 steps and one tick when the worker keeps up with the stream', async () => {
    const { claims, low } = await stream(db.newStore({ agingStepMs: STEP }), 1);
    const cutoff = LOW_AT + 9 * STEP;
    const { claimedAt, before, overtakers } = split(claims, low, cutoff);
    expect(claimedAt).not.toBeNull();
    const waited = (claimedAt ?? 0) - LOW_AT;
    expect(waited).toBeLessThanOrEqual(9 * STEP + TICK);
    // It did wait: every priority-9 run ready within 9 steps after it went first (strict
    // priority among runs close together), and none ready later.
    expect(waited).toBeGreaterThanOrEqual(9 * STEP);
    expect(overtakers).toEqual([]);
    const readyBeforeCutoff = before.filter((c) => c.availableAt > LOW_AT);
    expect(readyBeforeCutoff).toHaveLength(9 * (STEP / TICK));
    expect(before.every((c) => c.priority === 9)).toBe(true);
    // The worker took one run per tick and never stood idle.
    expect(claims.map((c) => c.claimedAt)).toEqual(claims.map((_, i) => T0 + i * TICK));
  });

  test('is claimed once the runs ready before t + 9 steps are, when the stream outruns the worker', async () => {
    const { claims, low } = await stream(db.newStore({ agingStepMs: STEP }), 2);
    const cutoff = LOW_AT + 9 * STEP;
    const { claimedAt, before, overtakers } = split(claims, low, cutoff);
    expect(claimedAt).not.toBeNull();
    // Exactly the priority-9 runs ready before t + 9 steps went first: those still waiting at t
    // and the ones arriving in the 9 steps after it. None ready later overtook it, though twice as
    // many arrive as are claimed: its wait is the time to claim that finite set, here 23.9 s.
    expect(overtakers).toEqual([]);
    const ticksToCutoff = Math.floor((cutoff - T0) / TICK) + 1;
    expect(before).toHaveLength(2 * ticksToCutoff);
    // One claim per tick: it is the claim after those.
    expect(claimedAt).toBe(T0 + before.length * TICK);
    expect((claimedAt ?? 0) - LOW_AT).toBe(23_900);
    expect((claimedAt ?? 0) - LOW_AT).toBeGreaterThan(9 * STEP + TICK);
  });

  test('starves without ageing: with a one-day step it is not claimed within the horizon', async () => {
    const { claims, low } = await stream(db.newStore({ agingStepMs: MAX_AGING_STEP_MS }), 1);
    const { claimedAt, before } = split(claims, low, LOW_AT + 9 * MAX_AGING_STEP_MS);
    expect(claimedAt).toBeNull();
    expect(before).toHaveLength(HORIZON);
    expect(before.every((c) => c.priority === 9)).toBe(true);
  });
});

describe('the ageing step of a store', () => {
  test('writes the keys of runs it triggers with its step', async () => {
    const tenantId = uniqueId('step');
    const store = db.newStore({ agingStepMs: 7000 });
    const def = job({ priority: 3 });
    await upsertJob(store, { tenantId, job: def, now: T0 });
    const run = await store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: T0, now: T0 });
    const { rows } = await db.pool.query('SELECT sort_key FROM run_queue WHERE run_id = $1', [run.runId]);
    expect((rows[0].sort_key as Date).getTime()).toBe(sortKey(T0, 3, 7000));
    expect(store.agingStepMs).toBe(7000);
  });

  test.each([0, -1000, 999, MAX_AGING_STEP_MS + 1, 1500.5, Number.NaN])(
    'refuses %s ms, naming agingStepMs',
    (agingStepMs) => {
      let caught: unknown;
      try {
        new PostgresStore(db.pool, { agingStepMs });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ValidationError);
      expect((caught as ValidationError).details).toEqual({ field: 'agingStepMs' });
      expect((caught as ValidationError).message).toContain('agingStepMs must be from 1s to 1d');
    },
  );

  test('accepts the bounds, and defaults to 60 s', () => {
    expect(new PostgresStore(db.pool, { agingStepMs: 1000 }).agingStepMs).toBe(1000);
    expect(new PostgresStore(db.pool, { agingStepMs: MAX_AGING_STEP_MS }).agingStepMs).toBe(
      MAX_AGING_STEP_MS,
    );
    expect(new PostgresStore(db.pool).agingStepMs).toBe(60_000);
  });
});
