/**
 * How an idle claimer waits for work, written once for the API's waiting long-polls and the
 * worker's claim loop. A claimer that found nothing sleeps until the first of:
 *
 * - a wake: runs may have become claimable (a `tock_runs` notification, fanned out by
 *   {@link RunWakeups} to every sleeper of the process; the worker's claim loop is poked);
 * - the instant the next known run becomes claimable, less what it may claim ahead
 *   ({@link msUntilClaimable});
 * - a fallback interval, for a wake that never comes (a lost notification, no listener).
 *
 * {@link idleSleepMs} is that decision as a pure function of its inputs. Nothing here reads a clock
 * or does I/O: the sleeping is the given `Clock`'s.
 */
import type { Clock } from './clock.js';

/** What an idle claimer sleeps on. */
export interface Wakeups {
  /** Whether wakes arrive now (the listener is up); when not, sleepers use a shorter fallback. */
  readonly listening: boolean;
  /** Resolves after `ms` of the clock's time, at the next wake, or when `signal` aborts. Never rejects. */
  wait(ms: number, signal: AbortSignal): Promise<void>;
}

/** The process's fan-out: `wake()` on every notification wakes every waiter once. */
export class RunWakeups implements Wakeups {
  listening = false;
  private readonly waiters = new Set<() => void>();

  constructor(private readonly clock: Clock) {}

  /** How many sleepers wait now. */
  get waiting(): number {
    return this.waiters.size;
  }

  wake(): void {
    for (const w of [...this.waiters]) w();
  }

  async wait(ms: number, signal: AbortSignal): Promise<void> {
    const woken = new AbortController();
    const stop = () => woken.abort();
    this.waiters.add(stop);
    signal.addEventListener('abort', stop, { once: true });
    try {
      if (!signal.aborted) await this.clock.sleep(ms, woken.signal);
    } finally {
      this.waiters.delete(stop);
      signal.removeEventListener('abort', stop);
    }
  }
}

/**
 * Ms from `now` until a run that becomes available at `next` may be claimed by a claimer that
 * claims `aheadMs` early (0 when it already may); infinite when no run is known (`next` null).
 */
export function msUntilClaimable(next: Date | null, aheadMs: number, now: number): number {
  return next === null ? Number.POSITIVE_INFINITY : Math.max(0, next.getTime() - aheadMs - now);
}

/**
 * How long an idle claimer sleeps (unless woken first): until the next known run may be claimed,
 * but at least `minMs` (default 0: a claimer that must not spin on a run it cannot take sets it),
 * and at most `intervalMs` (the fallback) and `leftMs` (what is left of a bounded wait).
 */
export function idleSleepMs(p: {
  now: number;
  /** The earliest future `available_at` of a run the claimer may take, or null. */
  next: Date | null;
  aheadMs: number;
  intervalMs: number;
  minMs?: number;
  leftMs?: number;
}): number {
  const until = msUntilClaimable(p.next, p.aheadMs, p.now);
  return Math.min(p.intervalMs, p.leftMs ?? Number.POSITIVE_INFINITY, Math.max(until, p.minMs ?? 0));
}
