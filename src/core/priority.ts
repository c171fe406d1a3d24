/**
 * Priority with ageing, as a static key. The effective priority of a waiting run is
 * `priority + waited / agingStep`; ordering by it (descending) equals ordering by
 * `sortKey = availableAt − priority × agingStep` (ascending), which does not depend on `now`, so it
 * is stored and indexed. Runs that became available within `agingStep` of each other keep strict
 * priority order; a low-priority run that waited long enough overtakes newer high-priority ones.
 *
 * The bound it gives (docs/architecture.md, "Priority ageing"): a run of priority p available at t
 * has a smaller key than every run of priority q available after `t + (q − p) × agingStep`, so none
 * of those is claimed before it. Every node that writes keys must use the same step: keys written
 * with different steps are compared as if they were on one scale.
 */
import { ValidationError } from './errors.js';

export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 100;

/** The ageing step when none is given: one priority point per minute of waiting, ms. */
export const DEFAULT_AGING_STEP_MS = 60_000;
/**
 * The shortest step, ms. Below a second one priority point is worth less than the clock
 * disagreement the scheduler tolerates between nodes (`--max-clock-uncertainty`, 500 ms) and the
 * spread of a tick: priority would be noise, and the whole 0–100 range under two minutes of FIFO.
 */
export const MIN_AGING_STEP_MS = 1000;
/**
 * The longest step, ms. At a day per point a priority-0 run may wait 100 days behind a stream of
 * priority-100 runs: longer steps are no longer ageing but a promise of starvation, and would push
 * keys further from `available_at` than any schedule reaches.
 */
export const MAX_AGING_STEP_MS = 86_400_000;

/**
 * `ms` if it is a whole number of milliseconds from `MIN_AGING_STEP_MS` (1 s) to
 * `MAX_AGING_STEP_MS` (1 day); otherwise a `ValidationError` naming `field`.
 */
export function checkAgingStep(ms: number, field = 'agingStepMs'): number {
  if (!Number.isInteger(ms) || ms < MIN_AGING_STEP_MS || ms > MAX_AGING_STEP_MS)
    throw new ValidationError(`${field} must be from 1s to 1d (whole milliseconds); got ${ms}`, { field });
  return ms;
}

/** The stored `sort_key` (epoch ms) of a run available at `availableAtMs`. */
export function sortKey(availableAtMs: number, priority: number, agingStepMs: number): number {
  return availableAtMs - priority * agingStepMs;
}
