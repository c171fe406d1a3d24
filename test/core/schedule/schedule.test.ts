import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/errors.js';
import {
  countSlotsIn,
  firstSlotFrom,
  isValidTimezone,
  lastSlotsIn,
  nextSlotAfter,
  parseInstant,
  parseSchedule,
  type Schedule,
} from '../../../src/core/schedule/schedule.js';

const HOUR = 3_600_000;
const DAY = 86_400_000;

const utc = (iso: string) => {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad test instant ${iso}`);
  return ms;
};
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const isoAll = (slots: number[]) => slots.map((s) => new Date(s).toISOString());

/** Every slot in [from, to] by walking nextSlotAfter: the reference the shortcuts must agree with. */
function walk(schedule: Schedule, from: number, to: number): number[] {
  const out: number[] = [];
  for (let s = firstSlotFrom(schedule, from); s !== null && s <= to; s = nextSlotAfter(schedule, s)) {
    const prev = out[out.length - 1];
    if (prev !== undefined && s <= prev) throw new Error(`slot ${s} does not follow ${prev}`);
    out.push(s);
  }
  return out;
}

function scheduleError(source: string, timezone?: string): ValidationError {
  try {
    parseSchedule(source, timezone);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).code).toBe('validation_error');
    return err as ValidationError;
  }
  throw new Error(`parseSchedule(${JSON.stringify(source)}) did not throw`);
}

// Sunday 2026-03-15, 10:20:30 UTC.
const T0 = utc('2026-03-15T10:20:30.000Z');

describe('parseSchedule', () => {
  it('parses a 5-field cron expression, in UTC by default', () => {
    const s = parseSchedule('0 3 * * *');
    expect(s.kind).toBe('cron');
    expect(s.source).toBe('0 3 * * *');
    if (s.kind !== 'cron') throw new Error('unreachable');
    expect(s.timezone).toBe('UTC');
    expect(iso(nextSlotAfter(s, T0))).toBe('2026-03-16T03:00:00.000Z');
  });

  it('parses a 6-field cron expression with seconds', () => {
    const s = parseSchedule('*/10 * * * * *');
    expect(s.kind).toBe('cron');
    expect(iso(nextSlotAfter(s, T0 + 500))).toBe('2026-03-15T10:20:40.000Z');
    expect(iso(nextSlotAfter(s, utc('2026-03-15T10:20:40.000Z')))).toBe('2026-03-15T10:20:50.000Z');
    expect(iso(nextSlotAfter(parseSchedule('15 30 4 * * *'), T0))).toBe('2026-03-16T04:30:15.000Z');
  });

  it('reads cron in the job timezone', () => {
    const s = parseSchedule('0 3 * * *', 'Europe/Berlin');
    if (s.kind !== 'cron') throw new Error('expected cron');
    expect(s.timezone).toBe('Europe/Berlin');
    // 03:00 CET is 02:00 UTC in winter; 03:00 CEST is 01:00 UTC in summer.
    expect(iso(nextSlotAfter(s, utc('2026-01-10T00:00:00Z')))).toBe('2026-01-10T02:00:00.000Z');
    expect(iso(nextSlotAfter(s, utc('2026-07-10T00:00:00Z')))).toBe('2026-07-10T01:00:00.000Z');
  });

  it('reads weekday ranges and ORs day-of-month with day-of-week like classic cron', () => {
    // Friday 2026-03-13 03:00 → next weekday 02:30 is Monday the 16th.
    expect(iso(nextSlotAfter(parseSchedule('30 2 * * 1-5'), utc('2026-03-13T03:00:00Z')))).toBe(
      '2026-03-16T02:30:00.000Z',
    );
    // "the 13th or any Friday": Friday the 6th comes first.
    expect(iso(nextSlotAfter(parseSchedule('0 0 13 * 5'), utc('2026-03-01T00:00:00Z')))).toBe(
      '2026-03-06T00:00:00.000Z',
    );
  });

  it.each([
    ['@hourly', '2026-03-15T11:00:00.000Z'],
    ['@daily', '2026-03-16T00:00:00.000Z'],
    ['@midnight', '2026-03-16T00:00:00.000Z'],
    ['@weekly', '2026-03-22T00:00:00.000Z'],
    ['@monthly', '2026-04-01T00:00:00.000Z'],
    ['@yearly', '2027-01-01T00:00:00.000Z'],
    ['@annually', '2027-01-01T00:00:00.000Z'],
  ])('expands the macro %s', (macro, next) => {
    const s = parseSchedule(macro);
    expect(s.kind).toBe('cron');
    expect(s.source).toBe(macro);
    expect(iso(nextSlotAfter(s, T0))).toBe(next);
  });

  it('accepts macros in any case and trims the source', () => {
    const s = parseSchedule('  @DAILY ');
    expect(s.source).toBe('@DAILY');
    expect(iso(nextSlotAfter(s, T0))).toBe('2026-03-16T00:00:00.000Z');
  });

  it('parses @every into an interval', () => {
    expect(parseSchedule('@every 5m')).toEqual({ kind: 'every', source: '@every 5m', everyMs: 300_000 });
    expect(parseSchedule('@every 1h30m')).toMatchObject({ kind: 'every', everyMs: 5_400_000 });
    expect(parseSchedule('@every 1s')).toMatchObject({ kind: 'every', everyMs: 1_000 });
  });

  it('parses @at into one instant', () => {
    expect(parseSchedule('@at 2026-12-24T18:00:00Z')).toEqual({
      kind: 'at',
      source: '@at 2026-12-24T18:00:00Z',
      atMs: utc('2026-12-24T18:00:00Z'),
    });
    expect(parseSchedule('@at 2026-12-24T18:00:00+02:00')).toMatchObject({
      atMs: utc('2026-12-24T16:00:00Z'),
    });
  });

  it('rejects an out-of-range cron field and names the field', () => {
    expect(scheduleError('61 * * * *').message).toBe(
      'cron expression "61 * * * *": minute 61 is out of range 0-59',
    );
    expect(scheduleError('* 25 * * *').message).toMatch(/hour 25 is out of range 0-23$/);
    expect(scheduleError('60 * * * * *').message).toMatch(/second 60 is out of range 0-59$/);
    expect(scheduleError('* * * * 8').message).toMatch(/day-of-week 8 is out of range 0-7$/);
    expect(scheduleError('a b c d e').message).toMatch(/minute "a" is not a number$/);
  });

  it('rejects a wrong number of cron fields', () => {
    expect(scheduleError('* * * *').message).toMatch(
      /has 4 fields; expected 5 .* or 6 \(with seconds first\)/,
    );
    expect(scheduleError('* * * * * * *').message).toMatch(/has 7 fields/);
  });

  it('rejects an unknown macro', () => {
    expect(scheduleError('@fortnightly').message).toMatch(/unknown schedule macro "@fortnightly"/);
  });

  it('rejects a timezone it does not know', () => {
    expect(scheduleError('0 3 * * *', 'Mars/Olympus').message).toBe(
      'timezone "Mars/Olympus" is not an IANA timezone name',
    );
    expect(scheduleError('@every 5m', 'Mars/Olympus').message).toMatch(/Mars\/Olympus/);
    expect(scheduleError('0 3 * * *', '').message).toMatch(/timezone/);
  });

  it('rejects @every below one second or without a duration', () => {
    expect(scheduleError('@every 500ms').message).toBe('@every interval 500ms is below the minimum of 1s');
    expect(scheduleError('@every 999ms').message).toMatch(/below the minimum of 1s/);
    expect(scheduleError('@every').message).toBe('@every needs a duration, e.g. @every 5m');
    expect(scheduleError('@every   ').message).toMatch(/@every needs a duration/);
    expect(scheduleError('@every 5 minutes').message).toMatch(/@every interval/);
  });

  it('rejects an @at without a valid instant with an offset', () => {
    expect(scheduleError('@at').message).toMatch(/ISO-8601/);
    expect(scheduleError('@at 2026-12-24T18:00:00').message).toMatch(/with an offset/);
    expect(scheduleError('@at tomorrow').message).toMatch(/ISO-8601/);
    expect(scheduleError('@at 2026-13-01T00:00:00Z').message).toMatch(/not a real date/);
  });

  it('rejects an empty or overlong schedule', () => {
    expect(scheduleError('').message).toBe('schedule is empty');
    expect(scheduleError('   ').message).toBe('schedule is empty');
    expect(scheduleError(`@every 1s${' '.repeat(250)}`).message).toMatch(/longer than 256/);
  });
});

describe('helpers', () => {
  it('isValidTimezone', () => {
    expect(isValidTimezone('UTC')).toBe(true);
    expect(isValidTimezone('Europe/Berlin')).toBe(true);
    expect(isValidTimezone('Nope/Nope')).toBe(false);
    expect(isValidTimezone('')).toBe(false);
  });

  it('parseInstant', () => {
    expect(parseInstant('2026-12-24T18:00Z')).toBe(utc('2026-12-24T18:00:00Z'));
    expect(parseInstant('2026-12-24T18:00:00.123-05:00')).toBe(utc('2026-12-24T23:00:00.123Z'));
    expect(() => parseInstant('2026-12-24')).toThrow(ValidationError);
  });
});

describe('nextSlotAfter and firstSlotFrom', () => {
  it('@every slots are aligned to the epoch, and nextSlotAfter is strictly after', () => {
    const s = parseSchedule('@every 100s');
    expect(nextSlotAfter(s, 1_050_000)).toBe(1_100_000);
    expect(nextSlotAfter(s, 1_099_999)).toBe(1_100_000);
    expect(nextSlotAfter(s, 1_100_000)).toBe(1_200_000);
    expect(nextSlotAfter(s, 0)).toBe(100_000);
  });

  it('firstSlotFrom is inclusive', () => {
    const every = parseSchedule('@every 100s');
    expect(firstSlotFrom(every, 1_100_000)).toBe(1_100_000);
    expect(firstSlotFrom(every, 1_100_001)).toBe(1_200_000);
    expect(firstSlotFrom(every, 1_050_000)).toBe(1_100_000);

    const cron = parseSchedule('0 0 * * *');
    const midnight = utc('2026-03-16T00:00:00Z');
    expect(iso(firstSlotFrom(cron, midnight))).toBe('2026-03-16T00:00:00.000Z');
    expect(iso(nextSlotAfter(cron, midnight))).toBe('2026-03-17T00:00:00.000Z');
    expect(iso(firstSlotFrom(cron, midnight + 1))).toBe('2026-03-17T00:00:00.000Z');
    expect(iso(nextSlotAfter(cron, midnight - 1))).toBe('2026-03-16T00:00:00.000Z');
  });

  it('@at has one slot and then none', () => {
    const at = utc('2026-12-24T18:00:00Z');
    const s = parseSchedule('@at 2026-12-24T18:00:00Z');
    expect(nextSlotAfter(s, at - 1)).toBe(at);
    expect(nextSlotAfter(s, 0)).toBe(at);
    expect(nextSlotAfter(s, at)).toBeNull();
    expect(nextSlotAfter(s, at + DAY)).toBeNull();
    expect(firstSlotFrom(s, at)).toBe(at);
    expect(firstSlotFrom(s, at + 1)).toBeNull();
  });
});

describe('lastSlotsIn', () => {
  it('returns the last N @every slots, oldest first, bounds inclusive', () => {
    const s = parseSchedule('@every 100s');
    expect(lastSlotsIn(s, 1_050_000, 1_450_000, 2)).toEqual([1_300_000, 1_400_000]);
    expect(lastSlotsIn(s, 1_050_000, 1_450_000, 10)).toEqual([1_100_000, 1_200_000, 1_300_000, 1_400_000]);
    expect(lastSlotsIn(s, 1_100_000, 1_300_000, 5)).toEqual([1_100_000, 1_200_000, 1_300_000]);
    expect(lastSlotsIn(s, 1_100_001, 1_199_999, 5)).toEqual([]);
    expect(lastSlotsIn(s, 1_000_000, 1_000_000_000, 1)).toEqual([1_000_000_000]);
    expect(lastSlotsIn(s, 1_000_000, 2_000_000, 0)).toEqual([]);
    expect(lastSlotsIn(s, 2_000_000, 1_000_000, 5)).toEqual([]);
  });

  it('returns the @at slot only when it is in range', () => {
    const at = utc('2026-12-24T18:00:00Z');
    const s = parseSchedule('@at 2026-12-24T18:00:00Z');
    expect(lastSlotsIn(s, at - DAY, at + DAY, 3)).toEqual([at]);
    expect(lastSlotsIn(s, at, at, 1)).toEqual([at]);
    expect(lastSlotsIn(s, at + 1, at + DAY, 3)).toEqual([]);
    expect(lastSlotsIn(s, at - DAY, at - 1, 3)).toEqual([]);
    expect(lastSlotsIn(s, at - DAY, at + DAY, 0)).toEqual([]);
  });

  it('returns the last cron slots of a 30-day range exactly', () => {
    const s = parseSchedule('*/5 * * * *');
    const from = utc('2026-01-01T00:00:00Z');
    const to = utc('2026-01-31T00:00:00Z');
    expect(isoAll(lastSlotsIn(s, from, to, 3))).toEqual([
      '2026-01-30T23:50:00.000Z',
      '2026-01-30T23:55:00.000Z',
      '2026-01-31T00:00:00.000Z',
    ]);
    expect(isoAll(lastSlotsIn(s, from, to - 1, 3))).toEqual([
      '2026-01-30T23:45:00.000Z',
      '2026-01-30T23:50:00.000Z',
      '2026-01-30T23:55:00.000Z',
    ]);
  });

  it('widens its window for sparse cron schedules and stops at the range start', () => {
    const yearly = parseSchedule('@yearly');
    expect(isoAll(lastSlotsIn(yearly, utc('2020-06-01T00:00:00Z'), utc('2035-06-01T00:00:00Z'), 3))).toEqual([
      '2033-01-01T00:00:00.000Z',
      '2034-01-01T00:00:00.000Z',
      '2035-01-01T00:00:00.000Z',
    ]);
    const monthly = parseSchedule('0 0 1 * *');
    expect(
      isoAll(lastSlotsIn(monthly, utc('2026-01-15T00:00:00Z'), utc('2026-04-10T00:00:00Z'), 10)),
    ).toEqual(['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z']);
    expect(lastSlotsIn(monthly, utc('2026-01-02T00:00:00Z'), utc('2026-01-31T00:00:00Z'), 5)).toEqual([]);
  });
});

describe('countSlotsIn', () => {
  it('counts @every slots exactly, bounds inclusive', () => {
    const s = parseSchedule('@every 10s');
    expect(countSlotsIn(s, 1_010_000, 1_350_000)).toBe(35);
    expect(countSlotsIn(s, 1_010_001, 1_349_999)).toBe(33);
    expect(countSlotsIn(s, 1_000_001, 1_009_999)).toBe(0);
    expect(countSlotsIn(s, 1_350_000, 1_350_000)).toBe(1);
    expect(countSlotsIn(s, 1_350_000, 1_010_000)).toBe(0);
    // Arithmetic: no limit applies to @every.
    expect(countSlotsIn(s, 0, 366 * DAY, 10)).toBe((366 * DAY) / 10_000 + 1);
  });

  it('counts cron slots and gives up past max', () => {
    const s = parseSchedule('*/5 * * * *');
    const from = utc('2026-03-15T00:00:00Z');
    const to = from + DAY;
    expect(countSlotsIn(s, from, to)).toBe(289);
    expect(countSlotsIn(s, from, to, 289)).toBe(289);
    expect(countSlotsIn(s, from, to, 288)).toBeNull();
    expect(countSlotsIn(s, from, to, 100)).toBeNull();
    expect(countSlotsIn(s, from + 1, to - 1)).toBe(287);
    expect(countSlotsIn(s, to, from)).toBe(0);
  });

  it('counts the @at slot', () => {
    const at = utc('2026-12-24T18:00:00Z');
    const s = parseSchedule('@at 2026-12-24T18:00:00Z');
    expect(countSlotsIn(s, at - HOUR, at + HOUR)).toBe(1);
    expect(countSlotsIn(s, at + 1, at + HOUR)).toBe(0);
  });
});

describe('properties', () => {
  const instant = fc.integer({ min: 0, max: utc('2100-01-01T00:00:00Z') });

  it('@every: nextSlotAfter is the least multiple of the interval strictly after t', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 86_400 }), instant, (seconds, t) => {
        const s = parseSchedule(`@every ${seconds}s`);
        const every = seconds * 1_000;
        const next = nextSlotAfter(s, t);
        if (next === null) throw new Error('@every never ends');
        expect(next).toBeGreaterThan(t);
        expect(next % every).toBe(0);
        expect(next - every).toBeLessThanOrEqual(t);
        const first = firstSlotFrom(s, t);
        if (first === null) throw new Error('@every never ends');
        expect(first).toBeGreaterThanOrEqual(t);
        expect(first % every).toBe(0);
        expect(first - every).toBeLessThan(t);
      }),
      { numRuns: 1_000 },
    );
  });

  it('@every: lastSlotsIn and countSlotsIn agree with walking the slots', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3_600 }),
        instant,
        fc.double({ min: 0, max: 60, noNaN: true }),
        fc.integer({ min: 1, max: 8 }),
        (seconds, a, spanIntervals, k) => {
          const s = parseSchedule(`@every ${seconds}s`);
          const b = a + Math.floor(spanIntervals * seconds * 1_000);
          const all = walk(s, a, b);
          expect(lastSlotsIn(s, a, b, k)).toEqual(all.slice(-k));
          expect(countSlotsIn(s, a, b)).toBe(all.length);
        },
      ),
      { numRuns: 300 },
    );
  });

  // Croner in a named timezone costs roughly 0.4 ms per step, so ranges are sized to ~30 slots.
  const cronCases: Array<[string, number]> = [
    ['*/15 * * * *', 8 * HOUR],
    ['0 3 * * *', 30 * DAY],
    ['30 2 * * 1-5', 42 * DAY],
    ['0 0 1 * *', 900 * DAY],
  ];

  it.each(cronCases)(
    'cron %s: successive slots increase and lastSlotsIn is the tail of walking nextSlotAfter',
    (source, maxSpan) => {
      const s = parseSchedule(source, 'UTC');
      fc.assert(
        fc.property(
          fc.integer({ min: utc('2020-01-01T00:00:00Z'), max: utc('2035-01-01T00:00:00Z') }),
          fc.integer({ min: 0, max: maxSpan }),
          fc.integer({ min: 1, max: 5 }),
          (a, span, k) => {
            const b = a + span;
            const next = nextSlotAfter(s, a);
            if (next === null) throw new Error('cron never ends');
            expect(next).toBeGreaterThan(a);
            const all = walk(s, a, b); // throws unless strictly increasing
            if (all.length > 0) expect(all[0]).toBe(firstSlotFrom(s, a));
            expect(lastSlotsIn(s, a, b, k)).toEqual(all.slice(-k));
          },
        ),
        { numRuns: 20 },
      );
    },
    30_000,
  );
});

describe('@at calendar checks', () => {
  it('rejects a day that does not exist instead of rolling it over', () => {
    expect(() => parseSchedule('@at 2026-02-30T00:00:00Z')).toThrow(/not a real date/);
    expect(() => parseSchedule('@at 2026-04-31T00:00:00Z')).toThrow(/not a real date/);
    expect(parseSchedule('@at 2028-02-29T00:00:00Z')).toMatchObject({
      kind: 'at',
      atMs: Date.UTC(2028, 1, 29),
    });
  });
});
