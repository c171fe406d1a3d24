/** The window of a delay read (`delayWindow`): defaults, bounds, and the buckets it is cut into. */
import { describe, expect, test } from 'vitest';
import {
  DEFAULT_DELAY_RANGE_MS,
  delayWindow,
  fillDelayBuckets,
  MAX_DELAY_BUCKETS,
  ValidationError,
} from '../../src/core/index.js';

const NOW = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();

describe('delayWindow', () => {
  test('defaults: the hour before now, by minute', () => {
    expect(delayWindow({ now: NOW })).toEqual({
      fromMs: NOW - DEFAULT_DELAY_RANGE_MS,
      toMs: NOW,
      stepMs: 60_000,
      buckets: 60,
    });
  });

  test('a range that is no whole number of steps ends in a shorter bucket', () => {
    expect(delayWindow({ from: iso(NOW), to: iso(NOW + 90_000), step: '1m', now: 0 }).buckets).toBe(2);
  });

  test('exactly MAX_DELAY_BUCKETS buckets is allowed, one more is not', () => {
    const to = iso(NOW + MAX_DELAY_BUCKETS * 1000);
    expect(delayWindow({ from: iso(NOW), to, step: '1s', now: 0 }).buckets).toBe(MAX_DELAY_BUCKETS);
    const over = iso(NOW + MAX_DELAY_BUCKETS * 1000 + 1);
    expect(() => delayWindow({ from: iso(NOW), to: over, step: '1s', now: 0 })).toThrow(/at most 1440/);
  });

  test.each([
    [{ from: iso(NOW), to: iso(NOW) }, 'from'],
    [{ from: iso(NOW + 1), to: iso(NOW) }, 'from'],
    [{ from: iso(NOW - 7 * 86_400_000 - 1), to: iso(NOW), step: '1h' }, 'from'],
    [{ step: '999ms' }, 'step'],
    [{ step: 'soon' }, 'step'],
    [{ to: 'yesterday' }, 'to'],
  ])('%j is refused, naming %s', (input, field) => {
    try {
      delayWindow({ ...input, now: NOW });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).message).toMatch(new RegExp(field));
    }
  });
});

test('fillDelayBuckets: every bucket in order, the empty ones with nulls', () => {
  const w = delayWindow({ from: iso(NOW), to: iso(NOW + 180_000), step: '1m', now: 0 });
  expect(fillDelayBuckets(w, [{ index: 1, runs: 2, p50Ms: 5, p99Ms: 9, maxMs: 9 }])).toEqual([
    { startMs: NOW, runs: 0, p50Ms: null, p99Ms: null, maxMs: null },
    { startMs: NOW + 60_000, runs: 2, p50Ms: 5, p99Ms: 9, maxMs: 9 },
    { startMs: NOW + 120_000, runs: 0, p50Ms: null, p99Ms: null, maxMs: null },
  ]);
});
