/**
 * What becomes of a run whose attempt ended without success (the handler failed, or its lease ran
 * out): another attempt after a backoff, or the dead letter. One decision for both ways an attempt
 * can end so (`failRun` and the reaper), so they cannot drift apart. Pure: `now` and `random` are
 * inputs.
 */
import { type Random, retryDelayMs } from './backoff.js';
import { sortKey } from './priority.js';

/** The share of a backoff delay that is random (see `BackoffPolicy.jitter`). */
export const RETRY_JITTER = 0.5;

export interface RetryInput {
  /** The attempt that just ended, from 1. */
  attempt: number;
  maxAttempts: number;
  /** The handler asked to dead-letter at once (`PermanentError`). Default false. */
  permanent?: boolean;
  /** The handler's own wait before the next attempt, ms; replaces the backoff. Default: the backoff. */
  retryAfterMs?: number;
  /** The run's backoff: `min(cap, base^attempt)` seconds, less up to `RETRY_JITTER` of it at random. */
  backoff: { baseSeconds: number; capSeconds: number };
  /** The run's priority, for its `sort_key` in the queue. */
  priority: number;
  now: number;
  agingStepMs: number;
  /** Drawn once, only when a backoff is computed. */
  random: Random;
}

export type RetryDecision =
  | { state: 'dead' }
  /** Claimable again at `availableAt` (epoch ms), queued at `sortKey`. */
  | { state: 'pending'; availableAt: number; sortKey: number };

/** Dead when permanent or out of attempts; otherwise pending again after the delay. */
export function decideRetry(input: RetryInput): RetryDecision {
  if (input.permanent === true || input.attempt >= input.maxAttempts) return { state: 'dead' };
  const delay =
    input.retryAfterMs ??
    retryDelayMs(input.attempt, { ...input.backoff, jitter: RETRY_JITTER }, input.random);
  const availableAt = input.now + delay;
  return { state: 'pending', availableAt, sortKey: sortKey(availableAt, input.priority, input.agingStepMs) };
}
