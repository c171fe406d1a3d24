import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/errors.js';
import { checkCronFields } from '../../../src/core/schedule/cron-fields.js';
import { nextSlotAfter, parseSchedule } from '../../../src/core/schedule/schedule.js';

const utc = (iso: string) => {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad test instant ${iso}`);
  return ms;
};

/** The error parseSchedule throws for `source`; fails unless it is a ValidationError. */
function rejection(source: string, timezone = 'UTC'): ValidationError {
  try {
    parseSchedule(source, timezone);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).code).toBe('validation_error');
    return err as ValidationError;
  }
  throw new Error(`parseSchedule(${JSON.stringify(source)}) did not throw`);
}

/** The next `n` slots strictly after `from`, as ISO strings. */
function slots(source: string, from: string, n: number, timezone = 'UTC'): string[] {
  const s = parseSchedule(source, timezone);
  const out: string[] = [];
  let cursor = utc(from);
  while (out.length < n) {
    const next = nextSlotAfter(s, cursor);
    if (next === null) break;
    out.push(new Date(next).toISOString());
    cursor = next;
  }
  return out;
}

const FIELDS_HINT = 'expected 5 (minute hour day-of-month month day-of-week) or 6 (with seconds first)';

describe('invalid cron expressions name the field and the reason', () => {
  it.each([
    // Field count.
    ['* * * *', `cron expression "* * * *": has 4 fields; ${FIELDS_HINT}`],
    ['* * * * * * *', `cron expression "* * * * * * *": has 7 fields; ${FIELDS_HINT}`],
    // Out of range, field by field.
    ['60 * * * * *', 'cron expression "60 * * * * *": second 60 is out of range 0-59'],
    ['61 * * * *', 'cron expression "61 * * * *": minute 61 is out of range 0-59'],
    ['* 24 * * *', 'cron expression "* 24 * * *": hour 24 is out of range 0-23'],
    ['* * 0 * *', 'cron expression "* * 0 * *": day-of-month 0 is out of range 1-31'],
    ['* * 32 * *', 'cron expression "* * 32 * *": day-of-month 32 is out of range 1-31'],
    ['* * * 13 *', 'cron expression "* * * 13 *": month 13 is out of range 1-12'],
    ['* * * 0 *', 'cron expression "* * * 0 *": month 0 is out of range 1-12'],
    ['* * * * 8', 'cron expression "* * * * 8": day-of-week 8 is out of range 0-7'],
    ['0 0 * * 8#1', 'cron expression "0 0 * * 8#1": day-of-week 8 is out of range 0-7'],
    // Names.
    [
      '* * * JANUARY *',
      'cron expression "* * * JANUARY *": month "JANUARY" is not a number or a name such as FEB',
    ],
    [
      '* * * * FUNDAY',
      'cron expression "* * * * FUNDAY": day-of-week "FUNDAY" is not a number or a name such as MON',
    ],
    ['MON * * * *', 'cron expression "MON * * * *": minute "MON" is not a number'],
    // Ranges and steps.
    ['5-1 * * * *', 'cron expression "5-1 * * * *": minute range 5-1 runs backwards'],
    ['0 0 * DEC-JAN *', 'cron expression "0 0 * DEC-JAN *": month range DEC-JAN runs backwards'],
    ['*/0 * * * *', 'cron expression "*/0 * * * *": minute step "0" must be a whole number from 1 to 60'],
    ['*/61 * * * *', 'cron expression "*/61 * * * *": minute step "61" must be a whole number from 1 to 60'],
    ['0 */25 * * *', 'cron expression "0 */25 * * *": hour step "25" must be a whole number from 1 to 24'],
    ['*/ * * * *', 'cron expression "*/ * * * *": minute step "" must be a whole number from 1 to 60'],
    ['*/5/2 * * * *', 'cron expression "*/5/2 * * * *": minute "*/5/2" has more than one step'],
    ['1- * * * *', 'cron expression "1- * * * *": minute "1-" is not a value, range or step'],
    ['1-2-3 * * * *', 'cron expression "1-2-3 * * * *": minute "1-2-3" is not a value, range or step'],
    ['-1 * * * *', 'cron expression "-1 * * * *": minute "-1" is not a value, range or step'],
    ['1.5 * * * *', 'cron expression "1.5 * * * *": minute "1.5" is not a number'],
    ['1,,2 * * * *', 'cron expression "1,,2 * * * *": minute has an empty list item'],
    ['0 0 1, * *', 'cron expression "0 0 1, * *": day-of-month has an empty list item'],
    // Quartz extensions that are not supported, or used wrongly.
    [
      '0 0 15W * *',
      'cron expression "0 0 15W * *": day-of-month "15W": W (nearest weekday) is not supported',
    ],
    ['0 0 LW * *', 'cron expression "0 0 LW * *": day-of-month "LW": W (nearest weekday) is not supported'],
    ['0 0 L-2 * *', 'cron expression "0 0 L-2 * *": day-of-month "L" is not a number'],
    ['0 L * * *', 'cron expression "0 L * * *": hour "L" is not a number'],
    [
      '0 0 * * 1#6',
      'cron expression "0 0 * * 1#6": day-of-week "1#6" must be <weekday>#<1-5> or <weekday>#L',
    ],
    [
      '0 0 * * 1#0',
      'cron expression "0 0 * * 1#0": day-of-week "1#0" must be <weekday>#<1-5> or <weekday>#L',
    ],
    [
      '0 0 * * 1-5#2',
      'cron expression "0 0 * * 1-5#2": day-of-week "1-5#2" must be <weekday>#<1-5> or <weekday>#L',
    ],
    // Valid fields that no date satisfies.
    ['0 0 31 2 *', 'cron expression "0 0 31 2 *" never fires: no date matches it'],
    ['0 0 30 2 *', 'cron expression "0 0 30 2 *" never fires: no date matches it'],
    ['0 0 31 4 *', 'cron expression "0 0 31 4 *" never fires: no date matches it'],
  ])('%s', (expression, message) => {
    const err = rejection(expression);
    expect(err.message).toBe(message);
    expect(err.details).toEqual({ field: 'schedule' });
    // checkCronFields alone reports the same field errors (the "never fires" check is parseSchedule's).
    if (!message.includes('never fires')) expect(() => checkCronFields(expression)).toThrow(message);
  });

  it.each([
    ['@every 0s', '@every interval "0s" must be positive'],
    [
      '@every -5m',
      '@every interval "-5m" is not a duration: expected a number and a unit; units are ms, s, m, h and d (lower case), e.g. 90s, 5m, 1h30m, 250ms',
    ],
    ['@every 0.5s', '@every interval 500ms is below the minimum of 1s'],
    ['@every 367d', '@every interval "367d" is longer than a year'],
    [
      '@at not-a-date',
      '@at instant "not-a-date" is not an ISO-8601 instant with an offset, e.g. 2026-12-24T18:00:00Z',
    ],
    ['@at 2026-02-30T00:00:00Z', '@at instant "2026-02-30T00:00:00Z" is not a real date'],
    [
      '@reboot',
      'unknown schedule macro "@reboot"; expected one of @yearly @annually @monthly @weekly @daily @midnight @hourly, @every <duration> or @at <instant>',
    ],
    ['', 'schedule is empty'],
    [' \t ', 'schedule is empty'],
    ['*'.repeat(10_240), 'schedule is longer than 256 characters'],
  ])('%s', (source, message) => {
    expect(rejection(source).message).toBe(message);
  });

  it('rejects an unknown timezone before reading the expression', () => {
    expect(rejection('0 0 * * *', 'Nope/Zone').message).toBe(
      'timezone "Nope/Zone" is not an IANA timezone name',
    );
    expect(rejection('61 * * * *', 'Nope/Zone').message).toBe(
      'timezone "Nope/Zone" is not an IANA timezone name',
    );
  });

  it('rejects a 10 KB cron string without parsing it', () => {
    const long = `0 0 * * ${'1,'.repeat(5_120)}1`;
    expect(long.length).toBeGreaterThan(10_000);
    expect(rejection(long).message).toBe('schedule is longer than 256 characters');
  });

  it('rejects a day-of-week step of 8, naming the field', () => {
    // Day-of-week 0-7 names seven distinct days, so a step is at most 7.
    expect(rejection('0 0 * * */8').message).toBe(
      'cron expression "0 0 * * */8": day-of-week step "8" must be a whole number from 1 to 7',
    );
  });

  // croner searches to the year 3000 by recursion, one call per month tried: for a day no listed
  // month has, that search can exhaust the stack, which parseSchedule reads as "never fires".
  it('rejects "the 31st of April, June, September and November" as never firing', () => {
    expect(rejection('0 0 31 4,6,9,11 *').message).toBe(
      'cron expression "0 0 31 4,6,9,11 *" never fires: no date matches it',
    );
  });
});

describe('valid cron expressions and their next slots (UTC)', () => {
  it.each([
    // [expression, exclusive start, next slots]
    ['0 0 1 JAN *', '2025-12-31T12:00:00Z', ['2026-01-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']],
    ['0 0 1 jan-mar *', '2026-01-01T00:00:00Z', ['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']],
    // 2026-01-02 is a Friday: the next weekday 09:00 is Monday the 5th.
    [
      '0 9 * * MON-FRI',
      '2026-01-02T10:00:00Z',
      ['2026-01-05T09:00:00.000Z', '2026-01-06T09:00:00.000Z', '2026-01-07T09:00:00.000Z'],
    ],
    ['0 0 * * sun', '2026-01-01T00:00:00Z', ['2026-01-04T00:00:00.000Z', '2026-01-11T00:00:00.000Z']],
    ['0 0 * * 7', '2026-01-01T00:00:00Z', ['2026-01-04T00:00:00.000Z', '2026-01-11T00:00:00.000Z']],
    // L: the last day of each month, Feb 28 in 2026.
    [
      '0 0 L * *',
      '2026-01-01T00:00:00Z',
      ['2026-01-31T00:00:00.000Z', '2026-02-28T00:00:00.000Z', '2026-03-31T00:00:00.000Z'],
    ],
    ['0 0 L 2 *', '2027-06-01T00:00:00Z', ['2028-02-29T00:00:00.000Z', '2029-02-28T00:00:00.000Z']],
    // Last Friday: 2026-01-30, 2026-02-27, 2026-03-27.
    [
      '0 0 * * 5L',
      '2026-01-01T00:00:00Z',
      ['2026-01-30T00:00:00.000Z', '2026-02-27T00:00:00.000Z', '2026-03-27T00:00:00.000Z'],
    ],
    [
      '0 0 * * FRI#L',
      '2026-01-01T00:00:00Z',
      ['2026-01-30T00:00:00.000Z', '2026-02-27T00:00:00.000Z', '2026-03-27T00:00:00.000Z'],
    ],
    // Second Monday: 2026-01-12, 2026-02-09.
    ['0 0 * * 1#2', '2026-01-01T00:00:00Z', ['2026-01-12T00:00:00.000Z', '2026-02-09T00:00:00.000Z']],
    // ? is "any": Mondays only (2026-01-01 is a Thursday).
    ['0 0 ? * MON', '2026-01-01T00:00:00Z', ['2026-01-05T00:00:00.000Z', '2026-01-12T00:00:00.000Z']],
    ['0 0 1 * ?', '2026-01-01T00:00:00Z', ['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']],
    // Day-of-month and day-of-week both restricted: either matches (the 13th, or any Friday).
    [
      '0 0 13 * 5',
      '2026-01-01T00:00:00Z',
      ['2026-01-02T00:00:00.000Z', '2026-01-09T00:00:00.000Z', '2026-01-13T00:00:00.000Z'],
    ],
    // Lists, ranges and steps.
    [
      '0,30 9-10 * * *',
      '2026-01-01T09:15:00Z',
      [
        '2026-01-01T09:30:00.000Z',
        '2026-01-01T10:00:00.000Z',
        '2026-01-01T10:30:00.000Z',
        '2026-01-02T09:00:00.000Z',
      ],
    ],
    [
      '5/15 * * * *',
      '2026-01-01T00:00:00Z',
      [
        '2026-01-01T00:05:00.000Z',
        '2026-01-01T00:20:00.000Z',
        '2026-01-01T00:35:00.000Z',
        '2026-01-01T00:50:00.000Z',
        '2026-01-01T01:05:00.000Z',
      ],
    ],
    [
      '10-40/15 * * * *',
      '2026-01-01T00:00:00Z',
      [
        '2026-01-01T00:10:00.000Z',
        '2026-01-01T00:25:00.000Z',
        '2026-01-01T00:40:00.000Z',
        '2026-01-01T01:10:00.000Z',
      ],
    ],
    [
      '0 0 */10 * *',
      '2026-01-01T00:00:00Z',
      [
        '2026-01-11T00:00:00.000Z',
        '2026-01-21T00:00:00.000Z',
        '2026-01-31T00:00:00.000Z',
        '2026-02-01T00:00:00.000Z',
      ],
    ],
    ['0 0 1 2/3 *', '2026-01-01T00:00:00Z', ['2026-02-01T00:00:00.000Z', '2026-05-01T00:00:00.000Z']],
    ['0 0 29 2 *', '2026-01-01T00:00:00Z', ['2028-02-29T00:00:00.000Z', '2032-02-29T00:00:00.000Z']],
    ['*/60 * * * *', '2026-01-01T00:00:00Z', ['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z']],
    // Six fields: seconds first.
    [
      '30 */20 * * * *',
      '2026-01-01T00:00:00Z',
      ['2026-01-01T00:00:30.000Z', '2026-01-01T00:20:30.000Z', '2026-01-01T00:40:30.000Z'],
    ],
    ['0 0 12 * * *', '2026-01-01T00:00:00Z', ['2026-01-01T12:00:00.000Z', '2026-01-02T12:00:00.000Z']],
    // Extra whitespace between fields.
    ['  0   12 *\t* *  ', '2026-01-01T00:00:00Z', ['2026-01-01T12:00:00.000Z']],
    // Macros.
    ['@yearly', '2026-01-01T00:00:00Z', ['2027-01-01T00:00:00.000Z', '2028-01-01T00:00:00.000Z']],
    ['@annually', '2026-01-01T00:00:00Z', ['2027-01-01T00:00:00.000Z']],
    ['@monthly', '2026-01-01T00:00:00Z', ['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']],
    ['@weekly', '2026-01-01T00:00:00Z', ['2026-01-04T00:00:00.000Z', '2026-01-11T00:00:00.000Z']],
    ['@daily', '2026-01-01T00:00:00Z', ['2026-01-02T00:00:00.000Z']],
    ['@midnight', '2026-01-01T00:00:00Z', ['2026-01-02T00:00:00.000Z']],
    ['@hourly', '2026-01-01T00:00:00Z', ['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z']],
    ['@Hourly', '2026-01-01T00:30:00Z', ['2026-01-01T01:00:00.000Z']],
  ])('%s after %s', (expression, from, expected) => {
    expect(slots(expression, from, expected.length)).toEqual(expected);
  });
});

describe('checkCronFields', () => {
  it.each([
    // [expression, pattern handed to croner, fixedHour]
    ['30 2 * * *', '30 2 * * *', true],
    ['0 0 * * *', '0 0 * * *', true],
    ['0 1-3 * * *', '0 1-3 * * *', true],
    ['0 1,13 * * *', '0 1,13 * * *', true],
    ['0 * * * *', '0 * * * *', false],
    ['*/15 * * * *', '*/15 * * * *', false],
    ['0 */2 * * *', '0 */2 * * *', false],
    ['0 1/2 * * *', '0 1/2 * * *', false],
    ['0 ? * * *', '0 * * * *', false],
    // Six fields: the hour is the third.
    ['0 0 2 * * *', '0 0 2 * * *', true],
    ['0 2 * * * *', '0 2 * * * *', false],
    // Rewrites for croner: ? → *, a day-of-week nL → n#L.
    ['0 0 ? * MON', '0 0 * * MON', true],
    ['0 0 ?/5 * *', '0 0 */5 * *', true],
    ['0 0 * * 5L', '0 0 * * 5#L', true],
    ['0 0 * * FRIL', '0 0 * * FRI#L', true],
    ['0 0 * * 1,5L', '0 0 * * 1,5#L', true],
    ['0 0 * * FRI#L', '0 0 * * FRI#L', true],
    ['  0  0  L  *  * ', '0 0 L * *', true],
  ])('%s → %s (fixed hour: %s)', (expression, pattern, fixedHour) => {
    expect(checkCronFields(expression)).toEqual({ pattern, fixedHour });
  });
});
