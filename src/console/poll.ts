/**
 * Live pages: `usePoll` loads at once, then again every `POLL_MS` while the tab is visible. A
 * hidden tab makes no request (the timer stops, and the page loads again when it shows); a load
 * never overlaps the one before. A 429 from the API's per-tenant quota backs off (`backoff.ts`),
 * and the wait returns to `POLL_MS` after the next answer.
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';
import { backoffMs, POLL_MS } from './backoff.js';

export interface Polled<T> {
  /** The last answer (kept while a later load fails); null before the first. */
  data: T | null;
  /** The last load's error; null after an answer. */
  error: ApiError | null;
  /** Loads now (after an action), without waiting for the timer. */
  refresh: () => void;
}

export function usePoll<T>(load: () => Promise<T>, deps: unknown[], intervalMs = POLL_MS): Polled<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const now = useRef<() => void>(() => {});

  // `deps` are the caller's: `load` is a new closure on every render, and reloads only when they change.
  useEffect(() => {
    let stopped = false;
    let inFlight = false;
    let again = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let delay = intervalMs;
    setData(null);
    setError(null);

    const schedule = () => {
      clearTimeout(timer);
      if (!stopped && !document.hidden) timer = setTimeout(tick, delay);
    };
    const tick = async () => {
      if (stopped || document.hidden) return;
      if (inFlight) {
        again = true;
        return;
      }
      inFlight = true;
      clearTimeout(timer);
      try {
        const answer = await load();
        if (stopped) return;
        delay = intervalMs;
        setData(answer);
        setError(null);
      } catch (err) {
        if (stopped) return;
        const e = err instanceof ApiError ? err : new ApiError(0, 'console_error', String(err));
        if (e.status === 429) delay = backoffMs(delay, e.retryAfterS);
        setError(e);
      } finally {
        inFlight = false;
      }
      if (again) {
        again = false;
        void tick();
      } else schedule();
    };
    const onVisibility = () => {
      if (document.hidden) clearTimeout(timer);
      else void tick();
    };
    now.current = () => void tick();
    document.addEventListener('visibilitychange', onVisibility);
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, deps);

  const refresh = useCallback(() => now.current(), []);
  return { data, error, refresh };
}
