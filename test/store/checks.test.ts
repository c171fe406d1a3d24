/**
 * The store's checks of instants (`checkInstant`, `startedMsOf`): the years 1970-9999, which
 * PostgreSQL's timestamptz holds, to the millisecond at both ends; anything else is a
 * `ValidationError` naming the field, before any statement.
 */
import { expect, test } from 'vitest';
import { ValidationError } from '../../src/core/index.js';
import { checkInstant, startedMsOf } from '../../src/store/checks.js';

const LAST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

test('an instant from 1970 through 9999 is taken, to the millisecond at both ends', () => {
  expect(checkInstant(0, 'now').toISOString()).toBe('1970-01-01T00:00:00.000Z');
  expect(checkInstant(LAST_MS, 'now').toISOString()).toBe('9999-12-31T23:59:59.999Z');
  expect(startedMsOf(0)).toBe(0);
  expect(startedMsOf(LAST_MS)).toBe(LAST_MS);
  expect(startedMsOf(null)).toBeNull();
  expect(startedMsOf(undefined)).toBeNull();
});

test('an instant outside 1970-9999, or not finite, is refused naming the field', () => {
  for (const ms of [-1, LAST_MS + 1, -8.64e15, 8.64e15, 9e15]) {
    expect(() => checkInstant(ms, 'now')).toThrow(/now is outside the years 1970-9999/);
    expect(() => startedMsOf(ms)).toThrow(ValidationError);
  }
  for (const ms of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
    expect(() => checkInstant(ms, 'now')).toThrow(/now must be a finite instant/);
  }
  try {
    startedMsOf(-1);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).details).toEqual({ field: 'started_at' });
  }
  expect.assertions(15);
});
