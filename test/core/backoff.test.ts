import { describe, expect, it } from 'vitest';
import { type BackoffPolicy, DEFAULT_BACKOFF, retryDelayMs, seededRandom } from '../../src/core/backoff.js';

const zero = () => 0;
const almostOne = () => 1 - 2 ** -40;

describe('retryDelayMs', () => {
  it('with random() = 0 waits the nominal min(cap, base^attempt) seconds', () => {
    expect(retryDelayMs(1, DEFAULT_BACKOFF, zero)).toBe(2_000);
    expect(retryDelayMs(2, DEFAULT_BACKOFF, zero)).toBe(4_000);
    expect(retryDelayMs(3, DEFAULT_BACKOFF, zero)).toBe(8_000);
    expect(retryDelayMs(10, DEFAULT_BACKOFF, zero)).toBe(1_024_000);
    expect(retryDelayMs(2, { baseSeconds: 1.5, capSeconds: 3600, jitter: 0.5 }, zero)).toBe(2_250);
  });

  it('with random() close to 1 and jitter 0.5 waits half the nominal delay', () => {
    expect(retryDelayMs(1, DEFAULT_BACKOFF, almostOne)).toBe(1_000);
    expect(retryDelayMs(3, DEFAULT_BACKOFF, almostOne)).toBe(4_000);
    expect(retryDelayMs(10, DEFAULT_BACKOFF, almostOne)).toBe(512_000);
  });

  it('scales linearly with the random draw inside the jitter band', () => {
    expect(retryDelayMs(3, DEFAULT_BACKOFF, () => 0.5)).toBe(6_000);
    expect(retryDelayMs(3, DEFAULT_BACKOFF, () => 0.25)).toBe(7_000);
    expect(retryDelayMs(3, { ...DEFAULT_BACKOFF, jitter: 1 }, () => 0.75)).toBe(2_000);
  });

  it('ignores the random draw when jitter is 0', () => {
    const noJitter: BackoffPolicy = { ...DEFAULT_BACKOFF, jitter: 0 };
    expect(retryDelayMs(3, noJitter, almostOne)).toBe(8_000);
    expect(retryDelayMs(3, noJitter, () => 0.5)).toBe(8_000);
  });

  it('never waits longer than the cap', () => {
    expect(retryDelayMs(11, DEFAULT_BACKOFF, zero)).toBe(2_048_000);
    expect(retryDelayMs(12, DEFAULT_BACKOFF, zero)).toBe(3_600_000); // 4096 s capped at 3600 s
    expect(retryDelayMs(12, DEFAULT_BACKOFF, almostOne)).toBe(1_800_000);
    expect(retryDelayMs(5_000, DEFAULT_BACKOFF, zero)).toBe(3_600_000); // base^n overflows to Infinity
    expect(retryDelayMs(4, { baseSeconds: 3, capSeconds: 60, jitter: 0.5 }, zero)).toBe(60_000);
    expect(retryDelayMs(3, { baseSeconds: 3, capSeconds: 60, jitter: 0.5 }, zero)).toBe(27_000);
  });

  it('clamps a random source that strays outside [0, 1]', () => {
    expect(retryDelayMs(3, DEFAULT_BACKOFF, () => -3)).toBe(8_000);
    expect(retryDelayMs(3, DEFAULT_BACKOFF, () => 7)).toBe(4_000);
  });

  it('always lies between (1 - jitter) and 1 times the nominal delay', () => {
    const random = seededRandom(42);
    for (let attempt = 1; attempt <= 15; attempt++) {
      const nominal = Math.min(3600, 2 ** attempt) * 1000;
      for (let i = 0; i < 50; i++) {
        const d = retryDelayMs(attempt, DEFAULT_BACKOFF, random);
        expect(d).toBeGreaterThanOrEqual(nominal / 2);
        expect(d).toBeLessThanOrEqual(nominal);
      }
    }
  });
});

describe('seededRandom', () => {
  const take = (random: () => number, n: number) => Array.from({ length: n }, () => random());

  it('is deterministic for the same seed', () => {
    expect(take(seededRandom(12345), 200)).toEqual(take(seededRandom(12345), 200));
    expect(take(seededRandom(0), 20)).toEqual(take(seededRandom(0), 20));
  });

  it('differs between seeds and moves on each call', () => {
    const a = take(seededRandom(1), 20);
    const b = take(seededRandom(2), 20);
    expect(a).not.toEqual(b);
    expect(new Set(a).size).toBe(20);
  });

  it('reads the seed as an unsigned 32-bit integer', () => {
    expect(take(seededRandom(-1), 10)).toEqual(take(seededRandom(0xffff_ffff), 10));
    expect(take(seededRandom(2 ** 32 + 7), 10)).toEqual(take(seededRandom(7), 10));
  });

  it('stays in [0, 1) and is roughly uniform', () => {
    const values = take(seededRandom(7), 20_000);
    expect(Math.min(...values)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...values)).toBeLessThan(1);
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    expect(mean).toBeGreaterThan(0.49);
    expect(mean).toBeLessThan(0.51);
    const buckets = new Array<number>(10).fill(0);
    for (const v of values) buckets[Math.floor(v * 10)]! += 1;
    for (const count of buckets) {
      expect(count).toBeGreaterThan(1_800);
      expect(count).toBeLessThan(2_200);
    }
  });
});
