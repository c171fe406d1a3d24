/** `decideRetry`: one decision, retry or dead letter, for a failed attempt and for a reaped one. */
import { describe, expect, it } from 'vitest';
import { decideRetry, type RetryInput, retryDelayMs, seededRandom, sortKey } from '../../src/core/index.js';

const NOW = Date.UTC(2026, 0, 1);
const AGING = 60_000;

function input(overrides: Partial<RetryInput> = {}): RetryInput {
  return {
    attempt: 1,
    maxAttempts: 3,
    backoff: { baseSeconds: 2, capSeconds: 3600 },
    priority: 0,
    now: NOW,
    agingStepMs: AGING,
    random: () => 0,
    ...overrides,
  };
}

/** A `Random` that counts its draws. */
function counting(value: number): { random: () => number; draws: () => number } {
  let n = 0;
  return {
    random: () => {
      n += 1;
      return value;
    },
    draws: () => n,
  };
}

describe('decideRetry', () => {
  it('dead letters the last attempt, and draws nothing', () => {
    const r = counting(0.5);
    expect(decideRetry(input({ attempt: 3, maxAttempts: 3, random: r.random }))).toEqual({ state: 'dead' });
    expect(decideRetry(input({ attempt: 4, maxAttempts: 3, random: r.random }))).toEqual({ state: 'dead' });
    expect(r.draws()).toBe(0);
  });

  it('dead letters a permanent failure with attempts left', () => {
    expect(decideRetry(input({ attempt: 1, maxAttempts: 5, permanent: true }))).toEqual({ state: 'dead' });
  });

  it('retries after the backoff base^attempt, shortened by up to half at random', () => {
    // random 0: the whole nominal delay; random → 1: half of it.
    expect(decideRetry(input({ attempt: 3, random: () => 0, maxAttempts: 5 }))).toEqual({
      state: 'pending',
      availableAt: NOW + 8000,
      sortKey: NOW + 8000,
    });
    expect(decideRetry(input({ attempt: 3, random: () => 0.5, maxAttempts: 5 }))).toMatchObject({
      availableAt: NOW + 6000,
    });
  });

  it('caps the backoff', () => {
    const d = decideRetry(
      input({ attempt: 10, maxAttempts: 20, backoff: { baseSeconds: 2, capSeconds: 30 } }),
    );
    expect(d).toMatchObject({ state: 'pending', availableAt: NOW + 30_000 });
  });

  it('is retryDelayMs with jitter 0.5, drawing once, and the same draws give the same answer', () => {
    const a = decideRetry(input({ attempt: 2, random: seededRandom(7) }));
    const expected =
      NOW + retryDelayMs(2, { baseSeconds: 2, capSeconds: 3600, jitter: 0.5 }, seededRandom(7));
    expect(a).toEqual({ state: 'pending', availableAt: expected, sortKey: expected });
    const r = counting(0.25);
    decideRetry(input({ attempt: 2, random: r.random }));
    expect(r.draws()).toBe(1);
  });

  it("takes the handler's retry-after instead of the backoff, drawing nothing", () => {
    const r = counting(0.9);
    expect(decideRetry(input({ retryAfterMs: 1234, random: r.random }))).toEqual({
      state: 'pending',
      availableAt: NOW + 1234,
      sortKey: NOW + 1234,
    });
    expect(decideRetry(input({ retryAfterMs: 0 }))).toMatchObject({ availableAt: NOW });
    expect(r.draws()).toBe(0);
  });

  it('queues the retry at its priority: sort key = available at − priority × ageing step', () => {
    const d = decideRetry(input({ priority: 7, retryAfterMs: 5000 }));
    expect(d).toEqual({ state: 'pending', availableAt: NOW + 5000, sortKey: sortKey(NOW + 5000, 7, AGING) });
    expect(d).toMatchObject({ sortKey: NOW + 5000 - 7 * AGING });
  });

  it('a reaped attempt (no permanent, no retry-after) decides as a plain failure does', () => {
    for (const attempt of [1, 2, 3]) {
      const failed = decideRetry(input({ attempt, permanent: false, random: seededRandom(attempt) }));
      const reaped = decideRetry(input({ attempt, random: seededRandom(attempt) }));
      expect(reaped).toEqual(failed);
    }
  });
});
