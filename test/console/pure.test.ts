/**
 * The web console's pure parts, without a browser: the wait between loads after 429 answers, the
 * pages the URL's hash names, and how instants read. The console itself runs in Chromium in
 * test/e2e/console.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { backoffMs, MAX_BACKOFF_MS, POLL_MS } from '../../src/console/backoff.js';
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
