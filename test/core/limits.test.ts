/** The pure part of backlog control: limit definitions and keys, token arithmetic, what holds a run. */
import { describe, expect, it } from 'vitest';
import {
  describeWaits,
  type GateState,
  msUntilToken,
  tokensAfter,
  validateLimit,
  validateLimitKey,
} from '../../src/core/index.js';
import { refusal } from '../setup/refusal.js';

describe('validateLimit', () => {
  it('takes a rate with a burst, a concurrency cap, or both; nulls for what is unset', () => {
    expect(validateLimit({ rate: 50, burst: 50 })).toEqual({ rate: 50, burst: 50, maxConcurrency: null });
    expect(validateLimit({ maxConcurrency: 3 })).toEqual({ rate: null, burst: null, maxConcurrency: 3 });
    expect(validateLimit({ rate: 0.5, burst: 1, maxConcurrency: 1 })).toEqual({
      rate: 0.5,
      burst: 1,
      maxConcurrency: 1,
    });
  });

  it.each([
    [{ rate: -1, burst: 5 }, 'rate'],
    [{ rate: 0, burst: 5 }, 'rate'],
    [{ rate: Number.NaN, burst: 5 }, 'rate'],
    [{ rate: 5, burst: 0 }, 'burst'],
    [{ rate: 5, burst: 1.5 }, 'burst'],
    [{ rate: 5 }, 'burst'],
    [{ burst: 5 }, 'rate'],
    [{ maxConcurrency: 0 }, 'max_concurrency'],
    [{ maxConcurrency: 100_001 }, 'max_concurrency'],
    [{}, 'rate'],
    [{ rate: 1, burst: 1, ceiling: 3 }, 'ceiling'],
  ])('refuses %j, naming %s', (input, field) => {
    expect(refusal(() => validateLimit(input as never)).details.field).toBe(field);
  });
});

describe('validateLimitKey', () => {
  it("takes an id, and the tenant's own key; refuses job keys and other tenants' keys", () => {
    expect(validateLimitKey('payments-api', 'acme')).toBe('payments-api');
    expect(validateLimitKey('tenant:acme', 'acme')).toBe('tenant:acme');
    expect(refusal(() => validateLimitKey('tenant:globex', 'acme')).details.field).toBe('key');
    expect(refusal(() => validateLimitKey('job:nightly', 'acme')).details.field).toBe('key');
    expect(refusal(() => validateLimitKey('a b', 'acme')).details.field).toBe('key');
    expect(refusal(() => validateLimitKey('..', 'acme')).details.field).toBe('key');
  });
});

describe('tokens', () => {
  it('refill at the rate up to the burst, and never run backwards', () => {
    const l = { rate: 50, burst: 50, tokens: 0.5 };
    expect(tokensAfter(l, 10)).toBeCloseTo(1);
    expect(tokensAfter(l, 60_000)).toBe(50);
    expect(tokensAfter(l, -5_000)).toBe(0.5);
    expect(msUntilToken({ rate: 50, tokens: 0.5 })).toBe(10);
    expect(msUntilToken({ rate: 2, tokens: 1 })).toBe(0);
  });
});

describe('describeWaits', () => {
  const gate = (g: Partial<GateState>): GateState => ({
    key: 'k',
    rate: null,
    maxConcurrency: null,
    inUse: 0,
    overlap: null,
    tokens: null,
    holder: null,
    ...g,
  });
  const now = Date.UTC(2026, 0, 1);

  it('names each gate without room, and only those', () => {
    expect(
      describeWaits(
        [
          gate({ key: 'payments-api', rate: 50, tokens: 0.5 }),
          gate({ key: 'db', maxConcurrency: 4, inUse: 4 }),
          gate({ key: 'tenant:acme', rate: 10, tokens: 3 }),
          gate({ key: 'job:nightly', maxConcurrency: 1, inUse: 1, overlap: 'queue', holder: 'r-1' }),
          gate({ key: 'job:sync', maxConcurrency: 2, inUse: 2 }),
        ],
        now,
      ),
    ).toEqual([
      'limit payments-api: no token before 2026-01-01T00:00:00.010Z',
      'limit db: max_concurrency 4 in use',
      'overlap: run r-1 still running',
      'max_concurrency 2',
    ]);
    expect(describeWaits([gate({ key: 'db', maxConcurrency: 4, inUse: 3 })], now)).toEqual([]);
  });
});
