import { reportJson } from './report-json.js';
import type { LeaseReport } from './types.js';

/**
 * A result reported under a lease, as the client takes it (camelCase) and as the API takes it: the
 * body of `POST /v1/runs/{run_id}/complete`, and each entry of `POST /v1/runs/complete`.
 */

export interface CompleteOptions {
  /** The token of the live lease. */
  leaseToken: string;
  status: 'succeeded' | 'failed';
  /** What went wrong (for `failed`): the error's message, what run tables show. */
  error?: string;
  /** The error's stack (for `failed`), kept on the attempt apart from the message. */
  errorStack?: string;
  /**
   * When the handler started, as an ISO 8601 instant on the server's clock: the attempt's
   * `started_at` (the server keeps it within the claim and now). Default: the later of the claim
   * and the run's `available_at`.
   */
  startedAt?: string;
  /** `false` dead-letters the run at once. Default true. */
  retryable?: boolean;
  /** Retry after this long instead of the job's backoff, ms. */
  retryAfterMs?: number;
  /** What the handler printed; the server keeps the last 64 KiB on the attempt. */
  output?: string;
  /** What the handler reported since the last heartbeat (`ctx.progress`, `ctx.log`), kept with the result. */
  report?: LeaseReport;
}

/** One result of a batch (`completeMany`, or a claim's `results`): a run and its result. */
export interface ResultOptions extends CompleteOptions {
  runId: string;
}

/** The API's body for a result: only the fields given. */
export function resultBody(options: CompleteOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { lease_token: options.leaseToken, status: options.status };
  if (options.error !== undefined) body.error = options.error;
  if (options.errorStack !== undefined) body.error_stack = options.errorStack;
  if (options.startedAt !== undefined) body.started_at = options.startedAt;
  if (options.retryable !== undefined) body.retryable = options.retryable;
  if (options.retryAfterMs !== undefined) body.retry_after_ms = options.retryAfterMs;
  if (options.output !== undefined) body.output = options.output;
  if (options.report !== undefined) Object.assign(body, reportJson(options.report));
  return body;
}
