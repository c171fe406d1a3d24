import { describe, expect, it } from 'vitest';
import { PaceMeter } from '../../src/worker/pace.js';

const T0 = Date.UTC(2026, 0, 1);

describe('PaceMeter', () => {
  it('answers 0 with no starts counted', () => {
    expect(new PaceMeter().perSecond(T0)).toBe(0);
  });

  it('answers the starts of the last second (ten buckets of 100 ms) per second', () => {
    const pace = new PaceMeter();
    pace.count(T0, 30);
    pace.count(T0 + 450, 20);
    pace.count(T0 + 999);
    expect(pace.perSecond(T0 + 999)).toBe(51);
    // The bucket of T0 leaves the window a second after it began.
    expect(pace.perSecond(T0 + 1000)).toBe(21);
    expect(pace.perSecond(T0 + 1499)).toBe(1);
    expect(pace.perSecond(T0 + 2000)).toBe(0);
  });

  it('reuses a bucket a second later without counting its old starts', () => {
    const pace = new PaceMeter();
    pace.count(T0, 7);
    pace.count(T0 + 1050, 2);
    expect(pace.perSecond(T0 + 1050)).toBe(2);
    // Long idle: every bucket is stale.
    pace.count(T0 + 60_000, 3);
    expect(pace.perSecond(T0 + 60_000)).toBe(3);
  });

  it('counts nothing for 0 starts', () => {
    const pace = new PaceMeter();
    pace.count(T0, 0);
    expect(pace.perSecond(T0)).toBe(0);
  });
});
