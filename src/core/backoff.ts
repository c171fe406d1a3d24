/**
 * Retry backoff: attempt `n` failed, so the next one waits `min(cap, base^n)` seconds, shortened by
 * up to `jitter` of itself at random so that runs failing together do not retry together.
 */

/** A source of uniform numbers in [0, 1); injectable so tests and the demo are reproducible. */
export type Random = () => number;

export interface BackoffPolicy {
  /** Base of the exponent, in seconds (default 2): attempt 1 waits about 2 s, attempt 2 about 4 s. */
  baseSeconds: number;
  /** Longest wait, in seconds (default 3600). */
  capSeconds: number;
  /** Fraction of the delay that is random, 0–1 (default 0.5: the wait is between 50% and 100%). */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseSeconds: 2, capSeconds: 3600, jitter: 0.5 };

/** Milliseconds to wait before the attempt after `failedAttempt` (1-based). */
export function retryDelayMs(failedAttempt: number, policy: BackoffPolicy, random: Random): number {
  const nominal = Math.min(policy.capSeconds, policy.baseSeconds ** failedAttempt) * 1000;
  const u = Math.min(Math.max(random(), 0), 1);
  return Math.round(nominal * (1 - policy.jitter * u));
}

/** A deterministic `Random` (mulberry32) for tests, the demo and reproducible runs. */
export function seededRandom(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
