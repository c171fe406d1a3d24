/** `planTick`: what one tick writes for one due job (runs, next_run_at), or why it parks the job. */
import { describe, expect, it } from 'vitest';
import {
  type DueJob,
  jitterOffsetMs,
  parseSchedule,
  planSlots,
  planTick,
  type TickPlanInput,
} from '../../src/core/index.js';

const T0 = Date.UTC(2026, 0, 1);
const AGING = 60_000;

function due(overrides: Partial<DueJob> = {}): DueJob {
  return {
    tenantId: 't',
    jobId: 'j',
    schedule: '@every 10s',
    timezone: 'UTC',
    nextRunAt: T0,
    misfire: 'fire_once',
    catchUpLimit: 10,
    priority: 0,
    jitterSeconds: 0,
    misfireThresholdSeconds: null,
    ...overrides,
  };
}

function plan(job: Partial<DueJob>, overrides: Partial<TickPlanInput> = {}) {
  return planTick({
    job: due(job),
    now: T0,
    lookaheadMs: 25_000,
    misfireThresholdMs: 60_000,
    agingStepMs: AGING,
    ...overrides,
  });
}

describe('planTick', () => {
  it('an on-time job: every slot up to now + lookahead, available at its slot, next_run_at the first after', () => {
    expect(plan({})).toEqual({
      runs: [
        { scheduledFor: T0, availableAt: T0, sortKey: T0 },
        { scheduledFor: T0 + 10_000, availableAt: T0 + 10_000, sortKey: T0 + 10_000 },
        { scheduledFor: T0 + 20_000, availableAt: T0 + 20_000, sortKey: T0 + 20_000 },
      ],
      dropped: 0,
      misfired: false,
      nextRunAt: T0 + 30_000,
      parked: null,
    });
  });

  it("the job's jitter delays each run's availability (not its slot) and its priority orders the queue", () => {
    const job = due({ jitterSeconds: 300, priority: 5 });
    const jitter = jitterOffsetMs(job.tenantId, job.jobId, 300);
    expect(jitter).toBeGreaterThan(0);
    const p = plan(job, { lookaheadMs: 0 });
    expect(p.runs).toEqual([
      { scheduledFor: T0, availableAt: T0 + jitter, sortKey: T0 + jitter - 5 * AGING },
    ]);
  });

  it('a job behind by more than the threshold follows its misfire policy and counts what it drops', () => {
    const nextRunAt = T0 - 300_000; // 30 slots of 10 s missed, 5 minutes behind
    const skip = plan({ nextRunAt, misfire: 'skip' }, { lookaheadMs: 0 });
    expect(skip).toMatchObject({
      runs: [],
      dropped: 31,
      misfired: true,
      nextRunAt: T0 + 10_000,
      parked: null,
    });
    const once = plan({ nextRunAt, misfire: 'fire_once' }, { lookaheadMs: 0 });
    expect(once.runs.map((r) => r.scheduledFor)).toEqual([T0]);
    expect(once.dropped).toBe(30);
  });

  it('a cron backlog too long to count is a misfire without a count', () => {
    const p = plan(
      { schedule: '* * * * *', nextRunAt: T0 - 2000 * 60_000, misfire: 'skip' },
      { lookaheadMs: 0 },
    );
    expect(p).toMatchObject({ runs: [], dropped: 0, misfired: true });
  });

  it("the job's own misfire threshold replaces the store's, in seconds", () => {
    const nextRunAt = T0 - 300_000;
    // 10 minutes of tolerance: not behind, every missed slot is materialised.
    const lenient = plan({ nextRunAt, misfire: 'skip', misfireThresholdSeconds: 600 }, { lookaheadMs: 0 });
    expect(lenient.runs).toHaveLength(31);
    expect(lenient.dropped).toBe(0);
    expect(lenient.misfired).toBe(false);
    // The store's 60 s: behind, skip drops them.
    expect(plan({ nextRunAt, misfire: 'skip' }, { lookaheadMs: 0 }).runs).toEqual([]);
  });

  it('plans the slots planSlots decides', () => {
    const job = due({
      schedule: '*/5 * * * *',
      nextRunAt: T0 - 3_600_000,
      misfire: 'catch_up',
      catchUpLimit: 3,
    });
    const slots = planSlots({
      schedule: parseSchedule(job.schedule, job.timezone),
      nextRunAt: job.nextRunAt,
      now: T0,
      lookaheadMs: 0,
      misfireThresholdMs: 60_000,
      policy: 'catch_up',
      catchUpLimit: 3,
    });
    const p = plan(job, { lookaheadMs: 0 });
    expect(p.runs.map((r) => r.scheduledFor)).toEqual(slots.slots);
    expect(p.nextRunAt).toBe(slots.nextRunAt);
    expect(p.dropped).toBe(slots.dropped);
  });

  it('a one-shot that fired has no next run', () => {
    const at = T0 + 5000;
    expect(plan({ schedule: `@at ${new Date(at).toISOString()}`, nextRunAt: at })).toEqual({
      runs: [{ scheduledFor: at, availableAt: at, sortKey: at }],
      dropped: 0,
      misfired: false,
      nextRunAt: null,
      parked: null,
    });
  });

  it('a stored schedule that no longer parses parks the job: no runs, next_run_at null, the reason', () => {
    const p = plan({ schedule: '0 9 * * *', timezone: 'Mars/Olympus_Mons' });
    expect(p.runs).toEqual([]);
    expect(p.nextRunAt).toBeNull();
    expect(p.dropped).toBe(0);
    expect(p.parked).toMatch(/timezone|Mars/);
  });

  it('reads the schedule through the parser it is given (the store caches parsed schedules)', () => {
    const seen: string[] = [];
    const parse = (source: string, timezone: string) => {
      seen.push(`${timezone} ${source}`);
      return parseSchedule(source, timezone);
    };
    plan({}, { parse });
    expect(seen).toEqual(['UTC @every 10s']);
    const failing = plan(
      {},
      {
        parse: () => {
          throw new Error('no such zone');
        },
      },
    );
    expect(failing.parked).toBe('no such zone');
  });
});
