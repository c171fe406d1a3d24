import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../src/core/duration.js';
import { ValidationError } from '../../src/core/errors.js';

const DAY = 86_400_000;

function parseError(text: string, what?: string): ValidationError {
  try {
    parseDuration(text, what);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error(`parseDuration(${JSON.stringify(text)}) did not throw`);
}

describe('parseDuration', () => {
  it.each([
    ['90s', 90_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['250ms', 250],
    ['2d', 172_800_000],
    ['1.5s', 1_500],
    ['1s500ms', 1_500],
    ['1d2h3m4s5ms', DAY + 2 * 3_600_000 + 3 * 60_000 + 4_000 + 5],
    ['0.5d', 43_200_000],
    ['1.5h', 5_400_000],
    ['1ms', 1],
    [' 5m ', 300_000],
    ['366d', 366 * DAY],
  ])('parses %j as %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    ['', /empty/],
    ['   ', /empty/],
    ['0s', /must be positive/],
    ['0ms', /must be positive/],
    ['-5s', /^duration "-5s" is not a duration: expected a number and a unit; units are ms, s, m, h and d/],
    ['abc', /not a duration: expected a number and a unit; units are ms, s, m, h and d/],
    ['5x', /^duration "5x" has an unknown unit "x"; units are ms, s, m, h and d/],
    ['5', /^duration "5" has no unit after 5; units are ms, s, m, h and d \(lower case\), e\.g\. 90s/],
    ['1h30', /^duration "1h30" has no unit after 30; units are/],
    ['s', /not a duration: expected a number and a unit/],
    ['5M', /unknown unit "M"; units are ms, s, m, h and d \(lower case\)/],
    ['1h 30m', /not a duration at " 30m" \(write it without spaces or signs\); units are/],
    ['.5s', /not a duration/],
    ['30m1h', /repeats or reorders/],
    ['1m1m', /repeats or reorders/],
    ['1s1m', /repeats or reorders/],
    ['0.5ms', /whole number of milliseconds/],
    ['367d', /longer than a year/],
    ['366d1ms', /longer than a year/],
    ['9000h', /longer than a year/],
  ])('rejects %j', (text, message) => {
    const err = parseError(text);
    expect(err.code).toBe('validation_error');
    expect(err.message).toMatch(message);
  });

  it('takes zero (0s, 0ms, a bare 0) only where a setting allows it', () => {
    for (const zero of ['0s', '0ms', '0', '0m0s', ' 0 '])
      expect(parseDuration(zero, 'jitter', { allowZero: true })).toBe(0);
    expect(parseDuration('90s', 'jitter', { allowZero: true })).toBe(90_000);
    expect(() => parseDuration('-1s', 'jitter', { allowZero: true })).toThrow(/not a duration/);
    expect(() => parseDuration('0', 'lease')).toThrow(/has no unit after 0/);
  });

  it('names what was being parsed in the message', () => {
    expect(parseError('abc', 'lease').message).toMatch(/^lease "abc"/);
    expect(parseError('', 'lease').message).toMatch(/^lease is empty/);
    expect(parseError('0s').message).toMatch(/^duration "0s"/);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [1, '1ms'],
    [1_500, '1s500ms'],
    [90_000, '1m30s'],
    [5_400_000, '1h30m'],
    [172_800_000, '2d'],
    [DAY + 1, '1d1ms'],
    [DAY + 2 * 3_600_000 + 3 * 60_000 + 4_000 + 5, '1d2h3m4s5ms'],
  ])('formats %i ms as %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('is the canonical form of what parseDuration reads', () => {
    expect(formatDuration(parseDuration('90s'))).toBe('1m30s');
    expect(formatDuration(parseDuration('1.5s'))).toBe('1s500ms');
    expect(formatDuration(parseDuration('0.5d'))).toBe('12h');
    expect(formatDuration(parseDuration('1h30m'))).toBe('1h30m');
  });

  it('round trips every whole duration up to the one-year limit', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 366 * DAY }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
      { numRuns: 500 },
    );
  });

  it('round trips durations made of whole units', () => {
    const unit = (max: number, size: number) => fc.integer({ min: 0, max }).map((n) => n * size);
    fc.assert(
      fc.property(
        unit(365, DAY),
        unit(23, 3_600_000),
        unit(59, 60_000),
        unit(59, 1_000),
        unit(999, 1),
        (...parts) => {
          const ms = parts.reduce((a, b) => a + b, 0);
          fc.pre(ms > 0);
          expect(parseDuration(formatDuration(ms))).toBe(ms);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('parseDuration with decimals', () => {
  it('accepts decimal values whose binary product is off by a rounding error', () => {
    expect(parseDuration('1.001s')).toBe(1001);
    expect(parseDuration('0.27m')).toBe(16200);
    expect(parseDuration('1.07m')).toBe(64200);
  });

  it('every millisecond count written as decimal seconds parses exactly', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 99_999 }), (ms) => {
        const text = `${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, '0')}s`;
        expect(parseDuration(text)).toBe(ms);
      }),
    );
  });
});
