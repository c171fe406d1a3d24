/**
 * IANA timezones as arithmetic. For each (zone, year) the offset transitions are found once from
 * the runtime's tz database (Intl) and cached; after that, converting between an instant and the
 * local wall-clock time is a binary search, with no Intl call on the hot path.
 *
 * Wall-clock times are represented as "local milliseconds": the epoch ms that the local date and
 * time would have if read as UTC. `wall = instant + offset(instant)`.
 */

export interface Transition {
  /** First instant (epoch ms) with the new offset. */
  at: number;
  /** Offsets (ms, local − UTC) before and from `at`. */
  before: number;
  after: number;
}

interface ZoneYear {
  offsetAtStart: number;
  transitions: Transition[];
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const formatters = new Map<string, Intl.DateTimeFormat>();
const years = new Map<string, ZoneYear>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** Offset from Intl (slow; used only to build the transition tables). Second resolution. */
function intlOffset(zone: string, instant: number): number {
  const t = Math.floor(instant / 1000) * 1000;
  const parts: Record<string, string> = {};
  for (const p of formatter(zone).formatToParts(new Date(t))) parts[p.type] = p.value;
  let year = Number(parts.year);
  if (parts.era === 'BC' || parts.era === 'B') year = 1 - year;
  const wall = Date.UTC(
    year,
    Number(parts.month) - 1,
    Number(parts.day),
    Number(parts.hour),
    Number(parts.minute),
    Number(parts.second),
  );
  // Date.UTC maps years 0-99 to 1900-1999; set the year explicitly.
  const d = new Date(wall);
  d.setUTCFullYear(year);
  return d.getTime() - t;
}

function zoneYear(zone: string, year: number): ZoneYear {
  const key = `${zone}\u0000${year}`;
  let zy = years.get(key);
  if (zy) return zy;
  // Sample every 6 hours from a day before the year to a day after it; refine each change to the second.
  const start = Date.UTC(year, 0, 1) - DAY;
  const end = Date.UTC(year + 1, 0, 1) + DAY;
  const step = 6 * HOUR;
  const transitions: Transition[] = [];
  const offsetAtStart = intlOffset(zone, start);
  let prevT = start;
  let prev = offsetAtStart;
  for (let t = start + step; t <= end; t += step) {
    const o = intlOffset(zone, t);
    if (o !== prev) {
      let lo = prevT; // offset prev
      let hi = t; // offset o
      while (hi - lo > 1000) {
        const mid = Math.floor((lo + hi) / 2000) * 1000;
        if (mid <= lo || mid >= hi) break;
        if (intlOffset(zone, mid) === prev) lo = mid;
        else hi = mid;
      }
      transitions.push({ at: hi, before: prev, after: o });
      prev = o;
    }
    prevT = t;
  }
  zy = { offsetAtStart, transitions };
  if (years.size > 20_000) years.clear();
  years.set(key, zy);
  return zy;
}

/** Offset (ms, local − UTC) of `zone` at `instant`. */
export function offsetAt(zone: string, instant: number): number {
  const zy = zoneYear(zone, new Date(instant).getUTCFullYear());
  let o = zy.offsetAtStart;
  for (const tr of zy.transitions) {
    if (tr.at <= instant) o = tr.after;
    else break;
  }
  return o;
}

/** Local wall-clock time (as local ms) of `instant` in `zone`. */
export function wallOf(zone: string, instant: number): number {
  return instant + offsetAt(zone, instant);
}

/** Transitions of `zone` with `from <= at <= to`, in order. */
export function transitionsBetween(zone: string, from: number, to: number): Transition[] {
  const out: Transition[] = [];
  const y0 = new Date(from).getUTCFullYear();
  const y1 = new Date(to).getUTCFullYear();
  for (let y = y0; y <= y1; y++) {
    for (const tr of zoneYear(zone, y).transitions) {
      if (tr.at >= from && tr.at <= to && !out.some((o) => o.at === tr.at)) out.push(tr);
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

/**
 * The instants whose local time in `zone` is `wall`, in order: one normally, two when a fall-back
 * repeats it, none when a spring-forward skips it (then `gapEnd` is the transition instant).
 */
export function instantsOf(zone: string, wall: number): { instants: number[]; gapEnd: number | null } {
  // The instant is wall − offset with |offset| ≤ 14 h; every offset in force around then is a candidate.
  const candidates = new Set<number>([
    offsetAt(zone, wall - 15 * HOUR),
    offsetAt(zone, wall),
    offsetAt(zone, wall + 15 * HOUR),
  ]);
  for (const tr of transitionsBetween(zone, wall - 15 * HOUR, wall + 15 * HOUR)) {
    candidates.add(tr.before);
    candidates.add(tr.after);
  }
  const instants = [...candidates]
    .map((o) => wall - o)
    .filter((t) => offsetAt(zone, t) === wall - t)
    .sort((a, b) => a - b);
  if (instants.length > 0) return { instants: [...new Set(instants)], gapEnd: null };
  // Skipped: the wall time lies in a gap; the gap ends at the transition that jumped over it.
  for (const tr of transitionsBetween(zone, wall - 15 * HOUR, wall + 15 * HOUR)) {
    if (tr.after > tr.before && wall >= tr.at + tr.before && wall < tr.at + tr.after) {
      return { instants: [], gapEnd: tr.at };
    }
  }
  return { instants: [], gapEnd: null };
}
