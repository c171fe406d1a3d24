/**
 * Misfire policies: what a tick does with the slots a job missed while no scheduler ran it.
 * A job is *behind* when its `next_run_at` is older than the misfire threshold; only then does
 * its policy apply, so a tick that is merely a few seconds late (a herd draining) fires every slot.
 *
 *  - `skip`: forget every missed slot, resume with the next future one.
 *  - `fire_once`: run the most recent missed slot once, then resume (the default).
 *  - `catch_up`: run the most recent `catch_up_limit` missed slots, then resume.
 */
import { ValidationError } from './errors.js';
import { countSlotsIn, lastSlotsIn, nextSlotAfter, type Schedule } from './schedule/schedule.js';

export const MISFIRE_POLICIES = ['skip', 'fire_once', 'catch_up'] as const;
export type MisfirePolicy = (typeof MISFIRE_POLICIES)[number];

export function parseMisfirePolicy(value: string): MisfirePolicy {
  if ((MISFIRE_POLICIES as readonly string[]).includes(value)) return value as MisfirePolicy;
  throw new ValidationError(`misfire "${value}" is not one of ${MISFIRE_POLICIES.join(', ')}`);
}

/** Largest `catch_up_limit` a job may set: a day-long outage must not become a flood. */
export const MAX_CATCH_UP_LIMIT = 1000;
/** Most slots one job materialises in one tick when on time (a fine `@every` inside the lookahead). */
export const MAX_SLOTS_PER_TICK = 1000;

export interface SlotPlanInput {
  schedule: Schedule;
  /** The job's `next_run_at`: its earliest slot not yet materialised. */
  nextRunAt: number;
  now: number;
  /** Slots up to `now + lookaheadMs` are materialised now (they become claimable at their slot). */
  lookaheadMs: number;
  /** A job whose `next_run_at` is older than `now − misfireThresholdMs` is behind. */
  misfireThresholdMs: number;
  policy: MisfirePolicy;
  catchUpLimit: number;
}

export interface SlotPlan {
  /** Slots to materialise as runs, oldest first. */
  slots: number[];
  /** Slots the policy dropped (exact for `@every`; for cron `null` when there were too many to count). */
  dropped: number | null;
  /** The job's new `next_run_at`: the first slot after everything considered, or `null` when exhausted. */
  nextRunAt: number | null;
}

/** Decides which slots of one job a tick at `now` materialises. Pure. */
export function planSlots(input: SlotPlanInput): SlotPlan {
  const { schedule, nextRunAt, now, lookaheadMs, misfireThresholdMs, policy, catchUpLimit } = input;
  const horizon = now + lookaheadMs;
  const behind = nextRunAt < now - misfireThresholdMs;
  const slots: number[] = [];
  let dropped: number | null = 0;
  let cursor: number | null = nextRunAt;

  if (behind) {
    // Slots in [nextRunAt, now] are the missed window; the policy keeps the most recent `keep`.
    const keep = policy === 'skip' ? 0 : policy === 'fire_once' ? 1 : catchUpLimit;
    // Exact for @every; for cron only a short backlog is counted (walking a long one costs a tick).
    const missed = countSlotsIn(schedule, nextRunAt, now, 1000);
    const kept = lastSlotsIn(schedule, nextRunAt, now, keep);
    slots.push(...kept);
    dropped = missed === null ? null : Math.max(0, missed - kept.length);
    cursor = nextSlotAfter(schedule, now);
  }
  while (cursor !== null && cursor <= horizon && slots.length < MAX_SLOTS_PER_TICK + catchUpLimit) {
    slots.push(cursor);
    cursor = nextSlotAfter(schedule, cursor);
  }
  return { slots, dropped, nextRunAt: cursor };
}
