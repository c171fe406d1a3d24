import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../../src/api/plugins/errors.js';

const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it('knows a database that cannot be reached or is going away', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND'])
      expect([code, isDatabaseUnavailable(coded(code))]).toEqual([code, true]);
    // SQLSTATE: connection exceptions, admin/crash shutdown, cannot connect now, too many connections.
    for (const code of ['08000', '08006', '08P01', '57P01', '57P02', '57P03', '53300'])
      expect([code, isDatabaseUnavailable(coded(code))]).toEqual([code, true]);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isDatabaseUnavailable(new AggregateError([coded('ECONNREFUSED')], 'connect'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('wrapped', { cause: coded('57P01') }))).toBe(true);
  });

  it('leaves other errors alone (they stay 500)', () => {
    for (const code of ['23505', '42P01', '40001', '57014', 'ERR_SOMETHING'])
      expect([code, isDatabaseUnavailable(coded(code))]).toEqual([code, false]);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(null)).toBe(false);
    expect(isDatabaseUnavailable('ECONNREFUSED')).toBe(false);
  });
});
