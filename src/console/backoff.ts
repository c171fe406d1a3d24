/**
 * How long the console waits between loads of a page: `POLL_MS`, and after a 429 from the API's
 * per-tenant quota, double the last wait, at least the `Retry-After` the server sent, at most
 * `MAX_BACKOFF_MS`. Pure, so the unit tests hold it without a browser.
 */

/** Between two loads of a visible page, ms. */
export const POLL_MS = 5000;
/** The longest wait after repeated 429 answers, ms. */
export const MAX_BACKOFF_MS = 60_000;

/** The wait after a 429: double the last one, at least what the server asks, at most MAX_BACKOFF_MS. */
export function backoffMs(lastMs: number, retryAfterS: number | null): number {
  return Math.min(MAX_BACKOFF_MS, Math.max(lastMs * 2, (retryAfterS ?? 0) * 1000));
}
