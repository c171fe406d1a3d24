/**
 * The log of a background loop's failures while its store is unreachable (a server restarting, a
 * network down): the first failure of a spell is logged at once, then at most one line per
 * `everyMs` with the count so far, and the first success after a spell says it is over. A worker
 * with three loops retrying through a ten-second restart writes three lines and three recoveries,
 * not a screen of the same connection error.
 */
import type { Logger } from 'pino';
import type { Clock } from '../core/index.js';

/** Default: at most one line a minute per loop while its failures go on. */
export const FAILURE_LOG_EVERY_MS = 60_000;

export class FailureLog {
  private failures = 0;
  private loggedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly o: {
      clock: Clock;
      logger: Logger;
      /** What failed, as the log line says it: 'claim failed; retrying with backoff'. */
      message: string;
      /** What a success after failures says: 'claims work again'. */
      recovered: string;
      level?: 'error' | 'warn';
      everyMs?: number;
    },
  ) {}

  /** One more failure in a row: logged if it is the first, or the last line is `everyMs` old. */
  failed(err: unknown): void {
    this.failures += 1;
    const now = this.o.clock.nowMs();
    if (this.failures > 1 && now - this.loggedAt < (this.o.everyMs ?? FAILURE_LOG_EVERY_MS)) return;
    this.loggedAt = now;
    this.o.logger[this.o.level ?? 'error']({ err, failures: this.failures }, this.o.message);
  }

  /** A success: ends a spell of failures (and says so, if there was one). */
  succeeded(): void {
    if (this.failures === 0) return;
    this.o.logger.info({ failures: this.failures }, this.o.recovered);
    this.failures = 0;
    this.loggedAt = Number.NEGATIVE_INFINITY;
  }
}
