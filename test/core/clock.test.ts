import { describe, expect, it } from 'vitest';
import {
  type ClockSample,
  estimateOffset,
  FakeClock,
  OffsetClock,
  SystemClock,
} from '../../src/core/clock.js';

/** Lets every pending promise reaction run (a macrotask boundary drains the microtask queue). */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('FakeClock', () => {
  it('starts at the given instant, as a number or a Date', () => {
    expect(new FakeClock().nowMs()).toBe(0);
    expect(new FakeClock(1_234).nowMs()).toBe(1_234);
    const clock = new FakeClock(new Date('2026-03-15T10:20:30.000Z'));
    expect(clock.nowMs()).toBe(Date.UTC(2026, 2, 15, 10, 20, 30));
    expect(clock.now().toISOString()).toBe('2026-03-15T10:20:30.000Z');
  });

  it('moves only when told', async () => {
    const clock = new FakeClock(1_000);
    await flush();
    expect(clock.nowMs()).toBe(1_000);
    clock.advance(250);
    expect(clock.nowMs()).toBe(1_250);
    clock.set(5_000);
    expect(clock.nowMs()).toBe(5_000);
    clock.set(new Date(6_000));
    expect(clock.nowMs()).toBe(6_000);
  });

  it('advance wakes exactly the sleepers that are due, in wake-time order', async () => {
    const clock = new FakeClock(10_000);
    const woken: string[] = [];
    const sleep = (ms: number, label: string) => clock.sleep(ms).then(() => woken.push(label));
    const all = [sleep(300, 'c'), sleep(100, 'a'), sleep(200, 'b1'), sleep(200, 'b2'), sleep(1_000, 'd')];
    expect(clock.pendingSleeps).toBe(5);

    clock.advance(99);
    await flush();
    expect(woken).toEqual([]);
    expect(clock.pendingSleeps).toBe(5);

    clock.advance(1); // exactly the first wake time: due
    await flush();
    expect(woken).toEqual(['a']);
    expect(clock.pendingSleeps).toBe(4);

    clock.advance(250); // now 10_350: b1, b2 (ties keep registration order) and c, in that order
    await flush();
    expect(woken).toEqual(['a', 'b1', 'b2', 'c']);
    expect(clock.pendingSleeps).toBe(1);

    clock.advance(650);
    await Promise.all(all);
    expect(woken).toEqual(['a', 'b1', 'b2', 'c', 'd']);
    expect(clock.pendingSleeps).toBe(0);
  });

  it('set wakes sleepers in order even when registered out of order, and accepts a Date', async () => {
    const clock = new FakeClock(0);
    const woken: number[] = [];
    for (const ms of [500, 50, 400, 5_000, 200]) void clock.sleep(ms).then(() => woken.push(ms));
    clock.set(new Date(500));
    await flush();
    expect(woken).toEqual([50, 200, 400, 500]);
    expect(clock.pendingSleeps).toBe(1);
    clock.set(5_000);
    await flush();
    expect(woken).toEqual([50, 200, 400, 500, 5_000]);
  });

  it('measures a sleep from the time it was started', async () => {
    const clock = new FakeClock(0);
    clock.advance(1_000);
    let done = false;
    void clock.sleep(100).then(() => {
      done = true;
    });
    clock.advance(99);
    await flush();
    expect(done).toBe(false);
    clock.advance(1);
    await flush();
    expect(done).toBe(true);
  });

  it('resolves a sleep of zero or negative length at once without queuing it', async () => {
    const clock = new FakeClock(0);
    await clock.sleep(0);
    await clock.sleep(-5);
    expect(clock.pendingSleeps).toBe(0);
    expect(clock.nowMs()).toBe(0);
  });

  it('abort resolves a pending sleep without moving time and forgets the sleeper', async () => {
    const clock = new FakeClock(0);
    const controller = new AbortController();
    let done = false;
    const sleeping = clock.sleep(60_000, controller.signal).then(() => {
      done = true;
    });
    const other = clock.sleep(60_000);
    expect(clock.pendingSleeps).toBe(2);
    await flush();
    expect(done).toBe(false);

    controller.abort();
    await sleeping;
    expect(done).toBe(true);
    expect(clock.nowMs()).toBe(0);
    expect(clock.pendingSleeps).toBe(1);

    clock.advance(60_000);
    await other;
    expect(clock.pendingSleeps).toBe(0);
  });

  it('resolves at once when the signal is already aborted', async () => {
    const clock = new FakeClock(0);
    const controller = new AbortController();
    controller.abort();
    await clock.sleep(60_000, controller.signal);
    expect(clock.pendingSleeps).toBe(0);
  });

  it('cannot go backwards', () => {
    const clock = new FakeClock(1_000);
    expect(() => clock.advance(-1)).toThrow(RangeError);
    expect(() => clock.set(999)).toThrow(RangeError);
    expect(() => clock.set(new Date(0))).toThrow(/cannot go backwards/);
    expect(clock.nowMs()).toBe(1_000);
    clock.set(1_000); // standing still is allowed
    clock.advance(0);
    expect(clock.nowMs()).toBe(1_000);
  });
});

describe('SystemClock', () => {
  it('reads the process clock', () => {
    const clock = new SystemClock();
    const before = Date.now();
    const now = clock.nowMs();
    const after = Date.now();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(after);
    expect(Math.abs(clock.now().getTime() - Date.now())).toBeLessThan(50);
  });

  it('sleep resolves after about the requested time', async () => {
    const clock = new SystemClock();
    const start = performance.now();
    await clock.sleep(5);
    const elapsed = performance.now() - start;
    expect(elapsed).toBeGreaterThanOrEqual(3); // timers may fire up to ~1 ms early
    expect(elapsed).toBeLessThan(1_000);
  });

  it('abort resolves a long sleep early', async () => {
    const clock = new SystemClock();
    const controller = new AbortController();
    const start = performance.now();
    setTimeout(() => controller.abort(), 5);
    await clock.sleep(60_000, controller.signal);
    expect(performance.now() - start).toBeLessThan(1_000);
  });

  it('resolves at once when the signal is already aborted', async () => {
    const clock = new SystemClock();
    const controller = new AbortController();
    controller.abort();
    const start = performance.now();
    await clock.sleep(60_000, controller.signal);
    expect(performance.now() - start).toBeLessThan(1_000);
  });
});

describe('estimateOffset', () => {
  it('uses the sample with the shortest round trip', () => {
    const samples: ClockSample[] = [
      { sentMs: 1_000, referenceMs: 6_100, receivedMs: 1_200 }, // rtt 200
      { sentMs: 2_000, referenceMs: 7_010, receivedMs: 2_020 }, // rtt 20: the best
      { sentMs: 3_000, referenceMs: 8_100, receivedMs: 3_100 }, // rtt 100
    ];
    // offset = reference - (sent + rtt/2) = 7010 - (2000 + 10)
    expect(estimateOffset(samples)).toEqual({ offsetMs: 5_000, uncertaintyMs: 10 });
  });

  it('assumes the reference read its clock half-way through the round trip', () => {
    expect(estimateOffset([{ sentMs: 100, referenceMs: 50, receivedMs: 131 }])).toEqual({
      offsetMs: 50 - (100 + 15.5),
      uncertaintyMs: 15.5,
    });
    expect(estimateOffset([{ sentMs: 100, referenceMs: 400, receivedMs: 100 }])).toEqual({
      offsetMs: 300,
      uncertaintyMs: 0,
    });
  });

  it('keeps the first of equally short round trips', () => {
    const samples: ClockSample[] = [
      { sentMs: 0, referenceMs: 5_003, receivedMs: 10 },
      { sentMs: 100, referenceMs: 5_200, receivedMs: 110 },
    ];
    expect(estimateOffset(samples)).toEqual({ offsetMs: 4_998, uncertaintyMs: 5 });
  });

  it('rejects empty input', () => {
    expect(() => estimateOffset([])).toThrow(RangeError);
    expect(() => estimateOffset([])).toThrow(/at least one sample/);
  });

  it('rejects a sample received before it was sent', () => {
    expect(() =>
      estimateOffset([
        { sentMs: 0, referenceMs: 10, receivedMs: 4 },
        { sentMs: 100, referenceMs: 10, receivedMs: 99 },
      ]),
    ).toThrow(RangeError);
  });
});

describe('OffsetClock', () => {
  /**
   * A reference clock `aheadMs` ahead of `local`, reached over a link whose delays are given per
   * round trip as [there, back]: the fake database reads its clock after the outbound delay.
   */
  function fakeSampler(local: FakeClock, aheadMs: number, delays: ReadonlyArray<readonly [number, number]>) {
    const calls = { count: 0 };
    const sample = async (): Promise<ClockSample> => {
      const delay = delays[calls.count++];
      if (!delay) throw new Error('sampler called too often');
      const [there, back] = delay;
      const sentMs = local.nowMs();
      local.advance(there);
      const referenceMs = local.nowMs() + aheadMs;
      local.advance(back);
      return { sentMs, referenceMs, receivedMs: local.nowMs() };
    };
    return { sample, calls };
  }

  it('follows the local clock until measured', () => {
    const local = new FakeClock(1_000_000);
    const clock = new OffsetClock(local);
    expect(clock.offset).toEqual({ offsetMs: 0, uncertaintyMs: Number.POSITIVE_INFINITY });
    expect(clock.nowMs()).toBe(1_000_000);
    local.advance(5);
    expect(clock.now().getTime()).toBe(1_000_005);
  });

  it('measures a reference 5000 ms ahead over asymmetric delays from the shortest round trip', async () => {
    const local = new FakeClock(1_000_000);
    const clock = new OffsetClock(local);
    // round trips 50, 8, 120, 10, 50: the best is [3, 5], which reads the reference 1 ms before
    // the midpoint, so the estimate is 5000 + (3 - 5) / 2 = 4999 ± 4.
    const { sample, calls } = fakeSampler(local, 5_000, [
      [40, 10],
      [3, 5],
      [60, 60],
      [8, 2],
      [25, 25],
    ]);
    const estimate = await clock.measure(sample);
    expect(calls.count).toBe(5);
    expect(estimate).toEqual({ offsetMs: 4_999, uncertaintyMs: 4 });
    expect(clock.offset).toEqual(estimate);
    // The true offset is within the uncertainty.
    expect(Math.abs(estimate.offsetMs - 5_000)).toBeLessThanOrEqual(estimate.uncertaintyMs);

    expect(local.nowMs()).toBe(1_000_238);
    expect(clock.nowMs()).toBe(1_000_238 + 4_999);
    local.advance(1_000);
    expect(clock.nowMs()).toBe(1_001_238 + 4_999);
    expect(clock.now().getTime()).toBe(1_001_238 + 4_999);
  });

  it('finds the exact offset over symmetric delays, including a reference that is behind', async () => {
    const local = new FakeClock(50_000);
    const clock = new OffsetClock(local);
    const { sample, calls } = fakeSampler(local, -2_000, [
      [7, 7],
      [2, 2],
      [9, 9],
    ]);
    expect(await clock.measure(sample, 3)).toEqual({ offsetMs: -2_000, uncertaintyMs: 2 });
    expect(calls.count).toBe(3);
    expect(clock.nowMs()).toBe(local.nowMs() - 2_000);
  });

  it('rounds a fractional offset to whole milliseconds in nowMs', async () => {
    const local = new FakeClock(1_000_000);
    const clock = new OffsetClock(local);
    const { sample } = fakeSampler(local, 5_000, [[1, 2]]);
    expect(await clock.measure(sample, 1)).toEqual({ offsetMs: 4_999.5, uncertaintyMs: 1.5 });
    expect(local.nowMs()).toBe(1_000_003);
    expect(clock.nowMs()).toBe(1_005_003); // Math.round(1_005_002.5)
  });

  it('keeps the previous estimate when a measurement fails', async () => {
    const local = new FakeClock(0);
    const clock = new OffsetClock(local);
    await clock.measure(fakeSampler(local, 100, [[1, 1]]).sample, 1);
    expect(clock.offset).toEqual({ offsetMs: 100, uncertaintyMs: 1 });
    const broken = async (): Promise<ClockSample> => ({ sentMs: 10, referenceMs: 0, receivedMs: 5 });
    await expect(clock.measure(broken, 2)).rejects.toThrow(RangeError);
    expect(clock.offset).toEqual({ offsetMs: 100, uncertaintyMs: 1 });
  });

  it('sleeps on the local clock', async () => {
    const local = new FakeClock(0);
    const clock = new OffsetClock(local);
    let done = false;
    const sleeping = clock.sleep(100).then(() => {
      done = true;
    });
    expect(local.pendingSleeps).toBe(1);
    local.advance(99);
    await flush();
    expect(done).toBe(false);
    local.advance(1);
    await sleeping;
    expect(done).toBe(true);
  });
});
