/**
 * Scheduling delay read back from run history: the window a delay series covers (`delayWindow`,
 * what `GET /v1/delay` accepts) and the measure itself. A run's delay is its start minus when it
 * became due, the later of its `available_at` and its creation, never below 0 — what the
 * `tock_scheduling_delay_seconds` histogram observes in one process, here read from `runs` so
 * every server answers the same. Only runs that ended (succeeded or dead) count: their `started_at`
 * and `available_at` are those of their last attempt; a pending run waiting for a retry has the
 * previous attempt's start but the next attempt's `available_at`.
 */
import { parseDuration } from './duration.js';
import { ValidationError } from './errors.js';
import { parseInstant } from './schedule/schedule.js';

/** The jobs with a series in each per-job top N of the metrics (the latest, the most dead runs, the latest misfires). */
export const DEFAULT_TOP_JOBS = 20;
/** The per-job gauges read the slots (and misfires) of this last stretch of time, ms (5 min). */
export const DEFAULT_JOB_WINDOW_MS = 300_000;
/** The largest per-job top N a process accepts (1,000 series per gauge at most). */
export const MAX_TOP_JOBS = 1000;

/** `GET /v1/delay` without `from`: this long before `to`, ms (1 h). */
export const DEFAULT_DELAY_RANGE_MS = 3_600_000;
/** `GET /v1/delay` without `step`: one bucket per minute. */
export const DEFAULT_DELAY_STEP_MS = 60_000;
/** The shortest bucket, ms: a chart needs no finer, and the query groups at most this finely. */
export const MIN_DELAY_STEP_MS = 1000;
/** The most buckets one read returns (a day of minutes). */
export const MAX_DELAY_BUCKETS = 1440;
/**
 * The longest range one read covers, ms (7 days): the read goes through every ended run whose slot
 * is in the range, so its cost grows with the range; a longer view takes several reads.
 */
export const MAX_DELAY_RANGE_MS = 7 * 86_400_000;

/** A delay series' range, [fromMs, toMs), cut into buckets of `stepMs` from `fromMs` (the last may be shorter). */
export interface DelayWindow {
  fromMs: number;
  toMs: number;
  stepMs: number;
  /** ceil((toMs − fromMs) / stepMs), 1 to MAX_DELAY_BUCKETS. */
  buckets: number;
}

/**
 * The window of a delay read from its text: `to` an ISO instant (default `now`), `from` one
 * before it (default `to` − DEFAULT_DELAY_RANGE_MS), `step` a duration (default 1m). A
 * `ValidationError` naming the field when `from` is not before `to`, the range is longer than
 * MAX_DELAY_RANGE_MS, the step shorter than MIN_DELAY_STEP_MS or the buckets more than
 * MAX_DELAY_BUCKETS.
 */
export function delayWindow(input: { from?: string; to?: string; step?: string; now: number }): DelayWindow {
  const toMs = input.to === undefined ? input.now : parseInstant(input.to, 'to');
  const fromMs = input.from === undefined ? toMs - DEFAULT_DELAY_RANGE_MS : parseInstant(input.from, 'from');
  const stepMs = input.step === undefined ? DEFAULT_DELAY_STEP_MS : parseDuration(input.step, 'step');
  return checkDelayWindow(fromMs, toMs, stepMs);
}

/** The window of [fromMs, toMs) in buckets of stepMs, within the bounds `delayWindow` states. */
export function checkDelayWindow(fromMs: number, toMs: number, stepMs: number): DelayWindow {
  if (!Number.isFinite(fromMs) || !Number.isFinite(toMs) || !Number.isInteger(stepMs))
    throw new ValidationError('a delay window needs finite instants and a whole step', { field: 'from' });
  if (fromMs >= toMs) throw new ValidationError('from must be before to', { field: 'from' });
  if (toMs - fromMs > MAX_DELAY_RANGE_MS)
    throw new ValidationError(`from to to is longer than ${MAX_DELAY_RANGE_MS / 86_400_000} days`, {
      field: 'from',
    });
  if (stepMs < MIN_DELAY_STEP_MS)
    throw new ValidationError(`step must be at least ${MIN_DELAY_STEP_MS / 1000}s`, { field: 'step' });
  const buckets = Math.ceil((toMs - fromMs) / stepMs);
  if (buckets > MAX_DELAY_BUCKETS)
    throw new ValidationError(
      `from, to and step make ${buckets} buckets; at most ${MAX_DELAY_BUCKETS}: take a longer step or a shorter range`,
      { field: 'step' },
    );
  return { fromMs, toMs, stepMs, buckets };
}

/** One bucket of a delay series: the ended runs whose slot is in it, and their delays, ms. */
export interface DelayBucket {
  /** Index of the bucket from the window's start: it covers [from + index × step, from + (index + 1) × step). */
  index: number;
  runs: number;
  /** Nearest-rank percentiles (an observed delay: the smallest with at least 50 % / 99 % of the runs at or below it). */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Every bucket of the window in order, those without runs included (runs 0, delays null): a chart sees the gaps. */
export function fillDelayBuckets(
  w: DelayWindow,
  found: readonly DelayBucket[],
): { startMs: number; runs: number; p50Ms: number | null; p99Ms: number | null; maxMs: number | null }[] {
  const byIndex = new Map(found.map((b) => [b.index, b]));
  return Array.from({ length: w.buckets }, (_, i) => {
    const b = byIndex.get(i);
    return {
      startMs: w.fromMs + i * w.stepMs,
      runs: b?.runs ?? 0,
      p50Ms: b?.p50Ms ?? null,
      p99Ms: b?.p99Ms ?? null,
      maxMs: b?.maxMs ?? null,
    };
  });
}
