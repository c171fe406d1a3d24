import { describe, expect, test } from 'vitest';
import { backfillSlots, checkBackfillRange, MAX_BACKFILL_SLOTS } from '../../src/core/backfill.js';
import { ValidationError } from '../../src/core/errors.js';
import { parseSchedule } from '../../src/core/schedule/schedule.js';
import { refusal } from '../setup/refusal.js';

const ms = (iso: string) => Date.parse(iso);
const isos = (slots: number[]) => slots.map((s) => new Date(s).toISOString());

/** The slots of `source` (in `timezone`) in [from, to), as ISO strings. */
function slots(source: string, from: string, to: string, timezone = 'UTC', max?: number): string[] {
  return isos(backfillSlots(parseSchedule(source, timezone), ms(from), ms(to), max));
}

/** The ValidationError `fn` throws. */
describe('range bounds: from included, to excluded', () => {
  test('@every: every slot of the range, oldest first, the one at `to` left out', () => {
    const got = slots('@every 1m', '2026-01-01T00:00:00Z', '2026-01-01T01:00:00Z');
    expect(got).toHaveLength(60);
    expect(got[0]).toBe('2026-01-01T00:00:00.000Z');
    expect(got.at(-1)).toBe('2026-01-01T00:59:00.000Z');
  });

  test('bounds between slots: the slots strictly inside', () => {
    expect(slots('@every 1h', '2026-01-01T00:30:00Z', '2026-01-01T03:30:00Z')).toEqual([
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T02:00:00.000Z',
      '2026-01-01T03:00:00.000Z',
    ]);
    // One millisecond past a slot leaves it out; one before `to` keeps the last.
    expect(slots('@every 1h', '2026-01-01T00:00:00.001Z', '2026-01-01T02:00:00.001Z')).toEqual([
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T02:00:00.000Z',
    ]);
  });

  test('consecutive ranges tile: no slot twice, none missed', () => {
    const a = slots('0 * * * *', '2026-01-01T00:00:00Z', '2026-01-01T05:00:00Z');
    const b = slots('0 * * * *', '2026-01-01T05:00:00Z', '2026-01-01T10:00:00Z');
    expect([...a, ...b]).toEqual(slots('0 * * * *', '2026-01-01T00:00:00Z', '2026-01-01T10:00:00Z'));
    expect(a).toHaveLength(5);
    expect(b[0]).toBe('2026-01-01T05:00:00.000Z');
  });

  test('an empty range (from = to), or one with no slot in it, has no slots', () => {
    expect(slots('@every 1m', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')).toEqual([]);
    expect(slots('0 3 * * *', '2026-01-01T04:00:00Z', '2026-01-02T02:59:59Z')).toEqual([]);
  });

  test('a reversed range is refused, naming from', () => {
    const err = refusal(() => slots('@every 1m', '2026-01-02T00:00:00Z', '2026-01-01T00:00:00Z'));
    expect(err.details.field).toBe('from');
    expect(err.message).toBe('from 2026-01-02T00:00:00.000Z is after to 2026-01-01T00:00:00.000Z');
    expect(() => checkBackfillRange(1, 0)).toThrow(ValidationError);
    expect(() => checkBackfillRange(1, 1)).not.toThrow();
  });
});

describe('cron in a daylight-saving zone', () => {
  test('fixed hours: a skipped local time fires once at the transition, a repeated one once', () => {
    // Europe/Berlin springs forward on 2026-03-29 (02:00 → 03:00 local, 01:00Z) and falls back on
    // 2026-10-25 (03:00 → 02:00 local, 01:00Z).
    expect(slots('30 2 * * *', '2026-03-28T00:00:00Z', '2026-03-31T00:00:00Z', 'Europe/Berlin')).toEqual([
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    expect(slots('30 2 * * *', '2026-10-24T00:00:00Z', '2026-10-27T00:00:00Z', 'Europe/Berlin')).toEqual([
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
  });

  test('wildcard hours follow elapsed time: the repeated hour fires twice', () => {
    expect(slots('*/30 * * * *', '2026-10-25T00:00:00Z', '2026-10-25T02:00:00Z', 'Europe/Berlin')).toEqual([
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T01:00:00.000Z',
      '2026-10-25T01:30:00.000Z',
    ]);
  });
});

describe('one-shot @at', () => {
  const at = '@at 2026-06-01T12:00:00Z';

  test('its instant when in the range (from included), else nothing (to excluded)', () => {
    expect(slots(at, '2026-06-01T00:00:00Z', '2026-06-02T00:00:00Z')).toEqual(['2026-06-01T12:00:00.000Z']);
    expect(slots(at, '2026-06-01T12:00:00Z', '2026-06-01T12:00:00.001Z')).toEqual([
      '2026-06-01T12:00:00.000Z',
    ]);
    expect(slots(at, '2026-06-01T00:00:00Z', '2026-06-01T12:00:00Z')).toEqual([]);
    expect(slots(at, '2026-06-01T12:00:00.001Z', '2027-01-01T00:00:00Z')).toEqual([]);
  });
});

describe('the bound', () => {
  test(`exactly ${MAX_BACKFILL_SLOTS} slots are accepted; one more is refused naming to and where to end`, () => {
    const from = '2026-01-01T00:00:00Z';
    // 10,000 minutes after from: the range [from, to) holds exactly 10,000 slots.
    const to = new Date(ms(from) + MAX_BACKFILL_SLOTS * 60_000).toISOString();
    expect(slots('* * * * *', from, to)).toHaveLength(MAX_BACKFILL_SLOTS);
    const err = refusal(() => slots('* * * * *', from, new Date(ms(to) + 1).toISOString()));
    expect(err.details.field).toBe('to');
    expect(err.message).toContain(`more than ${MAX_BACKFILL_SLOTS} slots of "* * * * *"`);
    expect(err.message).toContain(`(to ${to} ends the first part)`);
    expect(to).toBe('2026-01-07T22:40:00.000Z');
  });

  test('a range far over the bound is refused without walking it', () => {
    const started = performance.now();
    const err = refusal(() => slots('@every 1s', '2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z'));
    expect(err.details.field).toBe('to');
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test('the bound is a parameter', () => {
    expect(slots('@every 1h', '2026-01-01T00:00:00Z', '2026-01-01T03:00:00Z', 'UTC', 3)).toHaveLength(3);
    expect(
      refusal(() => slots('@every 1h', '2026-01-01T00:00:00Z', '2026-01-01T03:00:01Z', 'UTC', 3)).message,
    ).toContain('(to 2026-01-01T03:00:00.000Z ends the first part)');
  });
});
