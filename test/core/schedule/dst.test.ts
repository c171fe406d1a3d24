/**
 * The daylight-saving rule, pinned down slot by slot. Every expected instant below was worked out
 * by hand from the zone's rules (and checked against Intl.DateTimeFormat) and is written out in UTC.
 *
 *  - Fixed hours (`30 2 * * *`, `@daily`): a local time skipped by a spring-forward fires once, at
 *    the transition instant; a local time repeated by a fall-back fires once, at its first occurrence.
 *  - Wildcard or step hours (`0 * * * *`, `@hourly`): slots follow elapsed time; both copies of a
 *    repeated local time fire and no slot is invented in a skipped hour.
 */
import { describe, expect, it } from 'vitest';
import { planSlots } from '../../../src/core/misfire.js';
import {
  countSlotsIn,
  firstSlotFrom,
  lastSlotsIn,
  nextSlotAfter,
  parseSchedule,
} from '../../../src/core/schedule/schedule.js';

interface DstCase {
  zone: string;
  expression: string;
  /** Exclusive: the first expected slot is nextSlotAfter(from). */
  from: string;
  expected: string[];
}

const utc = (iso: string) => {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad test instant ${iso}`);
  return ms;
};
const isoAll = (slots: number[]) => slots.map((s) => new Date(s).toISOString());

/** The next `n` slots after `from`, by iterating nextSlotAfter. */
function iterate(zone: string, expression: string, from: string, n: number): string[] {
  const s = parseSchedule(expression, zone);
  const out: number[] = [];
  let cursor = utc(from);
  while (out.length < n) {
    const next = nextSlotAfter(s, cursor);
    if (next === null) break;
    out.push(next);
    cursor = next;
  }
  return isoAll(out);
}

const NY = 'America/New_York';
const BERLIN = 'Europe/Berlin';
const LORD_HOWE = 'Australia/Lord_Howe';
const CHATHAM = 'Pacific/Chatham';

// America/New_York 2026: spring forward 2026-03-08 02:00 EST (−5) → 03:00 EDT (−4) at 07:00Z;
// fall back 2026-11-01 02:00 EDT (−4) → 01:00 EST (−5) at 06:00Z (01:00-02:00 local runs twice:
// 05:00-06:00Z under EDT, then 06:00-07:00Z under EST).
const newYork: DstCase[] = [
  {
    // 02:30 EST on the 7th; 02:30 does not exist on the 8th → the transition; 02:30 EDT afterwards.
    zone: NY,
    expression: '30 2 * * *',
    from: '2026-03-06T12:00:00Z',
    expected: [
      '2026-03-07T07:30:00.000Z',
      '2026-03-08T07:00:00.000Z',
      '2026-03-09T06:30:00.000Z',
      '2026-03-10T06:30:00.000Z',
    ],
  },
  {
    // 02:00 is the first skipped minute: it too fires at the transition.
    zone: NY,
    expression: '0 2 * * *',
    from: '2026-03-06T12:00:00Z',
    expected: ['2026-03-07T07:00:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:00:00.000Z'],
  },
  {
    // 03:00 EDT exists (it is the transition instant) and fires once, not twice.
    zone: NY,
    expression: '0 3 * * *',
    from: '2026-03-06T12:00:00Z',
    expected: ['2026-03-07T08:00:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T07:00:00.000Z'],
  },
  {
    // Three skipped local times (02:00 02:20 02:40) collapse into one slot at the transition.
    zone: NY,
    expression: '*/20 2 * * *',
    from: '2026-03-08T06:00:00Z',
    expected: [
      '2026-03-08T07:00:00.000Z',
      '2026-03-09T06:00:00.000Z',
      '2026-03-09T06:20:00.000Z',
      '2026-03-09T06:40:00.000Z',
    ],
  },
  {
    // Weekly on Sunday 02:15: the 8th is the transition Sunday.
    zone: NY,
    expression: '15 2 * * 0',
    from: '2026-03-01T12:00:00Z',
    expected: ['2026-03-08T07:00:00.000Z', '2026-03-15T06:15:00.000Z'],
  },
  {
    zone: NY,
    expression: '@daily',
    from: '2026-03-07T00:00:00Z',
    expected: ['2026-03-07T05:00:00.000Z', '2026-03-08T05:00:00.000Z', '2026-03-09T04:00:00.000Z'],
  },
  {
    // Local 01:00 01:30 EST, then 03:00 03:30 04:00 04:30 EDT: nothing at 02:xx.
    zone: NY,
    expression: '*/30 * * * *',
    from: '2026-03-08T05:50:00Z',
    expected: [
      '2026-03-08T06:00:00.000Z',
      '2026-03-08T06:30:00.000Z',
      '2026-03-08T07:00:00.000Z',
      '2026-03-08T07:30:00.000Z',
      '2026-03-08T08:00:00.000Z',
      '2026-03-08T08:30:00.000Z',
    ],
  },
  {
    // Local 00:00 01:00 EST, 03:00 04:00 05:00 EDT: one slot per elapsed hour, 02:00 not invented.
    zone: NY,
    expression: '0 * * * *',
    from: '2026-03-08T04:30:00Z',
    expected: [
      '2026-03-08T05:00:00.000Z',
      '2026-03-08T06:00:00.000Z',
      '2026-03-08T07:00:00.000Z',
      '2026-03-08T08:00:00.000Z',
      '2026-03-08T09:00:00.000Z',
    ],
  },
  {
    // Local 01:45 EST, then 03:45 04:45 EDT: the skipped 02:45 is not moved to the transition.
    zone: NY,
    expression: '45 * * * *',
    from: '2026-03-08T06:00:00Z',
    expected: ['2026-03-08T06:45:00.000Z', '2026-03-08T07:45:00.000Z', '2026-03-08T08:45:00.000Z'],
  },
  {
    // Exclusive start exactly on the transition: the skipped 02:30 has already fired.
    zone: NY,
    expression: '30 2 * * *',
    from: '2026-03-08T07:00:00Z',
    expected: ['2026-03-09T06:30:00.000Z'],
  },
  {
    // Fall back: 01:30 EDT (05:30Z) fires; 01:30 EST (06:30Z) does not.
    zone: NY,
    expression: '30 1 * * *',
    from: '2026-10-31T12:00:00Z',
    expected: ['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z', '2026-11-03T06:30:00.000Z'],
  },
  {
    // From inside the second 01:00-02:00: the repeated 01:30 EST is not a slot.
    zone: NY,
    expression: '30 1 * * *',
    from: '2026-11-01T06:10:00Z',
    expected: ['2026-11-02T06:30:00.000Z'],
  },
  {
    zone: NY,
    expression: '0 1 * * *',
    from: '2026-10-31T12:00:00Z',
    expected: ['2026-11-01T05:00:00.000Z', '2026-11-02T06:00:00.000Z'],
  },
  {
    // 02:00 EDT never shows on the 1st (the clock turns back at it); 02:00 EST happens once.
    zone: NY,
    expression: '0 2 * * *',
    from: '2026-10-30T12:00:00Z',
    expected: ['2026-10-31T06:00:00.000Z', '2026-11-01T07:00:00.000Z', '2026-11-02T07:00:00.000Z'],
  },
  {
    // Fixed hour, stepped minutes: only the first pass through 01:xx fires.
    zone: NY,
    expression: '*/15 1 * * *',
    from: '2026-11-01T04:50:00Z',
    expected: [
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T05:15:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T05:45:00.000Z',
      '2026-11-02T06:00:00.000Z',
    ],
  },
  {
    zone: NY,
    expression: '@daily',
    from: '2026-10-31T00:00:00Z',
    expected: ['2026-10-31T04:00:00.000Z', '2026-11-01T04:00:00.000Z', '2026-11-02T05:00:00.000Z'],
  },
  {
    // Local 01:00 01:30 EDT, 01:00 01:30 EST, 02:00 EST: both copies of the repeated hour fire.
    zone: NY,
    expression: '*/30 * * * *',
    from: '2026-11-01T04:40:00Z',
    expected: [
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-01T07:00:00.000Z',
    ],
  },
  {
    // Local 00:00 EDT, 01:00 EDT, 01:00 EST, 02:00 EST, 03:00 EST.
    zone: NY,
    expression: '@hourly',
    from: '2026-11-01T03:30:00Z',
    expected: [
      '2026-11-01T04:00:00.000Z',
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T07:00:00.000Z',
      '2026-11-01T08:00:00.000Z',
    ],
  },
  {
    // Every minute through the fall-back instant: 01:59 EDT then 01:00 EST, one minute of elapsed time apart.
    zone: NY,
    expression: '* * * * *',
    from: '2026-11-01T05:58:00Z',
    expected: [
      '2026-11-01T05:59:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:01:00.000Z',
      '2026-11-01T06:02:00.000Z',
    ],
  },
];

// Europe/Berlin 2026: 2026-03-29 02:00 CET (+1) → 03:00 CEST (+2) at 01:00Z;
// 2026-10-25 03:00 CEST (+2) → 02:00 CET (+1) at 01:00Z (02:00-03:00 local: 00:00-01:00Z, then 01:00-02:00Z).
const berlin: DstCase[] = [
  {
    zone: BERLIN,
    expression: '30 2 * * *',
    from: '2026-03-27T12:00:00Z',
    expected: ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z'],
  },
  {
    zone: BERLIN,
    expression: '30 2 * * *',
    from: '2026-10-23T12:00:00Z',
    expected: ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z'],
  },
  {
    // Local 01:20 01:40 CET, 03:00 03:20 03:40 CEST.
    zone: BERLIN,
    expression: '*/20 * * * *',
    from: '2026-03-29T00:10:00Z',
    expected: [
      '2026-03-29T00:20:00.000Z',
      '2026-03-29T00:40:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-29T01:20:00.000Z',
      '2026-03-29T01:40:00.000Z',
    ],
  },
  {
    // Local 02:00 02:20 02:40 CEST, 02:00 02:20 02:40 CET, 03:00 03:20 CET.
    zone: BERLIN,
    expression: '*/20 * * * *',
    from: '2026-10-24T23:50:00Z',
    expected: [
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T00:20:00.000Z',
      '2026-10-25T00:40:00.000Z',
      '2026-10-25T01:00:00.000Z',
      '2026-10-25T01:20:00.000Z',
      '2026-10-25T01:40:00.000Z',
      '2026-10-25T02:00:00.000Z',
      '2026-10-25T02:20:00.000Z',
    ],
  },
];

// Australia/Lord_Howe 2026, a 30-minute shift: DST ends 2026-04-05 02:00 LHDT (+11) → 01:30 LHST
// (+10:30) at 2026-04-04T15:00Z (01:30-02:00 local: 14:30-15:00Z, then 15:00-15:30Z); DST starts
// 2026-10-04 02:00 LHST (+10:30) → 02:30 LHDT (+11) at 2026-10-03T15:30Z (02:00-02:30 local skipped).
const lordHowe: DstCase[] = [
  {
    // 01:45 +11 = 14:45Z; on the 5th only its first occurrence (14:45Z, not 15:15Z); then 01:45 +10:30.
    zone: LORD_HOWE,
    expression: '45 1 * * *',
    from: '2026-04-03T00:00:00Z',
    expected: ['2026-04-03T14:45:00.000Z', '2026-04-04T14:45:00.000Z', '2026-04-05T15:15:00.000Z'],
  },
  {
    // 02:15 +10:30 = 15:45Z; skipped on the 4th → 15:30Z; then 02:15 +11 = 15:15Z.
    zone: LORD_HOWE,
    expression: '15 2 * * *',
    from: '2026-10-02T00:00:00Z',
    expected: ['2026-10-02T15:45:00.000Z', '2026-10-03T15:30:00.000Z', '2026-10-04T15:15:00.000Z'],
  },
  {
    // Local 01:30 01:45 (+11), 01:30 01:45 02:00 02:15 (+10:30).
    zone: LORD_HOWE,
    expression: '*/15 * * * *',
    from: '2026-04-04T14:20:00Z',
    expected: [
      '2026-04-04T14:30:00.000Z',
      '2026-04-04T14:45:00.000Z',
      '2026-04-04T15:00:00.000Z',
      '2026-04-04T15:15:00.000Z',
      '2026-04-04T15:30:00.000Z',
      '2026-04-04T15:45:00.000Z',
    ],
  },
  {
    // Local 01:45 (+10:30), then 02:30 02:45 03:00 (+11): 02:00 and 02:15 are not invented.
    zone: LORD_HOWE,
    expression: '*/15 * * * *',
    from: '2026-10-03T15:00:00Z',
    expected: [
      '2026-10-03T15:15:00.000Z',
      '2026-10-03T15:30:00.000Z',
      '2026-10-03T15:45:00.000Z',
      '2026-10-03T16:00:00.000Z',
    ],
  },
];

// Pacific/Chatham 2026, a 45-minute offset: 2026-04-05 03:45 (+13:45) → 02:45 (+12:45) at
// 2026-04-04T14:00Z; 2026-09-27 02:45 (+12:45) → 03:45 (+13:45) at 2026-09-26T14:00Z.
const chatham: DstCase[] = [
  {
    zone: CHATHAM,
    expression: '0 3 * * *',
    from: '2026-04-03T00:00:00Z',
    expected: ['2026-04-03T13:15:00.000Z', '2026-04-04T13:15:00.000Z', '2026-04-05T14:15:00.000Z'],
  },
  {
    zone: CHATHAM,
    expression: '0 3 * * *',
    from: '2026-09-25T00:00:00Z',
    expected: ['2026-09-25T14:15:00.000Z', '2026-09-26T14:00:00.000Z', '2026-09-27T13:15:00.000Z'],
  },
  {
    // Local 03:00 03:30 (+13:45), 03:00 03:30 04:00 (+12:45).
    zone: CHATHAM,
    expression: '*/30 * * * *',
    from: '2026-04-04T12:50:00Z',
    expected: [
      '2026-04-04T13:15:00.000Z',
      '2026-04-04T13:45:00.000Z',
      '2026-04-04T14:15:00.000Z',
      '2026-04-04T14:45:00.000Z',
      '2026-04-04T15:15:00.000Z',
    ],
  },
  {
    // Local 02:00 02:30 (+12:45), then 04:00 04:30 (+13:45): nothing at the transition (03:45 local).
    zone: CHATHAM,
    expression: '*/30 * * * *',
    from: '2026-09-26T13:00:00Z',
    expected: [
      '2026-09-26T13:15:00.000Z',
      '2026-09-26T13:45:00.000Z',
      '2026-09-26T14:15:00.000Z',
      '2026-09-26T14:45:00.000Z',
    ],
  },
];

// Offset changes made by law rather than by a daylight-saving rule.
//  - America/Caracas: 2016-05-01 02:30 (−04:30) → 03:00 (−04:00) at 07:00Z; 02:30-03:00 skipped.
//  - Europe/Moscow: 2014-10-26 02:00 (+04) → 01:00 (+03) at 2014-10-25T22:00Z; 01:00-02:00 repeated.
//  - Pacific/Apia: crossed the date line, 2011-12-29 24:00 (−10) → 2011-12-31 00:00 (+14) at
//    2011-12-30T10:00Z; the whole local day 2011-12-30 is skipped.
const political: DstCase[] = [
  {
    zone: 'America/Caracas',
    expression: '45 2 * * *',
    from: '2016-04-29T12:00:00Z',
    expected: ['2016-04-30T07:15:00.000Z', '2016-05-01T07:00:00.000Z', '2016-05-02T06:45:00.000Z'],
  },
  {
    // Local 02:00 02:15 (−04:30), 03:00 03:15 (−04:00).
    zone: 'America/Caracas',
    expression: '*/15 * * * *',
    from: '2016-05-01T06:20:00Z',
    expected: [
      '2016-05-01T06:30:00.000Z',
      '2016-05-01T06:45:00.000Z',
      '2016-05-01T07:00:00.000Z',
      '2016-05-01T07:15:00.000Z',
    ],
  },
  {
    zone: 'Europe/Moscow',
    expression: '30 1 * * *',
    from: '2014-10-24T00:00:00Z',
    expected: ['2014-10-24T21:30:00.000Z', '2014-10-25T21:30:00.000Z', '2014-10-26T22:30:00.000Z'],
  },
  {
    // Local 00:00 01:00 (+04), 01:00 02:00 (+03).
    zone: 'Europe/Moscow',
    expression: '0 * * * *',
    from: '2014-10-25T19:30:00Z',
    expected: [
      '2014-10-25T20:00:00.000Z',
      '2014-10-25T21:00:00.000Z',
      '2014-10-25T22:00:00.000Z',
      '2014-10-25T23:00:00.000Z',
    ],
  },
  {
    // Noon on the 28th and 29th (−10); the skipped 30th fires at the transition; noon on the 31st (+14).
    zone: 'Pacific/Apia',
    expression: '0 12 * * *',
    from: '2011-12-28T12:00:00Z',
    expected: [
      '2011-12-28T22:00:00.000Z',
      '2011-12-29T22:00:00.000Z',
      '2011-12-30T10:00:00.000Z',
      '2011-12-30T22:00:00.000Z',
      '2011-12-31T22:00:00.000Z',
    ],
  },
  {
    // Midnight of the skipped 30th and midnight of the 31st are the same instant: one slot.
    zone: 'Pacific/Apia',
    expression: '0 0 * * *',
    from: '2011-12-29T09:00:00Z',
    expected: ['2011-12-29T10:00:00.000Z', '2011-12-30T10:00:00.000Z', '2011-12-31T10:00:00.000Z'],
  },
  {
    // Step hours: 12:00 18:00 on the 29th (−10), 00:00 06:00 12:00 on the 31st (+14), 6 elapsed hours apart.
    zone: 'Pacific/Apia',
    expression: '0 */6 * * *',
    from: '2011-12-29T21:00:00Z',
    expected: [
      '2011-12-29T22:00:00.000Z',
      '2011-12-30T04:00:00.000Z',
      '2011-12-30T10:00:00.000Z',
      '2011-12-30T16:00:00.000Z',
      '2011-12-30T22:00:00.000Z',
    ],
  },
];

// Control: UTC has no transitions, so the same expressions on the same dates are plain arithmetic.
const control: DstCase[] = [
  {
    zone: 'UTC',
    expression: '30 2 * * *',
    from: '2026-03-07T00:00:00Z',
    expected: ['2026-03-07T02:30:00.000Z', '2026-03-08T02:30:00.000Z', '2026-03-09T02:30:00.000Z'],
  },
  {
    zone: 'UTC',
    expression: '30 1 * * *',
    from: '2026-10-31T12:00:00Z',
    expected: ['2026-11-01T01:30:00.000Z', '2026-11-02T01:30:00.000Z'],
  },
  {
    zone: 'UTC',
    expression: '*/30 * * * *',
    from: '2026-11-01T04:40:00Z',
    expected: [
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-01T07:00:00.000Z',
    ],
  },
  {
    zone: 'UTC',
    expression: '@hourly',
    from: '2026-03-08T05:30:00Z',
    expected: [
      '2026-03-08T06:00:00.000Z',
      '2026-03-08T07:00:00.000Z',
      '2026-03-08T08:00:00.000Z',
      '2026-03-08T09:00:00.000Z',
    ],
  },
  {
    zone: 'Asia/Tokyo',
    expression: '30 2 * * *',
    from: '2026-03-07T00:00:00Z',
    expected: ['2026-03-07T17:30:00.000Z', '2026-03-08T17:30:00.000Z', '2026-03-09T17:30:00.000Z'],
  },
];

describe.each([
  ['America/New_York', newYork],
  ['Europe/Berlin', berlin],
  ['Australia/Lord_Howe', lordHowe],
  ['Pacific/Chatham', chatham],
  ['political offset changes', political],
  ['no transitions', control],
])('daylight-saving rule: %s', (_name, cases) => {
  it.each(cases)('$zone "$expression" after $from', ({ zone, expression, from, expected }) => {
    expect(iterate(zone, expression, from, expected.length)).toEqual(expected);
  });
});

describe('range helpers across a transition', () => {
  const ny = (expression: string) => parseSchedule(expression, NY);

  it('counts 23, 24 and 25 hourly slots in the local days of spring forward, a plain day and fall back', () => {
    // Local day 2026-03-08: 00:00 EST (05:00Z) to 00:00 EDT on the 9th (04:00Z), end exclusive.
    expect(countSlotsIn(ny('@hourly'), utc('2026-03-08T05:00:00Z'), utc('2026-03-09T04:00:00Z') - 1)).toBe(
      23,
    );
    expect(countSlotsIn(ny('@hourly'), utc('2026-03-09T04:00:00Z'), utc('2026-03-10T04:00:00Z') - 1)).toBe(
      24,
    );
    // Local day 2026-11-01: 00:00 EDT (04:00Z) to 00:00 EST on the 2nd (05:00Z).
    expect(countSlotsIn(ny('@hourly'), utc('2026-11-01T04:00:00Z'), utc('2026-11-02T05:00:00Z') - 1)).toBe(
      25,
    );
    expect(
      countSlotsIn(ny('*/30 * * * *'), utc('2026-03-08T05:00:00Z'), utc('2026-03-09T04:00:00Z') - 1),
    ).toBe(46);
    expect(
      countSlotsIn(ny('*/30 * * * *'), utc('2026-11-01T04:00:00Z'), utc('2026-11-02T05:00:00Z') - 1),
    ).toBe(50);
  });

  it('counts one fixed-hour slot on each transition day', () => {
    expect(countSlotsIn(ny('30 2 * * *'), utc('2026-03-08T05:00:00Z'), utc('2026-03-09T04:00:00Z') - 1)).toBe(
      1,
    );
    expect(countSlotsIn(ny('30 1 * * *'), utc('2026-11-01T04:00:00Z'), utc('2026-11-02T05:00:00Z') - 1)).toBe(
      1,
    );
  });

  it('firstSlotFrom the transition instant includes the skipped slot, and lastSlotsIn sees both copies', () => {
    expect(firstSlotFrom(ny('30 2 * * *'), utc('2026-03-08T07:00:00Z'))).toBe(utc('2026-03-08T07:00:00Z'));
    expect(firstSlotFrom(ny('30 2 * * *'), utc('2026-03-08T07:00:00Z') + 1)).toBe(
      utc('2026-03-09T06:30:00Z'),
    );
    expect(
      isoAll(lastSlotsIn(ny('@hourly'), utc('2026-11-01T04:00:00Z'), utc('2026-11-01T07:30:00Z'), 3)),
    ).toEqual(['2026-11-01T05:00:00.000Z', '2026-11-01T06:00:00.000Z', '2026-11-01T07:00:00.000Z']);
    expect(
      isoAll(lastSlotsIn(ny('30 1 * * *'), utc('2026-10-30T00:00:00Z'), utc('2026-11-01T23:00:00Z'), 5)),
    ).toEqual(['2026-10-30T05:30:00.000Z', '2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z']);
  });

  it('planSlots catches up over an outage spanning spring forward with exactly the rule’s slots', () => {
    const plan = planSlots({
      schedule: ny('30 2 * * *'),
      nextRunAt: utc('2026-03-07T07:30:00Z'),
      now: utc('2026-03-09T12:00:00Z'),
      lookaheadMs: 0,
      misfireThresholdMs: 60_000,
      policy: 'catch_up',
      catchUpLimit: 10,
    });
    expect({ ...plan, slots: isoAll(plan.slots) }).toEqual({
      slots: ['2026-03-07T07:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z'],
      dropped: 0,
      nextRunAt: utc('2026-03-10T06:30:00Z'),
    });
  });

  it('planSlots over an outage spanning fall back keeps both copies of the repeated hour', () => {
    const input = {
      schedule: ny('@hourly'),
      nextRunAt: utc('2026-11-01T04:00:00Z'),
      now: utc('2026-11-01T08:30:00Z'),
      lookaheadMs: 0,
      misfireThresholdMs: 60_000,
      catchUpLimit: 10,
    };
    const catchUp = planSlots({ ...input, policy: 'catch_up' });
    expect({ ...catchUp, slots: isoAll(catchUp.slots) }).toEqual({
      slots: [
        '2026-11-01T04:00:00.000Z',
        '2026-11-01T05:00:00.000Z',
        '2026-11-01T06:00:00.000Z',
        '2026-11-01T07:00:00.000Z',
        '2026-11-01T08:00:00.000Z',
      ],
      dropped: 0,
      nextRunAt: utc('2026-11-01T09:00:00Z'),
    });
    const once = planSlots({ ...input, policy: 'fire_once' });
    expect({ ...once, slots: isoAll(once.slots) }).toEqual({
      slots: ['2026-11-01T08:00:00.000Z'],
      dropped: 4,
      nextRunAt: utc('2026-11-01T09:00:00Z'),
    });
  });
});
