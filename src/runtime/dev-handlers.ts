/**
 * Handlers that `tock dev` runs for the example jobs in `examples/jobs.yaml`: enough to watch
 * scheduling, retries and dead letters happen. Real deployments register their own handlers.
 */
import { type Clock, PermanentError, type Random } from '../core/index.js';
import type { Handler } from '../worker/index.js';

function field<T>(payload: unknown, key: string, fallback: T): T {
  if (payload && typeof payload === 'object' && key in payload)
    return (payload as Record<string, T>)[key] as T;
  return fallback;
}

export function devHandlers(clock: Clock, random: Random): Record<string, Handler> {
  return {
    /** Logs `payload.message`. */
    echo: ({ payload, logger, scheduledFor }) => {
      logger.info({ slot: scheduledFor.toISOString() }, String(field(payload, 'message', 'hello from tock')));
    },
    /** Works for `payload.ms` (default 2000) and stops early when its lease is lost. */
    sleep: async ({ payload, signal }) => {
      await clock.sleep(Number(field(payload, 'ms', 2000)), signal);
      if (signal.aborted) throw new Error('aborted');
    },
    /** Fails with probability `payload.failure_rate` (default 0.5): shows retries and backoff. */
    flaky: ({ payload }) => {
      if (random() < Number(field(payload, 'failure_rate', 0.5))) throw new Error('upstream 500');
    },
    /** Always fails permanently: shows a run dead-lettered at once. */
    poison: () => {
      throw new PermanentError('bad arguments: this job can never succeed');
    },
  };
}
