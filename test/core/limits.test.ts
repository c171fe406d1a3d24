/** The pure part of backlog control: limit definitions and keys, token arithmetic, what holds a run. */
import { describe, expect, it } from 'vitest';
import {
  describeWaits,
  type GateState,
  grainOf,
  msUntilRoom,
  msUntilToken,
  type Pacing,
  type RecentStarts,
  recordStarts,
  roomAt,
  tokensAfter,
  validateLimit,
  validateLimitKey,
  WINDOW_GRAIN_MS,
  windowCap,
  windowUsed,
} from '../../src/core/index.js';
import { refusal } from '../setup/refusal.js';

describe('validateLimit', () => {
  it('takes a rate with a burst, a concurrency cap, or both; nulls for what is unset', () => {
    expect(validateLimit({ rate: 50, burst: 50 })).toEqual({ rate: 50, burst: 50, maxConcurrency: null });
    expect(validateLimit({ maxConcurrency: 3 })).toEqual({ rate: null, burst: null, maxConcurrency: 3 });
    expect(validateLimit({ rate: 0.5, burst: 1, maxConcurrency: 1 })).toEqual({
      rate: 0.5,
      burst: 1,
      maxConcurrency: 1,
    });
  });

  it.each([
    [{ rate: -1, burst: 5 }, 'rate'],
    [{ rate: 0, burst: 5 }, 'rate'],
    [{ rate: Number.NaN, burst: 5 }, 'rate'],
    [{ rate: 5, burst: 0 }, 'burst'],
    [{ rate: 5, burst: 1.5 }, 'burst'],
    [{ rate: 5 }, 'burst'],
    [{ burst: 5 }, 'rate'],
    [{ maxConcurrency: 0 }, 'max_concurrency'],
    [{ maxConcurrency: 100_001 }, 'max_concurrency'],
    [{}, 'rate'],
    [{ rate: 1, burst: 1, ceiling: 3 }, 'ceiling'],
  ])('refuses %j, naming %s', (input, field) => {
    expect(refusal(() => validateLimit(input as never)).details.field).toBe(field);
  });
});

describe('validateLimitKey', () => {
  it("takes an id, and the tenant's own key; refuses job keys and other tenants' keys", () => {
    expect(validateLimitKey('payments-api', 'acme')).toBe('payments-api');
    expect(validateLimitKey('tenant:acme', 'acme')).toBe('tenant:acme');
    expect(refusal(() => validateLimitKey('tenant:globex', 'acme')).details.field).toBe('key');
    expect(refusal(() => validateLimitKey('job:nightly', 'acme')).details.field).toBe('key');
    expect(refusal(() => validateLimitKey('a b', 'acme')).details.field).toBe('key');
    expect(refusal(() => validateLimitKey('..', 'acme')).details.field).toBe('key');
  });
});

describe('tokens', () => {
  it('refill at the rate up to the burst, and never run backwards', () => {
    const l = { rate: 50, burst: 50, tokens: 0.5 };
    expect(tokensAfter(l, 10)).toBeCloseTo(1);
    expect(tokensAfter(l, 60_000)).toBe(50);
    expect(tokensAfter(l, -5_000)).toBe(0.5);
    expect(msUntilToken({ rate: 50, tokens: 0.5 })).toBe(10);
    expect(msUntilToken({ rate: 2, tokens: 1 })).toBe(0);
  });
});

describe('the one-second window', () => {
  // An instant on a sub-window boundary: grain g0 = T / 50.
  const T = Date.UTC(2026, 0, 1);
  const g0 = T / WINDOW_GRAIN_MS;
  const none = { at: [], n: [] };
  const pacing = (p: Partial<Pacing>): Pacing => ({
    rate: 50,
    burst: 50,
    tokens: 50,
    refilledAtMs: T,
    ...none,
    ...p,
  });

  it('caps starts at max(burst, ceil(rate)) a second', () => {
    expect(windowCap({ rate: 50, burst: 50 })).toBe(50);
    expect(windowCap({ rate: 50, burst: 10 })).toBe(50);
    expect(windowCap({ rate: 0.5, burst: 5 })).toBe(5);
    expect(windowCap({ rate: 2.5, burst: 1 })).toBe(3);
  });

  it('counts a sub-window whole while any of it is within the last second', () => {
    expect(grainOf(T + 49)).toBe(g0);
    expect(grainOf(T + 50)).toBe(g0 + 1);
    const recent = { at: [g0, g0 + 1, g0 + 10], n: [30, 5, 2] };
    expect(windowUsed(recent, T)).toBe(37);
    // Sub-window g0 is [T, T + 50): within (now − 1 s, now] until now reaches T + 1050.
    expect(windowUsed(recent, T + 1049)).toBe(37);
    expect(windowUsed(recent, T + 1050)).toBe(7);
    expect(windowUsed(recent, T + 1100)).toBe(2);
    expect(windowUsed(recent, T + 1550)).toBe(0);
    expect(windowUsed(none, T)).toBe(0);
  });

  it('records starts in the current sub-window, merged, dropping the dead', () => {
    let recent: RecentStarts = none;
    recent = recordStarts(recent, 3, T + 10);
    recent = recordStarts(recent, 2, T + 40);
    expect(recent).toEqual({ at: [g0], n: [5] });
    recent = recordStarts(recent, 1, T + 60);
    expect(recent).toEqual({ at: [g0, g0 + 1], n: [5, 1] });
    // At T + 1050, sub-window g0 has left the window.
    recent = recordStarts(recent, 4, T + 1050);
    expect(recent).toEqual({ at: [g0 + 1, g0 + 21], n: [1, 4] });
    // Never more than 21 entries.
    for (let t = T; t < T + 5000; t += 7) recent = recordStarts(recent, 1, t);
    expect(recent.at.length).toBeLessThanOrEqual(21);
  });

  it('never lets more than the cap start in any second, however the claims fall', () => {
    // Claims every 7 ms taking whatever room there is: the window of any second holds at most 50.
    const p = pacing({ tokens: 50 });
    let recent: RecentStarts = none;
    let tokens = 50;
    let last = T;
    const starts: number[] = [];
    for (let t = T; t < T + 10_000; t += 7) {
      tokens = tokensAfter({ rate: 50, burst: 50, tokens }, t - last);
      last = t;
      const take = Math.floor(roomAt({ ...p, tokens, refilledAtMs: t, ...recent }, t));
      if (take <= 0) continue;
      tokens -= take;
      recent = recordStarts(recent, take, t);
      for (let i = 0; i < take; i++) starts.push(t);
    }
    let most = 0;
    for (let i = 0, j = 0; i < starts.length; i++) {
      while (j < starts.length && starts[j]! < starts[i]! + 1000) j++;
      most = Math.max(most, j - i);
    }
    expect(most).toBe(50);
    // Paced near the rate: at most one grain lost per second.
    expect(starts.length).toBeGreaterThanOrEqual(50 + Math.floor((9_000 * 50) / 1050));
  });

  it('room: the bucket, but no more than the window has left', () => {
    // A full bucket, 45 started in the last second: room for 5.
    expect(roomAt(pacing({ at: [g0], n: [45] }), T + 500)).toBe(5);
    // An empty window: the bucket (refilled, fractional).
    expect(roomAt(pacing({ tokens: 0.5 }), T + 10)).toBeCloseTo(1);
    // Both: the lesser.
    expect(roomAt(pacing({ tokens: 2, at: [g0], n: [49] }), T + 100)).toBe(1);
    // A cap lowered under what started: below 0.
    expect(roomAt(pacing({ burst: 10, rate: 10, at: [g0], n: [12] }), T + 100)).toBe(-2);
  });

  it('room in: the later of the next whole token and the window freeing enough', () => {
    // The burst of 50 at T: full window until its sub-window leaves at T + 1050; tokens by then.
    const burst = pacing({ tokens: 0, at: [g0], n: [50] });
    expect(msUntilRoom(burst, T + 100)).toBe(950);
    expect(msUntilRoom(burst, T + 1050)).toBe(0);
    // Window with room, bucket dry: the next token.
    expect(msUntilRoom(pacing({ tokens: 0.5, refilledAtMs: T }), T)).toBe(10);
    // Over the cap by 2 (cap 10, 11 started): the oldest (1) and the next (3) must leave.
    const over = pacing({ rate: 10, burst: 10, tokens: 10, at: [g0, g0 + 2, g0 + 5], n: [1, 3, 7] });
    expect(msUntilRoom(over, T + 500)).toBe((g0 + 3) * WINDOW_GRAIN_MS + 1000 - (T + 500));
    expect(msUntilRoom(pacing({}), T)).toBe(0);
  });
});

describe('describeWaits', () => {
  const gate = (g: Partial<GateState>): GateState => ({
    key: 'k',
    maxConcurrency: null,
    inUse: 0,
    overlap: null,
    pacing: null,
    holder: null,
    ...g,
  });
  const now = Date.UTC(2026, 0, 1);
  const bucket = (rate: number, tokens: number, recent: RecentStarts = { at: [], n: [] }): Pacing => ({
    rate,
    burst: 50,
    tokens,
    refilledAtMs: now,
    ...recent,
  });

  it('names each gate without room, and only those', () => {
    expect(
      describeWaits(
        [
          gate({ key: 'payments-api', pacing: bucket(50, 0.5) }),
          gate({ key: 'db', maxConcurrency: 4, inUse: 4 }),
          gate({ key: 'tenant:acme', pacing: bucket(10, 3) }),
          gate({ key: 'search', pacing: bucket(50, 20, { at: [now / 50 - 4], n: [50] }) }),
          gate({ key: 'job:nightly', maxConcurrency: 1, inUse: 1, overlap: 'queue', holder: 'r-1' }),
          gate({ key: 'job:sync', maxConcurrency: 2, inUse: 2 }),
        ],
        now,
      ),
    ).toEqual([
      'limit payments-api: no token before 2026-01-01T00:00:00.010Z',
      'limit db: max_concurrency 4 in use',
      // 50 started 200 ms ago (their sub-window leaves the window at +850 ms).
      'limit search: no token before 2026-01-01T00:00:00.850Z',
      'overlap: run r-1 still running',
      'max_concurrency 2',
    ]);
    expect(describeWaits([gate({ key: 'db', maxConcurrency: 4, inUse: 3 })], now)).toEqual([]);
  });
});
