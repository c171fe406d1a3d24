/**
 * A step run on an interval by a `Clock`, for the maintenance loops (tick, reaper, heartbeats).
 * A failing step never stops the loop: it reports the error, backs off exponentially (capped),
 * and tries again; one success resets the backoff. `stop()` wakes the loop and waits for the
 * step in flight to finish.
 */
import type { Clock } from './clock.js';

export interface PeriodicOptions {
  clock: Clock;
  /** Time between the end of one step and the start of the next, ms. */
  intervalMs: number;
  /**
   * The work. Return `true` to run again at once (a full batch: more is waiting), a number of ms
   * to wait that long instead of `intervalMs` (never longer), anything else to wait `intervalMs`.
   */
  step: () => Promise<boolean | number | undefined> | boolean | number | undefined;
  onError: (err: unknown, consecutiveFailures: number) => void;
  /** Longest wait after repeated failures, ms. Default 30000. */
  maxBackoffMs?: number;
}

const WOKEN = Symbol('woken');

export class Periodic {
  private stopping = new AbortController();
  private wake = new AbortController();
  private loop: Promise<void> | null = null;
  /** Set by a poke; a poke during a step makes the next step start without waiting. */
  private poked = false;

  constructor(private readonly o: PeriodicOptions) {}

  get running(): boolean {
    return this.loop !== null;
  }

  start(): void {
    if (this.loop) return;
    this.stopping = new AbortController();
    this.loop = this.run();
  }

  /** Cuts the current wait short so the step runs now. */
  poke(): void {
    this.poked = true;
    // A reason of our own: aborting without one builds a DOMException with a stack trace, and a
    // busy worker pokes once per finished run.
    this.wake.abort(WOKEN);
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.wake.abort();
    await this.loop;
    this.loop = null;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      let again = false;
      let sooner: number | null = null;
      this.poked = false;
      try {
        const result = await this.o.step();
        again = result === true;
        if (typeof result === 'number' && Number.isFinite(result)) sooner = Math.max(0, result);
        failures = 0;
      } catch (err) {
        failures += 1;
        this.o.onError(err, failures);
      }
      if (this.stopping.signal.aborted) break;
      if ((again || this.poked) && failures === 0) continue;
      const wait =
        failures === 0
          ? Math.min(this.o.intervalMs, sooner ?? this.o.intervalMs)
          : Math.min(this.o.maxBackoffMs ?? 30_000, this.o.intervalMs * 2 ** Math.min(failures, 16));
      if (this.wake.signal.aborted) this.wake = new AbortController();
      await this.o.clock.sleep(wait, AbortSignal.any([this.stopping.signal, this.wake.signal]));
    }
  }
}
