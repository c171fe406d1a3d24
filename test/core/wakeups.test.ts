import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/core/clock.js';
import { idleSleepMs, msUntilClaimable, RunWakeups } from '../../src/core/wakeups.js';

const T0 = 1_000_000;

describe('msUntilClaimable', () => {
  it('is the time to the next run less the claim-ahead, never negative, infinite with none', () => {
    expect(msUntilClaimable(new Date(T0 + 1000), 0, T0)).toBe(1000);
    expect(msUntilClaimable(new Date(T0 + 1000), 300, T0)).toBe(700);
    expect(msUntilClaimable(new Date(T0 + 100), 300, T0)).toBe(0);
    expect(msUntilClaimable(new Date(T0 - 5000), 0, T0)).toBe(0);
    expect(msUntilClaimable(null, 300, T0)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('idleSleepMs', () => {
  const base = { now: T0, aheadMs: 0, intervalMs: 5000 };

  it('sleeps until the next run may be claimed', () => {
    expect(idleSleepMs({ ...base, next: new Date(T0 + 1200) })).toBe(1200);
    expect(idleSleepMs({ ...base, next: new Date(T0 + 1200), aheadMs: 250 })).toBe(950);
  });

  it('sleeps the fallback interval with no run known, or one further off', () => {
    expect(idleSleepMs({ ...base, next: null })).toBe(5000);
    expect(idleSleepMs({ ...base, next: new Date(T0 + 60_000) })).toBe(5000);
  });

  it('never less than minMs (a run it cannot take must not make it spin), never past what is left', () => {
    expect(idleSleepMs({ ...base, next: new Date(T0 + 10), minMs: 100 })).toBe(100);
    expect(idleSleepMs({ ...base, next: new Date(T0 - 10), minMs: 100 })).toBe(100);
    expect(idleSleepMs({ ...base, next: null, minMs: 100, leftMs: 40 })).toBe(40);
    expect(idleSleepMs({ ...base, next: new Date(T0 + 3000), leftMs: 2000 })).toBe(2000);
    // Without a floor, a run already claimable is claimed again at once.
    expect(idleSleepMs({ ...base, next: new Date(T0) })).toBe(0);
  });
});

describe('RunWakeups', () => {
  it('a wake ends every wait at once, and only the waits in progress', async () => {
    const clock = new FakeClock(T0);
    const wakeups = new RunWakeups(clock);
    const never = new AbortController().signal;
    const ended: number[] = [];
    const waits = [1, 2, 3].map((i) => wakeups.wait(60_000, never).then(() => ended.push(i)));
    expect(wakeups.waiting).toBe(3);
    wakeups.wake();
    await Promise.all(waits);
    expect(ended.sort()).toEqual([1, 2, 3]);
    expect(wakeups.waiting).toBe(0);
    expect(clock.nowMs()).toBe(T0);
    // A wake with nobody waiting is not kept for the next wait: that one sleeps its time.
    wakeups.wake();
    let done = false;
    const later = wakeups.wait(1000, never).then(() => {
      done = true;
    });
    await Promise.resolve();
    expect(done).toBe(false);
    clock.advance(1000);
    await later;
    expect(done).toBe(true);
  });

  it('ends a wait when its signal aborts, and does not wait at all on an aborted signal', async () => {
    const clock = new FakeClock(T0);
    const wakeups = new RunWakeups(clock);
    const stop = new AbortController();
    const waiting = wakeups.wait(60_000, stop.signal);
    expect(wakeups.waiting).toBe(1);
    stop.abort();
    await waiting;
    expect(wakeups.waiting).toBe(0);
    await wakeups.wait(60_000, stop.signal);
    expect(clock.pendingSleeps).toBe(0);
  });
});
