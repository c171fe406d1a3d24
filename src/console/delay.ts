/**
 * What the delay charts read from `GET /v1/delay` (pure, so the unit tests hold it without a
 * browser): the chart's columns, the latest bucket with runs, and the largest delay of the runs with
 * a slot in the recent window `/metrics` reads for `tock_job_scheduling_delay_seconds`.
 */
import type { DelayAnswer, DelayBucket } from './types.js';

/**
 * The window of slots `tock_job_scheduling_delay_seconds` reads on a server started with the
 * default `--metrics-job-window` (5 min, `DEFAULT_JOB_WINDOW_MS`): the job page shows the largest
 * delay over the same stretch. The console cannot ask a server for its setting (`/metrics` needs a
 * cluster-admin key), so a server with another window reports over that one instead.
 */
export const METRICS_JOB_WINDOW_MS = 300_000;

export type DelayStat = 'p50' | 'p99' | 'max';

/** uPlot's aligned columns: the buckets' starts (Unix seconds), then one column per statistic (null: no runs). */
export function chartColumns(answer: DelayAnswer, stats: readonly DelayStat[]): (number | null)[][] {
  return [
    answer.buckets.map((b) => Date.parse(b.start) / 1000),
    ...stats.map((s) => answer.buckets.map((b) => b[s])),
  ];
}

/** The newest bucket with runs, or null. */
export function latestBucket(answer: DelayAnswer): DelayBucket | null {
  for (let i = answer.buckets.length - 1; i >= 0; i--) {
    const b = answer.buckets[i];
    if (b && b.runs > 0) return b;
  }
  return null;
}

/**
 * The largest delay (seconds) of the ended runs whose slot is in the last `windowMs` of the answer
 * (its buckets that start at `to − windowMs` or later: the whole of the window when the step
 * divides it, as the console's one-minute step divides five minutes), with how many runs they are;
 * null when none ran. What `tock_job_scheduling_delay_seconds` reports for the job over the same
 * slots, once its runs have ended (the gauge also counts a queued run's wait so far).
 */
export function recentMax(
  answer: DelayAnswer,
  windowMs = METRICS_JOB_WINDOW_MS,
): { seconds: number; runs: number } | null {
  const from = Date.parse(answer.to) - windowMs;
  let seconds: number | null = null;
  let runs = 0;
  for (const b of answer.buckets) {
    if (Date.parse(b.start) < from || b.max === null) continue;
    runs += b.runs;
    seconds = seconds === null ? b.max : Math.max(seconds, b.max);
  }
  return seconds === null ? null : { seconds, runs };
}

/** `1.234 s`: a delay to the millisecond; `—` for none. */
export const seconds = (s: number | null) => (s === null ? '—' : `${s.toFixed(3)} s`);
