import { describe, expect, it } from 'vitest';
import {
  AUTO_PREFETCH_CLAIMS,
  AUTO_PREFETCH_HORIZON_MS,
  autoPrefetch,
  MAX_CLAIM_RUNS,
  MAX_HTTP_CLAIM_RUNS,
} from '../../src/core/index.js';

describe('autoPrefetch', () => {
  it('holds the starts of the horizon at the current pace (100 ms of work), rounded down', () => {
    expect(AUTO_PREFETCH_HORIZON_MS).toBe(100);
    expect(autoPrefetch({ startsPerSecond: 7000, concurrency: 10 })).toBe(700);
    expect(autoPrefetch({ startsPerSecond: 2, concurrency: 2 })).toBe(0);
    expect(autoPrefetch({ startsPerSecond: 19.9, concurrency: 10 })).toBe(1);
    expect(autoPrefetch({ startsPerSecond: 100, concurrency: 10, horizonMs: 500 })).toBe(50);
  });

  it('holds nothing without a pace: an idle or new worker claims its free slots only', () => {
    expect(autoPrefetch({ startsPerSecond: 0, concurrency: 10 })).toBe(0);
    expect(autoPrefetch({ startsPerSecond: -5, concurrency: 10 })).toBe(0);
    expect(autoPrefetch({ startsPerSecond: 9.99, concurrency: 10 })).toBe(0);
  });

  it('holds nothing for a pace that is not a finite number', () => {
    expect(autoPrefetch({ startsPerSecond: Number.NaN, concurrency: 10 })).toBe(0);
    expect(autoPrefetch({ startsPerSecond: Number.POSITIVE_INFINITY, concurrency: 10 })).toBe(0);
  });

  it('keeps concurrency and held runs within two full claims: 2000 runs on the database', () => {
    expect(AUTO_PREFETCH_CLAIMS * MAX_CLAIM_RUNS).toBe(2000);
    expect(autoPrefetch({ startsPerSecond: 1e9, concurrency: 10 })).toBe(1990);
    expect(autoPrefetch({ startsPerSecond: 20_000, concurrency: 100 })).toBe(1900);
    expect(autoPrefetch({ startsPerSecond: 50_000, concurrency: 400 })).toBe(1600);
    expect(autoPrefetch({ startsPerSecond: 1e6, concurrency: 1000 })).toBe(1000);
    // Below the bound, the pace decides alone.
    expect(autoPrefetch({ startsPerSecond: 15_000, concurrency: 100 })).toBe(1500);
  });

  it('over HTTP (claims of at most 500), within 1000 runs', () => {
    expect(autoPrefetch({ startsPerSecond: 1e9, concurrency: 10, claimRuns: MAX_HTTP_CLAIM_RUNS })).toBe(990);
    expect(autoPrefetch({ startsPerSecond: 20_000, concurrency: 100, claimRuns: 500 })).toBe(900);
    expect(autoPrefetch({ startsPerSecond: 1e6, concurrency: 1000, claimRuns: 500 })).toBe(0);
  });
});
