/**
 * The web console's pure parts, without a browser: the wait between loads after 429 answers, the
 * pages the URL's hash names, and how instants read. The console itself runs in Chromium in
 * test/e2e/console.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { backoffMs, MAX_BACKOFF_MS, POLL_MS } from '../../src/console/backoff.js';
import { chartColumns, latestBucket, recentMax, seconds } from '../../src/console/delay.js';
import { age, runInstant } from '../../src/console/format.js';
import { jobHref, parseRoute, runHref } from '../../src/console/routes.js';

describe('backoff after 429', () => {
  test('doubles the last wait, takes a longer Retry-After, stops at MAX_BACKOFF_MS', () => {
    expect(backoffMs(POLL_MS, null)).toBe(2 * POLL_MS);
    expect(backoffMs(POLL_MS, 30)).toBe(30_000);
    expect(backoffMs(20_000, 1)).toBe(40_000);
    expect(backoffMs(40_000, null)).toBe(MAX_BACKOFF_MS);
    expect(backoffMs(POLL_MS, 3600)).toBe(MAX_BACKOFF_MS);
  });
});

describe('routes', () => {
  test('the hash names a page and an id; anything else is the jobs page', () => {
    expect(parseRoute('')).toEqual({ page: 'jobs' });
    expect(parseRoute('#/jobs')).toEqual({ page: 'jobs' });
    expect(parseRoute('#/nonsense/x')).toEqual({ page: 'jobs' });
    expect(parseRoute('#/dead')).toEqual({ page: 'dead' });
    expect(parseRoute('#/now')).toEqual({ page: 'now' });
    expect(parseRoute('#/cluster')).toEqual({ page: 'cluster' });
    expect(parseRoute('#/limits')).toEqual({ page: 'limits' });
    expect(parseRoute('#/runs/01a2')).toEqual({ page: 'run', id: '01a2' });
    expect(parseRoute('#/jobs/%E0%A4%A')).toEqual({ page: 'job', id: '%E0%A4%A' });
  });

  test('links round-trip ids with characters a URL escapes', () => {
    for (const id of ['nightly', 'a:b.c_d-e', 'with space', 'x/y']) {
      expect(parseRoute(jobHref(id))).toEqual({ page: 'job', id });
      expect(parseRoute(runHref(id))).toEqual({ page: 'run', id });
    }
  });
});

describe('instants', () => {
  const now = Date.UTC(2026, 0, 1, 12);
  test('ages read in words, past and future', () => {
    expect(age(new Date(now - 12_000).toISOString(), now)).toBe('12 s ago');
    expect(age(new Date(now + 3 * 60_000).toISOString(), now)).toBe('in 3 min');
    expect(age(new Date(now - 2 * 3_600_000).toISOString(), now)).toBe('2 h ago');
    expect(age(new Date(now - 5 * 86_400_000).toISOString(), now)).toBe('5 d ago');
  });

  test("a run's instant is its end, else its start, else its creation", () => {
    expect(runInstant({ finished_at: 'f', started_at: 's', created_at: 'c' })).toBe('f');
    expect(runInstant({ finished_at: null, started_at: 's', created_at: 'c' })).toBe('s');
    expect(runInstant({ finished_at: null, started_at: null, created_at: 'c' })).toBe('c');
  });
});

describe('delay charts', () => {
  const bucket = (
    start: string,
    runs: number,
    p50: number | null,
    p99: number | null,
    max: number | null,
  ) => ({
    start,
    runs,
    p50,
    p99,
    max,
  });
  const answer = {
    from: '2026-01-01T09:00:00.000Z',
    to: '2026-01-01T10:00:00.000Z',
    step_seconds: 60,
    pool: null,
    job_id: 'j',
    buckets: [
      bucket('2026-01-01T09:54:00.000Z', 1, 9, 9, 9),
      bucket('2026-01-01T09:55:00.000Z', 2, 1.5, 2.25, 2.25),
      bucket('2026-01-01T09:57:00.000Z', 0, null, null, null),
      bucket('2026-01-01T09:59:00.000Z', 3, 0.5, 1, 1),
    ],
  };

  test("the largest delay of the last five minutes' buckets: those that start at to − 5 min or later", () => {
    expect(recentMax(answer)).toEqual({ seconds: 2.25, runs: 5 });
    expect(recentMax(answer, 60_000)).toEqual({ seconds: 1, runs: 3 });
    expect(recentMax(answer, 6 * 60_000)).toEqual({ seconds: 9, runs: 6 });
    expect(recentMax({ ...answer, buckets: [] })).toBeNull();
  });

  test("the chart's columns are the buckets' starts in Unix seconds and a column per statistic", () => {
    const [x, p99] = chartColumns(answer, ['p99']);
    expect(x?.[0]).toBe(Date.parse('2026-01-01T09:54:00Z') / 1000);
    expect(p99).toEqual([9, 2.25, null, 1]);
    expect(latestBucket(answer)?.start).toBe('2026-01-01T09:59:00.000Z');
    expect(seconds(2.25)).toBe('2.250 s');
    expect(seconds(null)).toBe('—');
  });
});
