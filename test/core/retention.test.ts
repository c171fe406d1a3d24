/**
 * Retention settings (core/retention.ts): what a value may be, its canonical form, which value is
 * in force for a run (the job's, the tenant's, the default), and the shortest one that bounds the
 * pruner's scan; a job's `retention` field is checked the same way.
 */
import { describe, expect, test } from 'vitest';
import {
  checkRetention,
  DEFAULT_RETENTION,
  effectiveRetention,
  shortestRetentionMs,
  ValidationError,
  validateJob,
} from '../../src/core/index.js';

describe('checkRetention', () => {
  test('takes durations and forever, canonical, in the states order', () => {
    expect(checkRetention({ skipped: '1d', succeeded: '168h', dead: 'forever' })).toEqual({
      succeeded: '7d',
      dead: 'forever',
      skipped: '1d',
    });
    expect(Object.keys(checkRetention({ skipped: '1d', succeeded: '2d' }))).toEqual(['succeeded', 'skipped']);
    expect(checkRetention({})).toEqual({});
  });

  test.each([
    [null, 'must be an object'],
    [['7d'], 'must be an object'],
    [{ pending: '1d' }, 'has no state "pending"'],
    [{ running: '1d' }, 'has no state "running"'],
    [{ succeeded: 7 }, 'retention.succeeded must be a duration'],
    [{ succeeded: '7 days' }, 'retention.succeeded'],
    [{ succeeded: '500ms' }, 'shorter than a second'],
    [{ succeeded: '367d' }, 'longer than a year'],
    [{ succeeded: 'Forever' }, 'retention.succeeded'],
    [{ succeeded: '1d\u0000' }, 'retention.succeeded'],
  ])('refuses %j', (value, message) => {
    expect(() => checkRetention(value)).toThrow(ValidationError);
    expect(() => checkRetention(value)).toThrow(message);
  });
});

describe('the retention in force', () => {
  test("the job's value, else the tenant's, else the default", () => {
    expect(effectiveRetention(null)).toEqual(DEFAULT_RETENTION);
    expect(effectiveRetention({ succeeded: '1d', dead: 'forever' }, { succeeded: '1h' })).toEqual({
      ...DEFAULT_RETENTION,
      succeeded: '1h',
      dead: 'forever',
    });
  });

  test('the shortest bounds the scan; forever everywhere is none', () => {
    expect(shortestRetentionMs(null, null)).toBe(7 * 86_400_000);
    expect(shortestRetentionMs({ succeeded: '2h' }, null)).toBe(2 * 3_600_000);
    expect(shortestRetentionMs({ succeeded: '2h' }, 60_000)).toBe(60_000);
    const forever = { succeeded: 'forever', dead: 'forever', cancelled: 'forever', skipped: 'forever' };
    expect(shortestRetentionMs(forever, null)).toBeNull();
    expect(shortestRetentionMs(forever, 5000)).toBe(5000);
  });
});

describe("a job's retention field", () => {
  const base = { jobId: 'j', schedule: '@every 1m', handler: 'h' };

  test('defaults to null and is stored canonical', () => {
    expect(validateJob(base).spec.retention).toBeNull();
    expect(validateJob({ ...base, retention: { dead: '720h' } }).spec.retention).toEqual({ dead: '30d' });
  });

  test('is refused when it names no finished state, with the field named', () => {
    expect(() => validateJob({ ...base, retention: { queued: '1d' } })).toThrow(
      /retention has no state "queued"/,
    );
  });
});
