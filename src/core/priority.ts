/**
 * Priority with ageing, as a static key. The effective priority of a waiting run is
 * `priority + waited / agingStep`; ordering by it (descending) equals ordering by
 * `sortKey = availableAt − priority × agingStep` (ascending), which does not depend on `now`, so it
 * is stored and indexed. Runs that became available within `agingStep` of each other keep strict
 * priority order; a low-priority run that waited long enough overtakes newer high-priority ones.
 */

export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 100;

/** The stored `sort_key` (epoch ms) of a run available at `availableAtMs`. */
export function sortKey(availableAtMs: number, priority: number, agingStepMs: number): number {
  return availableAtMs - priority * agingStepMs;
}
