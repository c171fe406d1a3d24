/**
 * Range backfill: the slots of a job's schedule in `[from, to)` — `from` included, `to` excluded,
 * so that consecutive ranges (`[Jan 1, Feb 1)`, `[Feb 1, Mar 1)`) tile without a shared slot — for
 * `POST /v1/jobs/{job_id}/backfill` to create one run each. The count is bounded
 * (`MAX_BACKFILL_SLOTS`) and checked before anything is written: a range over it, or a reversed
 * one, is a `ValidationError` naming the field. Pure: the store reads the job and writes the runs.
 */
import { ValidationError } from './errors.js';
import { firstSlotFrom, nextSlotAfter, type Schedule } from './schedule/schedule.js';

/** Most slots one backfill creates: a longer range is refused (split it). */
export const MAX_BACKFILL_SLOTS = 10_000;

const iso = (ms: number) => new Date(ms).toISOString();

/** Refuses a reversed range (`from` after `to`); an empty one (`from` = `to`) is allowed. */
export function checkBackfillRange(fromMs: number, toMs: number): void {
  if (fromMs > toMs) {
    throw new ValidationError(`from ${iso(fromMs)} is after to ${iso(toMs)}`, { field: 'from' });
  }
}

/**
 * The slots of `schedule` at or after `fromMs` and before `toMs`, oldest first: every slot the
 * schedule has there (cron read in its timezone, daylight-saving rules included; `@every` aligned
 * to the epoch; a one-shot's instant when it falls in the range). More than `max` is a
 * `ValidationError` naming `to` and the latest `to` that would be accepted. Walks at most `max + 1`
 * slots, so a long range costs no more than a refused one.
 */
export function backfillSlots(
  schedule: Schedule,
  fromMs: number,
  toMs: number,
  max: number = MAX_BACKFILL_SLOTS,
): number[] {
  checkBackfillRange(fromMs, toMs);
  const slots: number[] = [];
  for (let s = firstSlotFrom(schedule, fromMs); s !== null && s < toMs; s = nextSlotAfter(schedule, s)) {
    if (slots.length === max) {
      // `s` is slot max + 1: a range ending at it (excluded) holds exactly `max`.
      throw new ValidationError(
        `from ${iso(fromMs)} to ${iso(toMs)} holds more than ${max} slots of "${schedule.source}"; ` +
          `one backfill creates at most ${max}: split the range (to ${iso(s)} ends the first part)`,
        { field: 'to', max },
      );
    }
    slots.push(s);
  }
  return slots;
}
