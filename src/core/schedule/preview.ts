/**
 * The preview of a schedule: its next slots after an instant, each with its local time and offset
 * in the schedule's zone and notes where daylight saving moved or repeated a slot, so an operator
 * can check a schedule before deploying it. One function for every reader: `tock schedule` prints
 * it as lines (`previewLines`), `GET /v1/schedule` answers it as JSON, the console shows that.
 * Pure: the instant to start from is an argument.
 */
import { ValidationError } from '../errors.js';
import { nextSlotAfter, parseSchedule, type Schedule } from './schedule.js';
import { instantsOf, offsetAt, transitionsBetween, wallOf } from './timezone.js';

/** Most slots one preview computes. */
export const MAX_PREVIEW_SLOTS = 1000;

function formatOffset(ms: number): string {
  const sign = ms < 0 ? '-' : '+';
  const minutes = Math.abs(ms) / 60_000;
  return `${sign}${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

/** `2026-03-08T03:00:00-04:00`: the local time of `instant` in `zone`, with its offset. */
export function localIso(zone: string, instant: number): string {
  const offset = offsetAt(zone, instant);
  return `${new Date(instant + offset).toISOString().slice(0, 19)}${formatOffset(offset)}`;
}

/** What daylight saving did between the slot before (`prev`) and `slot`, and to `slot` itself. */
function notesOf(schedule: Schedule, zone: string, prev: number, slot: number): string[] {
  const notes: string[] = [];
  for (const tr of transitionsBetween(zone, prev + 1, slot)) {
    const kind = tr.after > tr.before ? 'clocks go forward' : 'clocks go back';
    notes.push(
      `DST: ${kind} ${formatOffset(tr.before)} → ${formatOffset(tr.after)} at ${new Date(tr.at).toISOString()}`,
    );
  }
  if (schedule.kind === 'cron') {
    const atTransition = transitionsBetween(zone, slot, slot).some(
      (tr) => tr.at === slot && tr.after > tr.before,
    );
    if (atTransition && schedule.fixedHour) notes.push('the local time was skipped; fires at the transition');
    const { instants } = instantsOf(zone, wallOf(zone, slot));
    if (instants.length === 2) {
      notes.push(
        schedule.fixedHour
          ? 'the local time repeats; fires at its first occurrence only'
          : `the local time repeats; this is its ${instants[0] === slot ? 'first' : 'second'} occurrence`,
      );
    }
  }
  return notes;
}

export interface PreviewOptions {
  expression: string;
  timezone: string;
  /** How many slots, 1 to `MAX_PREVIEW_SLOTS`. */
  count: number;
  /** Slots strictly after this instant (epoch ms). */
  fromMs: number;
  /**
   * No slot after this instant (epoch ms): the preview stops there (`cut`). Each year a preview
   * crosses costs a table of the zone's offsets for that year, so a caller that takes expressions
   * from others bounds the years (a yearly slot × 100 is a century of tables).
   */
  untilMs?: number;
}

/** One slot of a preview. */
export interface PreviewSlot {
  /** The slot (epoch ms). */
  at: number;
  /** Its local time in the schedule's zone, with the offset (`2026-03-29T03:00:00+02:00`). */
  local: string;
  /** What daylight saving did since the slot before, or to this one; empty: nothing. */
  notes: string[];
}

export interface Preview {
  slots: PreviewSlot[];
  /** The schedule has no slot after the last one listed (a one-shot, an ended schedule). */
  ended: boolean;
  /** The next slot is after `untilMs`: fewer slots than asked, and the schedule goes on. */
  cut: boolean;
}

/** The next `count` slots after `fromMs`. A bad expression, zone or count is a `ValidationError`. */
export function previewSchedule(o: PreviewOptions): Preview {
  if (!Number.isInteger(o.count) || o.count < 1 || o.count > MAX_PREVIEW_SLOTS) {
    throw new ValidationError(`count must be an integer from 1 to ${MAX_PREVIEW_SLOTS}`, { field: 'count' });
  }
  const schedule = parseSchedule(o.expression, o.timezone);
  const slots: PreviewSlot[] = [];
  let prev = o.fromMs;
  for (let i = 0; i < o.count; i++) {
    const slot = nextSlotAfter(schedule, prev);
    if (slot === null) return { slots, ended: true, cut: false };
    if (o.untilMs !== undefined && slot > o.untilMs) return { slots, ended: false, cut: true };
    slots.push({
      at: slot,
      local: localIso(o.timezone, slot),
      notes: notesOf(schedule, o.timezone, prev, slot),
    });
    prev = slot;
  }
  return { slots, ended: false, cut: false };
}

/** The preview as `tock schedule` prints it: one line a slot (no trailing newline). */
export function previewLines(o: PreviewOptions): string[] {
  const { slots, ended } = previewSchedule(o);
  const lines = slots.map(
    (s) =>
      `${new Date(s.at).toISOString()}  ${s.local}${s.notes.length > 0 ? `  # ${s.notes.join('; ')}` : ''}`,
  );
  if (ended)
    lines.push(slots.length === 0 ? '# no slot after --from: the schedule has ended' : '# no more slots');
  return lines;
}
