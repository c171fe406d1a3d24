/** Waiting on events in tests: never on wall-clock sleeps. */
import { EventEmitter } from 'node:events';
import { FakeClock } from '../../src/core/index.js';

/**
 * Resolves with the arguments of the first `event` that satisfies `predicate`; rejects loudly when
 * none comes within `timeoutMs` (a test guard, not scheduling logic).
 */
export function once<A extends unknown[]>(
  emitter: {
    on(event: string, l: (...args: A) => void): unknown;
    off(event: string, l: (...args: A) => void): unknown;
  },
  event: string,
  predicate: (...args: A) => boolean = () => true,
  timeoutMs = 5000,
): Promise<A> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, listener);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for "${event}"`));
    }, timeoutMs);
    const listener = (...args: A) => {
      let ok: boolean;
      try {
        ok = predicate(...args);
      } catch (err) {
        clearTimeout(timer);
        emitter.off(event, listener);
        reject(err);
        return;
      }
      if (!ok) return;
      clearTimeout(timer);
      emitter.off(event, listener);
      resolve(args);
    };
    emitter.on(event, listener);
  });
}

/** A FakeClock that reports every sleep it is asked for, so a test can see a wait begin. */
export class WatchedClock extends FakeClock {
  readonly sleeps: number[] = [];
  readonly events = new EventEmitter<{ sleep: [ms: number] }>();

  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    const p = super.sleep(ms, signal);
    this.sleeps.push(ms);
    this.events.emit('sleep', ms);
    return p;
  }
}
