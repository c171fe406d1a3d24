import { describe, expect, it } from 'vitest';
import { LeaseLostError, ValidationError } from '../../src/core/index.js';
import { isDataError } from '../../src/worker/completer.js';

describe('isDataError', () => {
  it('is true for what the store refuses as data', () => {
    for (const code of ['22021', '22P05', '22P02', '22003', '54000']) {
      expect(isDataError(Object.assign(new Error('refused'), { code })), code).toBe(true);
    }
    expect(isDataError(new ValidationError('bad'))).toBe(true);
    expect(
      isDataError(Object.assign(new Error('bad request'), { status: 400, code: 'validation_error' })),
    ).toBe(true);
    expect(isDataError(Object.assign(new Error('too large'), { status: 413 }))).toBe(true);
  });

  it('is false for an outage or anything else', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', '57P01', '08006', '53300', '40001', '23505']) {
      expect(isDataError(Object.assign(new Error('down'), { code })), code).toBe(false);
    }
    expect(isDataError(new LeaseLostError('gone'))).toBe(false);
    expect(isDataError(Object.assign(new Error('unavailable'), { status: 503 }))).toBe(false);
    expect(isDataError(Object.assign(new Error('internal'), { status: 500 }))).toBe(false);
    expect(isDataError(new Error('timeout'))).toBe(false);
    expect(isDataError('string')).toBe(false);
    expect(isDataError(null)).toBe(false);
  });
});
