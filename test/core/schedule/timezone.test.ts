import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { instantsOf, offsetAt, transitionsBetween, wallOf } from '../../../src/core/schedule/timezone.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;

const utc = (iso: string) => {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad test instant ${iso}`);
  return ms;
};
/** A local wall-clock time as "local ms" (the epoch ms it would have if read as UTC). */
const wall = (local: string) => utc(`${local}Z`);

const NY = 'America/New_York';
const BERLIN = 'Europe/Berlin';
const LORD_HOWE = 'Australia/Lord_Howe';

describe('offsetAt', () => {
  it.each([
    // [zone, instant, offset in ms]
    [NY, '2026-01-15T12:00:00.000Z', -5 * HOUR],
    [NY, '2026-03-08T06:59:59.999Z', -5 * HOUR],
    [NY, '2026-03-08T07:00:00.000Z', -4 * HOUR],
    [NY, '2026-07-01T00:00:00.000Z', -4 * HOUR],
    [NY, '2026-11-01T05:59:59.999Z', -4 * HOUR],
    [NY, '2026-11-01T06:00:00.000Z', -5 * HOUR],
    [BERLIN, '2026-03-29T00:59:59.999Z', 1 * HOUR],
    [BERLIN, '2026-03-29T01:00:00.000Z', 2 * HOUR],
    [BERLIN, '2026-10-25T00:59:59.999Z', 2 * HOUR],
    [BERLIN, '2026-10-25T01:00:00.000Z', 1 * HOUR],
    [LORD_HOWE, '2026-04-04T14:59:59.999Z', 11 * HOUR],
    [LORD_HOWE, '2026-04-04T15:00:00.000Z', 10.5 * HOUR],
    [LORD_HOWE, '2026-10-03T15:29:59.999Z', 10.5 * HOUR],
    [LORD_HOWE, '2026-10-03T15:30:00.000Z', 11 * HOUR],
    ['Pacific/Chatham', '2026-04-04T13:59:59.999Z', 13.75 * HOUR],
    ['Pacific/Chatham', '2026-04-04T14:00:00.000Z', 12.75 * HOUR],
    ['America/Caracas', '2016-05-01T06:59:59.999Z', -4.5 * HOUR],
    ['America/Caracas', '2016-05-01T07:00:00.000Z', -4 * HOUR],
    ['Europe/Moscow', '2014-10-25T21:59:59.999Z', 4 * HOUR],
    ['Europe/Moscow', '2014-10-25T22:00:00.000Z', 3 * HOUR],
    ['Pacific/Apia', '2011-12-30T09:59:59.999Z', -10 * HOUR],
    ['Pacific/Apia', '2011-12-30T10:00:00.000Z', 14 * HOUR],
    ['Asia/Kolkata', '2026-03-08T07:00:00.000Z', 5.5 * HOUR],
    ['Asia/Tokyo', '2026-11-01T06:00:00.000Z', 9 * HOUR],
    ['UTC', '2026-03-08T07:00:00.000Z', 0],
  ])('%s at %s is %d ms', (zone, instant, offset) => {
    expect(offsetAt(zone, utc(instant))).toBe(offset);
  });
});

describe('wallOf', () => {
  it.each([
    [NY, '2026-03-08T06:59:59.000Z', '2026-03-08T01:59:59'],
    [NY, '2026-03-08T07:00:00.000Z', '2026-03-08T03:00:00'],
    // Both passes through 01:30 on the fall-back night read the same on the wall.
    [NY, '2026-11-01T05:30:00.000Z', '2026-11-01T01:30:00'],
    [NY, '2026-11-01T06:30:00.000Z', '2026-11-01T01:30:00'],
    [LORD_HOWE, '2026-04-04T14:45:00.000Z', '2026-04-05T01:45:00'],
    [LORD_HOWE, '2026-04-04T15:15:00.000Z', '2026-04-05T01:45:00'],
    ['Pacific/Apia', '2011-12-30T09:59:59.000Z', '2011-12-29T23:59:59'],
    ['Pacific/Apia', '2011-12-30T10:00:00.000Z', '2011-12-31T00:00:00'],
    ['Asia/Kolkata', '2026-01-01T00:00:00.000Z', '2026-01-01T05:30:00'],
    ['UTC', '2026-11-01T06:00:00.000Z', '2026-11-01T06:00:00'],
  ])('%s at %s reads %s', (zone, instant, local) => {
    expect(wallOf(zone, utc(instant))).toBe(wall(local));
  });
});

describe('instantsOf', () => {
  it.each([
    // Spring forward: the wall times in [02:00, 03:00) do not exist; the gap ends at the transition.
    [NY, '2026-03-08T02:00:00', '2026-03-08T07:00:00Z'],
    [NY, '2026-03-08T02:30:00', '2026-03-08T07:00:00Z'],
    [NY, '2026-03-08T02:59:59', '2026-03-08T07:00:00Z'],
    [BERLIN, '2026-03-29T02:30:00', '2026-03-29T01:00:00Z'],
    [LORD_HOWE, '2026-10-04T02:00:00', '2026-10-03T15:30:00Z'],
    [LORD_HOWE, '2026-10-04T02:15:00', '2026-10-03T15:30:00Z'],
    ['Pacific/Chatham', '2026-09-27T03:00:00', '2026-09-26T14:00:00Z'],
    ['America/Caracas', '2016-05-01T02:45:00', '2016-05-01T07:00:00Z'],
    // Apia skipped a whole calendar day.
    ['Pacific/Apia', '2011-12-30T00:00:00', '2011-12-30T10:00:00Z'],
    ['Pacific/Apia', '2011-12-30T12:00:00', '2011-12-30T10:00:00Z'],
    ['Pacific/Apia', '2011-12-30T23:59:59', '2011-12-30T10:00:00Z'],
  ])('%s: %s is skipped, gapEnd is %s', (zone, local, gapEnd) => {
    expect(instantsOf(zone, wall(local))).toEqual({ instants: [], gapEnd: utc(gapEnd) });
  });

  it.each([
    // Fall back: the wall times in the repeated span have two instants, one shift apart.
    [NY, '2026-11-01T01:00:00', '2026-11-01T05:00:00Z', '2026-11-01T06:00:00Z'],
    [NY, '2026-11-01T01:30:00', '2026-11-01T05:30:00Z', '2026-11-01T06:30:00Z'],
    [NY, '2026-11-01T01:59:59', '2026-11-01T05:59:59Z', '2026-11-01T06:59:59Z'],
    [BERLIN, '2026-10-25T02:30:00', '2026-10-25T00:30:00Z', '2026-10-25T01:30:00Z'],
    [LORD_HOWE, '2026-04-05T01:30:00', '2026-04-04T14:30:00Z', '2026-04-04T15:00:00Z'],
    [LORD_HOWE, '2026-04-05T01:45:00', '2026-04-04T14:45:00Z', '2026-04-04T15:15:00Z'],
    ['Pacific/Chatham', '2026-04-05T03:00:00', '2026-04-04T13:15:00Z', '2026-04-04T14:15:00Z'],
    ['Europe/Moscow', '2014-10-26T01:30:00', '2014-10-25T21:30:00Z', '2014-10-25T22:30:00Z'],
  ])('%s: %s is repeated, at %s and %s', (zone, local, first, second) => {
    expect(instantsOf(zone, wall(local))).toEqual({ instants: [utc(first), utc(second)], gapEnd: null });
  });

  it('puts the two copies exactly one shift apart: 1 h in New York, 30 min on Lord Howe', () => {
    const [a, b] = instantsOf(NY, wall('2026-11-01T01:30:00')).instants;
    expect(b! - a!).toBe(HOUR);
    const [c, d] = instantsOf(LORD_HOWE, wall('2026-04-05T01:45:00')).instants;
    expect(d! - c!).toBe(30 * MINUTE);
  });

  it.each([
    // Just outside the gap or the repeated span: exactly one instant.
    [NY, '2026-03-08T01:59:59', '2026-03-08T06:59:59Z'],
    [NY, '2026-03-08T03:00:00', '2026-03-08T07:00:00Z'],
    [NY, '2026-11-01T00:59:59', '2026-11-01T04:59:59Z'],
    [NY, '2026-11-01T02:00:00', '2026-11-01T07:00:00Z'],
    [LORD_HOWE, '2026-04-05T02:00:00', '2026-04-04T15:30:00Z'],
    [LORD_HOWE, '2026-10-04T02:30:00', '2026-10-03T15:30:00Z'],
    ['America/Caracas', '2016-05-01T02:29:59', '2016-05-01T06:59:59Z'],
    ['Pacific/Apia', '2011-12-31T00:00:00', '2011-12-30T10:00:00Z'],
    ['Asia/Tokyo', '2026-03-08T02:30:00', '2026-03-07T17:30:00Z'],
    ['UTC', '2026-03-08T02:30:00', '2026-03-08T02:30:00Z'],
    ['UTC', '2026-11-01T01:30:00', '2026-11-01T01:30:00Z'],
  ])('%s: %s happens once, at %s', (zone, local, instant) => {
    expect(instantsOf(zone, wall(local))).toEqual({ instants: [utc(instant)], gapEnd: null });
  });
});

describe('transitionsBetween', () => {
  const year2026: [number, number] = [utc('2026-01-01T00:00:00Z'), utc('2027-01-01T00:00:00Z') - 1];

  it('finds exactly the two transitions of 2026 in New York, with their offsets', () => {
    expect(transitionsBetween(NY, ...year2026)).toEqual([
      { at: utc('2026-03-08T07:00:00Z'), before: -5 * HOUR, after: -4 * HOUR },
      { at: utc('2026-11-01T06:00:00Z'), before: -4 * HOUR, after: -5 * HOUR },
    ]);
  });

  it('finds the 2026 transitions of Berlin and Lord Howe', () => {
    expect(transitionsBetween(BERLIN, ...year2026)).toEqual([
      { at: utc('2026-03-29T01:00:00Z'), before: 1 * HOUR, after: 2 * HOUR },
      { at: utc('2026-10-25T01:00:00Z'), before: 2 * HOUR, after: 1 * HOUR },
    ]);
    expect(transitionsBetween(LORD_HOWE, ...year2026)).toEqual([
      { at: utc('2026-04-04T15:00:00Z'), before: 11 * HOUR, after: 10.5 * HOUR },
      { at: utc('2026-10-03T15:30:00Z'), before: 10.5 * HOUR, after: 11 * HOUR },
    ]);
  });

  it.each(['UTC', 'Asia/Tokyo', 'Asia/Kolkata', 'America/Sao_Paulo'])('finds none in %s in 2026', (zone) => {
    expect(transitionsBetween(zone, ...year2026)).toEqual([]);
  });

  it('finds the political changes', () => {
    expect(
      transitionsBetween('America/Caracas', utc('2016-01-01T00:00:00Z'), utc('2016-12-31T00:00:00Z')),
    ).toEqual([{ at: utc('2016-05-01T07:00:00Z'), before: -4.5 * HOUR, after: -4 * HOUR }]);
    expect(
      transitionsBetween('Europe/Moscow', utc('2014-01-01T00:00:00Z'), utc('2014-12-31T00:00:00Z')),
    ).toEqual([{ at: utc('2014-10-25T22:00:00Z'), before: 4 * HOUR, after: 3 * HOUR }]);
    expect(
      transitionsBetween('Pacific/Apia', utc('2011-12-01T00:00:00Z'), utc('2012-01-31T00:00:00Z')),
    ).toEqual([{ at: utc('2011-12-30T10:00:00Z'), before: -10 * HOUR, after: 14 * HOUR }]);
  });

  it('includes both bounds', () => {
    const at = utc('2026-03-08T07:00:00Z');
    expect(transitionsBetween(NY, at, at).map((t) => t.at)).toEqual([at]);
    expect(transitionsBetween(NY, at - HOUR, at).map((t) => t.at)).toEqual([at]);
    expect(transitionsBetween(NY, at, at + HOUR).map((t) => t.at)).toEqual([at]);
    expect(transitionsBetween(NY, at + 1, at + HOUR)).toEqual([]);
    expect(transitionsBetween(NY, at - HOUR, at - 1)).toEqual([]);
  });

  it('spans several years in order, without duplicates', () => {
    expect(
      transitionsBetween(NY, utc('2025-01-01T00:00:00Z'), utc('2027-12-31T23:59:59Z')).map((t) =>
        new Date(t.at).toISOString(),
      ),
    ).toEqual([
      '2025-03-09T07:00:00.000Z',
      '2025-11-02T06:00:00.000Z',
      '2026-03-08T07:00:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2027-03-14T07:00:00.000Z',
      '2027-11-07T06:00:00.000Z',
    ]);
  });
});

describe('agreement with Intl', () => {
  const zones = [
    'UTC',
    NY,
    BERLIN,
    LORD_HOWE,
    'Asia/Kolkata',
    'America/Sao_Paulo',
    'Pacific/Chatham',
    'Asia/Tokyo',
  ] as const;
  const formatters = new Map<string, Intl.DateTimeFormat>();

  /** The offset Intl reports (`GMT+05:30`), in ms: an oracle independent of the transition tables. */
  function intlOffset(zone: string, instant: number): number {
    let f = formatters.get(zone);
    if (!f) {
      f = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' });
      formatters.set(zone, f);
    }
    const name = f.formatToParts(new Date(instant)).find((p) => p.type === 'timeZoneName')?.value;
    if (name === 'GMT') return 0;
    const m = /^GMT([+-])(\d{2}):(\d{2})$/.exec(name ?? '');
    if (!m) throw new Error(`unexpected offset name ${name}`);
    return (m[1] === '-' ? -1 : 1) * (Number(m[2]) * HOUR + Number(m[3]) * MINUTE);
  }

  it('offsetAt equals the Intl offset, and every instant is among instantsOf its own wall time', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...zones),
        fc.integer({ min: utc('2025-01-01T00:00:00Z'), max: utc('2029-01-01T00:00:00Z') }),
        (zone, t) => {
          const offset = offsetAt(zone, t);
          expect(offset).toBe(intlOffset(zone, t));
          expect(wallOf(zone, t)).toBe(t + offset);
          const { instants, gapEnd } = instantsOf(zone, t + offset);
          expect(instants).toContain(t);
          expect(gapEnd).toBeNull();
          for (const i of instants) expect(wallOf(zone, i)).toBe(t + offset);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('offsetAt equals the Intl offset one second either side of every 2025-2028 transition', () => {
    let seen = 0;
    for (const zone of zones) {
      for (const tr of transitionsBetween(zone, utc('2025-01-01T00:00:00Z'), utc('2029-01-01T00:00:00Z'))) {
        seen++;
        expect(offsetAt(zone, tr.at - 1000)).toBe(intlOffset(zone, tr.at - 1000));
        expect(offsetAt(zone, tr.at)).toBe(intlOffset(zone, tr.at));
        expect(intlOffset(zone, tr.at - 1000)).toBe(tr.before);
        expect(intlOffset(zone, tr.at)).toBe(tr.after);
      }
    }
    // Two a year for four years in New York, Berlin, Lord Howe and Chatham; none elsewhere.
    expect(seen).toBe(32);
  });
});
