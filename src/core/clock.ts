/**
 * The one place that reads the wall clock or waits on a timer. Every service takes a `Clock`;
 * scheduling logic asks it for `now` and sleeps through it, so tests drive time with `FakeClock`
 * and production nodes can follow the database's clock through `OffsetClock`.
 */

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  nowMs(): number;
  now(): Date;
  /** Resolves after `ms` of this clock's time, or at once when `signal` aborts. Never rejects. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The process's own clock. */
export class SystemClock implements Clock {
  nowMs(): number {
    return Date.now();
  }

  now(): Date {
    return new Date(this.nowMs());
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}

interface Sleeper {
  wakeAt: number;
  resolve: () => void;
}

/**
 * A clock that only moves when told. `advance` wakes every sleeper whose time has come, in order,
 * so a test can step through a 350-second outage instantly and deterministically.
 */
export class FakeClock implements Clock {
  private current: number;
  private sleepers: Sleeper[] = [];

  constructor(start: number | Date = 0) {
    this.current = typeof start === 'number' ? start : start.getTime();
  }

  nowMs(): number {
    return this.current;
  }

  now(): Date {
    return new Date(this.current);
  }

  /** Number of sleeps waiting for time to move: lets a test wait until a loop is idle. */
  get pendingSleeps(): number {
    return this.sleepers.length;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const sleeper: Sleeper = {
        wakeAt: this.current + Math.max(0, ms),
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        sleeper.resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (ms <= 0) return sleeper.resolve();
      this.sleepers.push(sleeper);
    });
  }

  /** Moves time forward by `ms` and wakes the sleepers that are due. */
  advance(ms: number): void {
    if (ms < 0) throw new RangeError('FakeClock cannot go backwards');
    this.set(this.current + ms);
  }

  /** Moves time to `ms` (not backwards) and wakes the sleepers that are due. */
  set(ms: number | Date): void {
    const target = typeof ms === 'number' ? ms : ms.getTime();
    if (target < this.current) throw new RangeError('FakeClock cannot go backwards');
    this.current = target;
    const due = this.sleepers.filter((s) => s.wakeAt <= target).sort((a, b) => a.wakeAt - b.wakeAt);
    this.sleepers = this.sleepers.filter((s) => s.wakeAt > target);
    for (const s of due) s.resolve();
  }
}

/** One round trip to a reference clock: local send and receive times around its reading. */
export interface ClockSample {
  sentMs: number;
  referenceMs: number;
  receivedMs: number;
}

/** Offset of a reference clock from a local one, with the half round trip as its uncertainty. */
export interface OffsetEstimate {
  offsetMs: number;
  uncertaintyMs: number;
}

/**
 * Picks the sample with the shortest round trip (the least queueing noise) and assumes the
 * reference read its clock half-way through it. The true offset is within `uncertaintyMs`.
 */
export function estimateOffset(samples: readonly ClockSample[]): OffsetEstimate {
  if (samples.length === 0) throw new RangeError('estimateOffset needs at least one sample');
  let best: ClockSample | undefined;
  for (const s of samples) {
    if (s.receivedMs < s.sentMs) throw new RangeError('a clock sample was received before it was sent');
    if (!best || s.receivedMs - s.sentMs < best.receivedMs - best.sentMs) best = s;
  }
  const b = best as ClockSample;
  const rtt = b.receivedMs - b.sentMs;
  return { offsetMs: b.referenceMs - (b.sentMs + rtt / 2), uncertaintyMs: rtt / 2 };
}

/**
 * Follows a reference clock (the database's) by a measured offset from a local clock, so every
 * node that shares the database shares one time for slots and lease expiry. `measure` takes the
 * sampling function from the caller: this module does no I/O.
 */
/** How fast an unsynchronised local clock may drift from the reference: 100 ppm, a conservative crystal. */
export const DRIFT_PER_MS = 1e-4;

export class OffsetClock implements Clock {
  private estimate: OffsetEstimate = { offsetMs: 0, uncertaintyMs: Number.POSITIVE_INFINITY };
  private measuredAt: number | null = null;

  constructor(private readonly local: Clock = new SystemClock()) {}

  /** Takes `samples` round trips through `sample` and adopts the best estimate. */
  async measure(sample: () => Promise<ClockSample>, samples = 5): Promise<OffsetEstimate> {
    const taken: ClockSample[] = [];
    for (let i = 0; i < samples; i++) taken.push(await sample());
    this.estimate = estimateOffset(taken);
    this.measuredAt = this.local.nowMs();
    return this.offset;
  }

  /**
   * The offset to the reference, and how far off it may be now: half the best round trip at the
   * last measurement, plus the drift the local clock may have accumulated since. Infinite before
   * the first measurement.
   */
  get offset(): OffsetEstimate {
    if (this.measuredAt === null) return this.estimate;
    const age = Math.max(0, this.local.nowMs() - this.measuredAt);
    return {
      offsetMs: this.estimate.offsetMs,
      uncertaintyMs: this.estimate.uncertaintyMs + age * DRIFT_PER_MS,
    };
  }

  nowMs(): number {
    return Math.round(this.local.nowMs() + this.estimate.offsetMs);
  }

  now(): Date {
    return new Date(this.nowMs());
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return this.local.sleep(ms, signal);
  }
}
