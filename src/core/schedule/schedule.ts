/**
 * Schedules: the one string a job carries (`0 3 * * *`, `@daily`, `@every 5m`, `@at 2026-12-24T18:00:00Z`)
 * parsed once into a value that answers "which slot comes next". Slots are epoch milliseconds.
 * Cron is evaluated by croner in the job's IANA timezone; `@every` slots are aligned to the
 * Unix epoch so that re-registering a job never shifts them.
 */
import { Cron } from 'croner';
import { formatDuration, parseDuration } from '../duration.js';
import { ValidationError } from '../errors.js';
import { checkCronFields } from './cron-fields.js';
import { offsetAt, transitionsBetween } from './timezone.js';

export type Schedule =
  | { readonly kind: 'every'; readonly source: string; readonly everyMs: number }
  | { readonly kind: 'at'; readonly source: string; readonly atMs: number }
  | {
      readonly kind: 'cron';
      readonly source: string;
      readonly timezone: string;
      /** The pattern evaluated on local wall-clock time (local ms, as if UTC). */
      readonly wall: Cron;
      /** Fixed hours (`0 2 * * *`) or wildcard or step hours (`@hourly`): decides the DST rule. */
      readonly fixedHour: boolean;
    };

const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;

/** True when `timezone` is an IANA name this runtime knows (`UTC`, `Europe/Berlin`, …). */
export function isValidTimezone(timezone: string): boolean {
  if (timezone === '' || timezone.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

/** Parses an ISO-8601 instant with an explicit offset (`Z` or `±hh:mm`) into epoch ms. */
export function parseInstant(text: string, what = 'instant'): number {
  if (!ISO_INSTANT.test(text)) {
    throw new ValidationError(
      `${what} "${text}" is not an ISO-8601 instant with an offset, e.g. 2026-12-24T18:00:00Z`,
    );
  }
  const ms = Date.parse(text);
  // Date.parse rolls an impossible day over (Feb 30 → Mar 2): check the calendar date exists.
  const [y, m, d] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
  const calendar = new Date(Date.UTC(y, m - 1, d));
  if (Number.isNaN(ms) || calendar.getUTCMonth() !== m - 1 || calendar.getUTCDate() !== d) {
    throw new ValidationError(`${what} "${text}" is not a real date`);
  }
  return ms;
}

/** Parses a schedule string; a bad one is a `ValidationError` that says what is wrong. */
export function parseSchedule(source: string, timezone = 'UTC'): Schedule {
  if (typeof source !== 'string' || source.trim() === '') throw new ValidationError('schedule is empty');
  if (source.length > 256) throw new ValidationError('schedule is longer than 256 characters');
  if (!isValidTimezone(timezone))
    throw new ValidationError(`timezone "${timezone}" is not an IANA timezone name`);
  const text = source.trim();
  if (text.startsWith('@every')) {
    const arg = text.slice('@every'.length).trim();
    if (arg === '') throw new ValidationError('@every needs a duration, e.g. @every 5m');
    const everyMs = parseDuration(arg, '@every interval');
    if (everyMs < 1000)
      throw new ValidationError(`@every interval ${formatDuration(everyMs)} is below the minimum of 1s`);
    return { kind: 'every', source: text, everyMs };
  }
  if (text.startsWith('@at')) {
    const arg = text.slice('@at'.length).trim();
    return { kind: 'at', source: text, atMs: parseInstant(arg, '@at instant') };
  }
  let pattern = text;
  if (text.startsWith('@')) {
    const macro = MACROS[text.toLowerCase()];
    if (!macro) {
      throw new ValidationError(
        `unknown schedule macro "${text}"; expected one of ${Object.keys(MACROS).join(' ')}, @every <duration> or @at <instant>`,
      );
    }
    pattern = macro;
  }
  const checked = checkCronFields(pattern);
  let wall: Cron;
  try {
    wall = new Cron(checked.pattern, { utcOffset: 0, paused: true, legacyMode: true });
  } catch (err) {
    const reason = err instanceof Error ? err.message.replace(/^CronPattern: /, '') : String(err);
    throw new ValidationError(`cron expression "${text}" is invalid: ${reason}`, { field: 'schedule' });
  }
  if (!firesEver(wall)) {
    throw new ValidationError(`cron expression "${text}" never fires: no date matches it`, {
      field: 'schedule',
    });
  }
  return { kind: 'cron', source: text, timezone, wall, fixedHour: checked.fixedHour };
}

/**
 * Whether a pattern matches any date. croner searches forward month by month, recursively, up to
 * the year 3000: for a pattern that never matches (`0 0 31 4,6,9,11 *`) that search can exhaust
 * the stack, which here also means "never".
 */
function firesEver(wall: Cron): boolean {
  try {
    return wall.nextRun(new Date(Date.UTC(2000, 0, 1))) !== null;
  } catch (err) {
    if (err instanceof RangeError) return false;
    throw err;
  }
}

/** The first slot strictly after `afterMs`, or `null` when the schedule has no more slots. */
export function nextSlotAfter(schedule: Schedule, afterMs: number): number | null {
  switch (schedule.kind) {
    case 'every':
      return (Math.floor(afterMs / schedule.everyMs) + 1) * schedule.everyMs;
    case 'at':
      return schedule.atMs > afterMs ? schedule.atMs : null;
    case 'cron':
      return nextCronSlot(schedule, afterMs);
  }
}

/** The largest shift of local time a transition may cause that the search below accounts for. */
const MAX_SHIFT = 3 * 3_600_000;

function nextWall(s: Extract<Schedule, { kind: 'cron' }>, afterWall: number): number | null {
  const next = s.wall.nextRun(new Date(afterWall));
  return next ? next.getTime() : null;
}

/**
 * The cron slot strictly after `afterMs`, the expression read in local time. Between two offset
 * transitions local time and UTC differ by one offset, so each such segment is one croner lookup;
 * the daylight-saving rule decides what happens at a transition:
 *  - fixed hours: a local time skipped by a spring-forward fires once, at the transition; a local
 *    time repeated by a fall-back fires once, at its first occurrence;
 *  - wildcard or step hours: slots follow elapsed time: a repeated local time fires at both
 *    occurrences, and none is invented for a skipped one.
 */
function nextCronSlot(s: Extract<Schedule, { kind: 'cron' }>, afterMs: number): number | null {
  const zone = s.timezone;
  // Fixed hours: local times below this already fired before a fall-back repeated them.
  let firedBelow = Number.NEGATIVE_INFINITY;
  const previous = transitionsBetween(zone, afterMs - MAX_SHIFT, afterMs).pop();
  if (s.fixedHour && previous && previous.before > previous.after) firedBelow = previous.at + previous.before;
  let from = afterMs;
  let first = true;
  for (let segment = 0; segment < 100; segment++) {
    const offset = offsetAt(zone, from);
    // The first segment starts strictly after `afterMs`; later ones at their transition.
    const startWall = Math.max(first ? from + offset : from + offset - 1, firedBelow - 1);
    const wall = nextWall(s, startWall);
    if (wall === null) return null;
    const candidate = wall - offset;
    const transition = transitionsBetween(zone, from + 1, candidate)[0];
    if (!transition) return candidate;
    // The segment ends at the transition before the candidate.
    if (s.fixedHour && transition.after > transition.before) {
      const skipped = nextWall(s, Math.max(startWall, transition.at + transition.before - 1));
      if (skipped !== null && skipped < transition.at + transition.after) return transition.at;
    }
    if (s.fixedHour && transition.before > transition.after) firedBelow = transition.at + transition.before;
    from = transition.at;
    first = false;
  }
  return null;
}

/** The first slot at or after `ms`: where a newly registered (or resumed) job starts. */
export function firstSlotFrom(schedule: Schedule, ms: number): number | null {
  return nextSlotAfter(schedule, ms - 1);
}

/**
 * The last `limit` slots in `[fromMs, toMs]`, oldest first, without walking every slot of a long
 * range: `@every` is arithmetic, cron looks back from `toMs` over a window that grows fourfold until it
 * holds enough slots or reaches `fromMs`.
 */
export function lastSlotsIn(schedule: Schedule, fromMs: number, toMs: number, limit: number): number[] {
  if (limit <= 0 || toMs < fromMs) return [];
  if (schedule.kind === 'every') {
    const first = Math.ceil(fromMs / schedule.everyMs);
    const last = Math.floor(toMs / schedule.everyMs);
    const out: number[] = [];
    for (let k = Math.max(first, last - limit + 1); k <= last; k++) out.push(k * schedule.everyMs);
    return out;
  }
  if (schedule.kind === 'at') return schedule.atMs >= fromMs && schedule.atMs <= toMs ? [schedule.atMs] : [];
  let window = 60_000 * limit;
  for (;;) {
    const start = Math.max(fromMs, toMs - window);
    const slots: number[] = [];
    for (let s = firstSlotFrom(schedule, start); s !== null && s <= toMs; s = nextSlotAfter(schedule, s)) {
      slots.push(s);
      if (slots.length > limit) slots.shift();
    }
    if (slots.length >= limit || start === fromMs) return slots;
    window *= 4;
  }
}

/** Counts slots in `[fromMs, toMs]`, giving up (returning `null`) past `max`. */
export function countSlotsIn(schedule: Schedule, fromMs: number, toMs: number, max = 10_000): number | null {
  if (toMs < fromMs) return 0;
  if (schedule.kind === 'every') {
    return Math.max(0, Math.floor(toMs / schedule.everyMs) - Math.ceil(fromMs / schedule.everyMs) + 1);
  }
  let n = 0;
  for (let s = firstSlotFrom(schedule, fromMs); s !== null && s <= toMs; s = nextSlotAfter(schedule, s)) {
    if (++n > max) return null;
  }
  return n;
}
