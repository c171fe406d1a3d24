/**
 * `tock schedule`: the next slots of an expression, one per line, the UTC instant first, then the
 * local time with its offset, then a note where daylight saving moved or repeated a slot, so an
 * operator can check a schedule before deploying it.
 */
import {
  instantsOf,
  nextSlotAfter,
  offsetAt,
  parseSchedule,
  type Schedule,
  transitionsBetween,
  ValidationError,
  wallOf,
} from '../core/index.js';

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

function note(schedule: Schedule, zone: string, prev: number, slot: number): string {
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
  return notes.join('; ');
}

export interface PreviewOptions {
  expression: string;
  timezone: string;
  count: number;
  /** Slots strictly after this instant. */
  fromMs: number;
}

/** The preview's lines (no trailing newline). A bad expression is a `ValidationError`. */
export function previewSchedule(o: PreviewOptions): string[] {
  if (!Number.isInteger(o.count) || o.count < 1 || o.count > 1000) {
    throw new ValidationError('count must be an integer from 1 to 1000');
  }
  const schedule = parseSchedule(o.expression, o.timezone);
  const zone = o.timezone;
  const lines: string[] = [];
  let prev = o.fromMs;
  for (let i = 0; i < o.count; i++) {
    const slot = nextSlotAfter(schedule, prev);
    if (slot === null) {
      lines.push(i === 0 ? '# no slot after --from: the schedule has ended' : '# no more slots');
      break;
    }
    const n = note(schedule, zone, prev, slot);
    lines.push(`${new Date(slot).toISOString()}  ${localIso(zone, slot)}${n ? `  # ${n}` : ''}`);
    prev = slot;
  }
  return lines;
}
