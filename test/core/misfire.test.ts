import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/errors.js';
import {
  MAX_SLOTS_PER_TICK,
  MISFIRE_POLICIES,
  type MisfirePolicy,
  parseMisfirePolicy,
  planSlots,
  type SlotPlanInput,
} from '../../src/core/misfire.js';
import { firstSlotFrom, parseSchedule } from '../../src/core/schedule/schedule.js';

const DAY = 86_400_000;
const every10s = parseSchedule('@every 10s');
const every100s = parseSchedule('@every 100s');

/** The outage scenario: next_run_at 1010 s, the tick runs at 1350 s. */
function behind(overrides: Partial<SlotPlanInput> = {}): SlotPlanInput {
  return {
    schedule: every10s,
    nextRunAt: 1_010_000,
    now: 1_350_000,
    lookaheadMs: 0,
    misfireThresholdMs: 60_000,
    policy: 'fire_once',
    catchUpLimit: 3,
    ...overrides,
  };
}

describe('planSlots when the job is behind', () => {
  it('skip drops every missed slot and resumes with the next future one', () => {
    expect(planSlots(behind({ policy: 'skip' }))).toEqual({ slots: [], dropped: 35, nextRunAt: 1_360_000 });
  });

  it('fire_once runs only the most recent missed slot', () => {
    expect(planSlots(behind({ policy: 'fire_once' }))).toEqual({
      slots: [1_350_000],
      dropped: 34,
      nextRunAt: 1_360_000,
    });
  });

  it('catch_up runs the most recent catch_up_limit missed slots, oldest first', () => {
    expect(planSlots(behind({ policy: 'catch_up', catchUpLimit: 3 }))).toEqual({
      slots: [1_330_000, 1_340_000, 1_350_000],
      dropped: 32,
      nextRunAt: 1_360_000,
    });
  });

  it('catch_up on @every 100s runs every missed slot when within the limit', () => {
    const input = behind({ schedule: every100s, nextRunAt: 1_100_000, policy: 'catch_up', catchUpLimit: 3 });
    expect(planSlots(input)).toEqual({
      slots: [1_100_000, 1_200_000, 1_300_000],
      dropped: 0,
      nextRunAt: 1_400_000,
    });
  });

  it('catch_up limit 2 keeps the last two', () => {
    const input = behind({ schedule: every100s, nextRunAt: 1_100_000, policy: 'catch_up', catchUpLimit: 2 });
    expect(planSlots(input)).toEqual({ slots: [1_200_000, 1_300_000], dropped: 1, nextRunAt: 1_400_000 });
  });

  it('still materialises the slots inside the lookahead after applying the policy', () => {
    expect(planSlots(behind({ policy: 'fire_once', lookaheadMs: 25_000 }))).toEqual({
      slots: [1_350_000, 1_360_000, 1_370_000],
      dropped: 34,
      nextRunAt: 1_380_000,
    });
    expect(planSlots(behind({ policy: 'skip', lookaheadMs: 25_000 }))).toEqual({
      slots: [1_360_000, 1_370_000],
      dropped: 35,
      nextRunAt: 1_380_000,
    });
  });

  it('is behind only when next_run_at is older than now minus the threshold', () => {
    // Exactly at the threshold: not behind, so even skip fires every slot.
    expect(planSlots(behind({ policy: 'skip', nextRunAt: 1_290_000 }))).toEqual({
      slots: [1_290_000, 1_300_000, 1_310_000, 1_320_000, 1_330_000, 1_340_000, 1_350_000],
      dropped: 0,
      nextRunAt: 1_360_000,
    });
    // One slot further back: behind.
    expect(planSlots(behind({ policy: 'skip', nextRunAt: 1_280_000 }))).toEqual({
      slots: [],
      dropped: 8,
      nextRunAt: 1_360_000,
    });
  });

  it('a cron job behind by 30 days with fire_once runs exactly one slot: the latest at or before now', () => {
    const schedule = parseSchedule('0 * * * *');
    const now = Date.parse('2026-03-15T10:20:00Z');
    const nextRunAt = firstSlotFrom(schedule, now - 30 * DAY);
    expect(nextRunAt).toBe(Date.parse('2026-02-13T11:00:00Z'));
    const plan = planSlots({
      schedule,
      nextRunAt: nextRunAt as number,
      now,
      lookaheadMs: 0,
      misfireThresholdMs: 60_000,
      policy: 'fire_once',
      catchUpLimit: 10,
    });
    expect(plan).toEqual({
      slots: [Date.parse('2026-03-15T10:00:00Z')],
      dropped: 30 * 24 - 1,
      nextRunAt: Date.parse('2026-03-15T11:00:00Z'),
    });
  });

  it('a cron job behind with catch_up runs the last slots before now', () => {
    const schedule = parseSchedule('0 * * * *');
    const now = Date.parse('2026-03-15T10:20:00Z');
    const plan = planSlots({
      schedule,
      nextRunAt: Date.parse('2026-03-14T11:00:00Z'),
      now,
      lookaheadMs: 0,
      misfireThresholdMs: 60_000,
      policy: 'catch_up',
      catchUpLimit: 3,
    });
    expect(plan.slots.map((s) => new Date(s).toISOString())).toEqual([
      '2026-03-15T08:00:00.000Z',
      '2026-03-15T09:00:00.000Z',
      '2026-03-15T10:00:00.000Z',
    ]);
    expect(plan.dropped).toBe(24 - 3);
    expect(plan.nextRunAt).toBe(Date.parse('2026-03-15T11:00:00Z'));
  });
});

describe('planSlots when the job is on time', () => {
  const now = 1_700_000_000_000;

  it.each(MISFIRE_POLICIES)('materialises every slot up to now + lookahead (%s)', (policy) => {
    const plan = planSlots({
      schedule: parseSchedule('@every 1s'),
      nextRunAt: now,
      now,
      lookaheadMs: 1_000,
      misfireThresholdMs: 60_000,
      policy,
      catchUpLimit: 10,
    });
    expect(plan).toEqual({ slots: [now, now + 1_000], dropped: 0, nextRunAt: now + 2_000 });
  });

  it.each(MISFIRE_POLICIES)(
    'a tick a few seconds late fires every slot regardless of policy (%s)',
    (policy) => {
      const plan = planSlots({
        schedule: parseSchedule('@every 1s'),
        nextRunAt: now - 5_000,
        now,
        lookaheadMs: 0,
        misfireThresholdMs: 60_000,
        policy,
        catchUpLimit: 1,
      });
      expect(plan).toEqual({
        slots: [now - 5_000, now - 4_000, now - 3_000, now - 2_000, now - 1_000, now],
        dropped: 0,
        nextRunAt: now + 1_000,
      });
    },
  );

  it('materialises nothing when the next slot is beyond the lookahead', () => {
    expect(
      planSlots({
        schedule: every10s,
        nextRunAt: 1_360_000,
        now: 1_350_001,
        lookaheadMs: 5_000,
        misfireThresholdMs: 60_000,
        policy: 'fire_once',
        catchUpLimit: 10,
      }),
    ).toEqual({ slots: [], dropped: 0, nextRunAt: 1_360_000 });
  });

  it('caps the slots of one tick and resumes where it stopped', () => {
    const plan = planSlots({
      schedule: parseSchedule('@every 1s'),
      nextRunAt: now,
      now,
      lookaheadMs: 3_600_000,
      misfireThresholdMs: 60_000,
      policy: 'fire_once',
      catchUpLimit: 10,
    });
    const cap = MAX_SLOTS_PER_TICK + 10;
    expect(plan.slots).toHaveLength(cap);
    expect(plan.slots[0]).toBe(now);
    expect(plan.slots[cap - 1]).toBe(now + (cap - 1) * 1_000);
    expect(plan.nextRunAt).toBe(now + cap * 1_000);
  });
});

describe('planSlots for @at jobs', () => {
  const at = Date.parse('2026-12-24T18:00:00Z');
  const schedule = parseSchedule('@at 2026-12-24T18:00:00Z');
  const input = (nextRunAt: number, now: number, policy: MisfirePolicy = 'fire_once'): SlotPlanInput => ({
    schedule,
    nextRunAt,
    now,
    lookaheadMs: 1_000,
    misfireThresholdMs: 60_000,
    policy,
    catchUpLimit: 10,
  });

  it('fires once on time and is then exhausted', () => {
    expect(planSlots(input(at, at - 500))).toEqual({ slots: [at], dropped: 0, nextRunAt: null });
    expect(planSlots(input(at, at + 2_000))).toEqual({ slots: [at], dropped: 0, nextRunAt: null });
  });

  it('waits while the instant is beyond the lookahead', () => {
    expect(planSlots(input(at, at - 60_000))).toEqual({ slots: [], dropped: 0, nextRunAt: at });
  });

  it('fires once when behind with fire_once or catch_up, and not at all with skip', () => {
    expect(planSlots(input(at, at + DAY, 'fire_once'))).toEqual({ slots: [at], dropped: 0, nextRunAt: null });
    expect(planSlots(input(at, at + DAY, 'catch_up'))).toEqual({ slots: [at], dropped: 0, nextRunAt: null });
    expect(planSlots(input(at, at + DAY, 'skip'))).toEqual({ slots: [], dropped: 1, nextRunAt: null });
  });
});

describe('parseMisfirePolicy', () => {
  it('accepts the three policies', () => {
    expect(MISFIRE_POLICIES).toEqual(['skip', 'fire_once', 'catch_up']);
    for (const p of MISFIRE_POLICIES) expect(parseMisfirePolicy(p)).toBe(p);
  });

  it('rejects anything else', () => {
    expect(() => parseMisfirePolicy('sometimes')).toThrow(ValidationError);
    expect(() => parseMisfirePolicy('Skip')).toThrow(
      /misfire "Skip" is not one of skip, fire_once, catch_up/,
    );
  });
});
