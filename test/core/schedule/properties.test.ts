/**
 * Properties of cron schedules over random expressions, timezones and instants. The oracle for
 * "does this slot match the expression" reads the slot's local time from Intl, independently of
 * the transition tables in timezone.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planSlots } from '../../../src/core/misfire.js';
import {
  countSlotsIn,
  firstSlotFrom,
  lastSlotsIn,
  nextSlotAfter,
  parseSchedule,
  type Schedule,
} from '../../../src/core/schedule/schedule.js';
import { transitionsBetween } from '../../../src/core/schedule/timezone.js';

const SECOND = 1_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;

const ZONES = [
  'UTC',
  'America/New_York',
  'Europe/Berlin',
  'Australia/Lord_Howe',
  'Asia/Kolkata',
  'America/Sao_Paulo',
  'Pacific/Chatham',
  'Asia/Tokyo',
] as const;
/** The zones of ZONES that change offset in 2025-2028. */
const DST_ZONES = ['America/New_York', 'Europe/Berlin', 'Australia/Lord_Howe', 'Pacific/Chatham'] as const;

const FROM = Date.UTC(2025, 0, 1);
const TO = Date.UTC(2029, 0, 1);

// ---------------------------------------------------------------------------------------------
// Expressions

interface Expr {
  /** Six fields, seconds first; `second` is null for a 5-field expression. */
  second: string | null;
  minute: string;
  hour: string;
  dom: string;
  month: string;
  dow: string;
  source: string;
}

function field(min: number, max: number, maxStep: number, starWeight: number): fc.Arbitrary<string> {
  const value = fc.integer({ min, max });
  return fc.oneof(
    { arbitrary: fc.constant('*'), weight: starWeight },
    { arbitrary: value.map(String), weight: 2 },
    { arbitrary: fc.tuple(value, value).map(([a, b]) => `${Math.min(a, b)}-${Math.max(a, b)}`), weight: 1 },
    { arbitrary: fc.integer({ min: 2, max: maxStep }).map((n) => `*/${n}`), weight: 1 },
    {
      arbitrary: fc
        .uniqueArray(value, { minLength: 2, maxLength: 3 })
        .map((xs) => [...xs].sort((a, b) => a - b).join(',')),
      weight: 1,
    },
  );
}

/** Seconds, when present, never `*`: an every-second schedule is not what these properties are about. */
const secondField = fc.oneof(
  fc.integer({ min: 0, max: 59 }).map(String),
  fc.constantFrom('*/20', '*/30', '0,30', '10-12'),
);

function expression(withSeconds: boolean): fc.Arbitrary<Expr> {
  return fc
    .record({
      second: withSeconds
        ? fc.oneof({ arbitrary: fc.constant(null), weight: 4 }, { arbitrary: secondField, weight: 1 })
        : fc.constant(null),
      minute: field(0, 59, 30, 1),
      // Often the hours that the 2025-2028 transitions of these zones skip or repeat (1-3 local).
      hour: fc.oneof(
        { arbitrary: field(0, 23, 12, 2), weight: 2 },
        { arbitrary: fc.constantFrom('1', '2', '3', '1-3', '2,3', '0,2'), weight: 1 },
      ),
      // Days up to 28 exist in every month: no generated expression "never fires".
      dom: field(1, 28, 10, 6),
      month: field(1, 12, 6, 6),
      dow: field(0, 7, 3, 6),
    })
    .map((f) => ({
      ...f,
      source: [f.second, f.minute, f.hour, f.dom, f.month, f.dow].filter((x) => x !== null).join(' '),
    }));
}

/** The values a generated field allows (`*`, `n`, `a-b`, `*\/n`, lists). */
function allowed(text: string, min: number, max: number): Set<number> {
  const out = new Set<number>();
  for (const item of text.split(',')) {
    if (item === '*') for (let v = min; v <= max; v++) out.add(v);
    else if (item.startsWith('*/')) for (let v = min; v <= max; v += Number(item.slice(2))) out.add(v);
    else if (item.includes('-')) {
      const [a, b] = item.split('-').map(Number) as [number, number];
      for (let v = a; v <= b; v++) out.add(v);
    } else out.add(Number(item));
  }
  return out;
}

interface Local {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  weekday: number;
}

/** Whether local time `l` matches `e`, with classic cron's day rule: both days restricted → either. */
function matches(e: Expr, l: Local): boolean {
  if (e.second !== null && !allowed(e.second, 0, 59).has(l.second)) return false;
  if (e.second === null && l.second !== 0) return false;
  if (!allowed(e.minute, 0, 59).has(l.minute)) return false;
  if (!allowed(e.hour, 0, 23).has(l.hour)) return false;
  if (!allowed(e.month, 1, 12).has(l.month)) return false;
  const domOk = allowed(e.dom, 1, 31).has(l.day);
  const dows = allowed(e.dow, 0, 7);
  const dowOk = dows.has(l.weekday) || (l.weekday === 0 && dows.has(7));
  if (e.dom === '*') return dowOk;
  if (e.dow === '*') return domOk;
  return domOk || dowOk;
}

// ---------------------------------------------------------------------------------------------
// Local time from Intl (the oracle)

const formatters = new Map<string, Intl.DateTimeFormat>();

function localOf(zone: string, instant: number): Local {
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
    });
    formatters.set(zone, f);
  }
  const p: Record<string, number> = {};
  for (const part of f.formatToParts(new Date(instant))) p[part.type] = Number(part.value);
  const l = {
    year: p.year!,
    month: p.month!,
    day: p.day!,
    hour: p.hour!,
    minute: p.minute!,
    second: p.second!,
  };
  return { ...l, weekday: new Date(Date.UTC(l.year, l.month - 1, l.day)).getUTCDay() };
}

/** A wall-clock time given as local ms (the epoch ms it would have if read as UTC). */
function localOfWall(wall: number): Local {
  const d = new Date(wall);
  return {
    year: d.getUTCFullYear(),
    month: d.getUTCMonth() + 1,
    day: d.getUTCDate(),
    hour: d.getUTCHours(),
    minute: d.getUTCMinutes(),
    second: d.getUTCSeconds(),
    weekday: d.getUTCDay(),
  };
}

const wallKey = (l: Local) => `${l.year}-${l.month}-${l.day} ${l.hour}:${l.minute}:${l.second}`;

/**
 * True when the local time at `t` was already shown earlier (a fall-back repeat). The zones here
 * turn back by 30 min (Lord Howe) or 1 h.
 */
function isRepeat(zone: string, t: number): boolean {
  const k = wallKey(localOf(zone, t));
  return wallKey(localOf(zone, t - 30 * MINUTE)) === k || wallKey(localOf(zone, t - HOUR)) === k;
}

/** Whether some wall time skipped by the spring-forward at `tr` matches `e`. */
function gapMatches(e: Expr, tr: { at: number; before: number; after: number }): boolean {
  const step = e.second === null ? MINUTE : SECOND;
  for (let w = tr.at + tr.before; w < tr.at + tr.after; w += step)
    if (matches(e, localOfWall(w))) return true;
  return false;
}

function cron(e: Expr, zone: string): Extract<Schedule, { kind: 'cron' }> {
  const s = parseSchedule(e.source, zone);
  if (s.kind !== 'cron') throw new Error(`expected cron for ${e.source}`);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Instants: uniform over 2025-2028, or within a few hours of one of the zone's transitions.

const transitionsOf = new Map<string, number[]>();
function zoneTransitions(zone: string): number[] {
  let list = transitionsOf.get(zone);
  if (!list) {
    list = transitionsBetween(zone, FROM, TO).map((t) => t.at);
    transitionsOf.set(zone, list);
  }
  return list;
}

const uniformInstant = fc.integer({ min: FROM, max: TO - 1 });

function instantFor(zone: string): fc.Arbitrary<number> {
  const trs = zoneTransitions(zone);
  if (trs.length === 0) return uniformInstant;
  return fc.oneof(
    uniformInstant,
    fc.tuple(fc.constantFrom(...trs), fc.integer({ min: -6 * HOUR, max: 6 * HOUR })).map(([at, d]) => at + d),
  );
}

const zoneAndInstant = fc
  .constantFrom(...ZONES)
  .chain((zone) => fc.tuple(fc.constant(zone), instantFor(zone)));

/** Every slot in [from, to] by walking nextSlotAfter, stopping after `max`. */
function walk(s: Schedule, from: number, to: number, max = Number.POSITIVE_INFINITY): number[] {
  const out: number[] = [];
  for (let t = firstSlotFrom(s, from); t !== null && t <= to && out.length < max; t = nextSlotAfter(s, t)) {
    out.push(t);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

describe('cron slots over random expressions, zones and instants', () => {
  it('(a, b, c) increase strictly, never reach back to the cursor, and match the expression in local time', () => {
    fc.assert(
      fc.property(expression(true), zoneAndInstant, (e, [zone, start]) => {
        const s = cron(e, zone);
        let cursor = start;
        for (let i = 0; i < 20; i++) {
          const slot = nextSlotAfter(s, cursor);
          if (slot === null) throw new Error(`${e.source} ran out of slots`);
          expect(slot).toBeGreaterThan(cursor);
          expect(Number.isInteger(slot)).toBe(true);
          expect(slot % (e.second === null ? MINUTE : SECOND)).toBe(0);
          if (matches(e, localOf(zone, slot))) {
            // Fixed hours fire a repeated local time at its first occurrence only.
            if (s.fixedHour) expect(isRepeat(zone, slot)).toBe(false);
          } else {
            // Only the skipped-time rule may place a slot where the expression does not match:
            // fixed hours, exactly at a spring-forward whose gap held a matching local time.
            expect(s.fixedHour).toBe(true);
            const trs = transitionsBetween(zone, slot, slot);
            expect(trs).toHaveLength(1);
            expect(trs[0]!.after).toBeGreaterThan(trs[0]!.before);
            expect(gapMatches(e, trs[0]!)).toBe(true);
          }
          cursor = slot;
        }
      }),
      { numRuns: 60 },
    );
  }, 30_000);

  it('(c) finds every slot: a minute-by-minute scan around a transition agrees with nextSlotAfter', () => {
    const window = fc
      .constantFrom(...DST_ZONES)
      .chain((zone) =>
        fc.tuple(
          fc.constant(zone),
          fc.constantFrom(...zoneTransitions(zone)),
          fc.integer({ min: 0, max: 4 * HOUR }),
        ),
      );
    fc.assert(
      fc.property(expression(false), window, (e, [zone, at, before]) => {
        const s = cron(e, zone);
        const from = at - before;
        const to = from + 5 * HOUR;
        const expected = new Set<number>();
        for (let t = Math.ceil(from / MINUTE) * MINUTE; t <= to; t += MINUTE) {
          if (!matches(e, localOf(zone, t))) continue;
          if (s.fixedHour && isRepeat(zone, t)) continue;
          expected.add(t);
        }
        if (s.fixedHour) {
          for (const tr of transitionsBetween(zone, from, to)) {
            if (tr.after > tr.before && gapMatches(e, tr)) expected.add(tr.at);
          }
        }
        expect(walk(s, from, to)).toEqual([...expected].sort((a, b) => a - b));
      }),
      { numRuns: 40 },
    );
  }, 30_000);

  it('(d) lastSlotsIn, countSlotsIn and a catch-up planSlots over [A, B] equal walking nextSlotAfter from A', () => {
    fc.assert(
      fc.property(
        expression(true),
        zoneAndInstant,
        fc.integer({ min: 0, max: 36 * HOUR }),
        (e, [zone, a], span) => {
          const s = cron(e, zone);
          const b = a + span;
          const all = walk(s, a, b, 501);
          fc.pre(all.length <= 500);
          expect(lastSlotsIn(s, a, b, 10_000)).toEqual(all);
          expect(countSlotsIn(s, a, b)).toBe(all.length);
          if (all.length > 0) expect(lastSlotsIn(s, a, b, 3)).toEqual(all.slice(-3));
          if (all.length > 0 && all[0]! < b) {
            // An outage from the first slot to B: catch_up materialises the whole range at once.
            const plan = planSlots({
              schedule: s,
              nextRunAt: all[0]!,
              now: b,
              lookaheadMs: 0,
              misfireThresholdMs: 0,
              policy: 'catch_up',
              catchUpLimit: 1_000,
            });
            expect(plan).toEqual({ slots: all, dropped: 0, nextRunAt: nextSlotAfter(s, b) });
          }
        },
      ),
      { numRuns: 40 },
    );
  }, 30_000);
});

describe('@every slots over random intervals', () => {
  it('(d) lastSlotsIn, countSlotsIn and planSlots equal walking nextSlotAfter', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 86_400 }),
        fc.constantFrom(...ZONES),
        uniformInstant,
        fc.integer({ min: 0, max: 200 }),
        (seconds, zone, a, intervals) => {
          const s = parseSchedule(`@every ${seconds}s`, zone);
          const every = seconds * SECOND;
          const b = a + Math.floor((intervals * every) / 3);
          const all = walk(s, a, b);
          for (const slot of all) expect(slot % every).toBe(0);
          expect(all.length).toBe(Math.floor(b / every) - Math.ceil(a / every) + 1);
          expect(lastSlotsIn(s, a, b, 10_000)).toEqual(all);
          expect(countSlotsIn(s, a, b)).toBe(all.length);
          if (all.length > 0 && all[0]! < b) {
            const plan = planSlots({
              schedule: s,
              nextRunAt: all[0]!,
              now: b,
              lookaheadMs: 0,
              misfireThresholdMs: 0,
              policy: 'catch_up',
              catchUpLimit: 1_000,
            });
            expect(plan).toEqual({ slots: all, dropped: 0, nextRunAt: nextSlotAfter(s, b) });
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
