/**
 * Error classes shared by every layer. Each has a stable `code` that is also the HTTP contract's
 * `error.code`, so the API maps errors to statuses by code and never by message.
 */

export type ErrorCode =
  | 'validation_error'
  | 'not_found'
  | 'conflict'
  | 'lease_lost'
  | 'permanent_failure'
  | 'retry_later'
  | 'idempotency_mismatch'
  | 'unauthorized'
  | 'forbidden'
  | 'rate_limited'
  | 'payload_too_large'
  | 'unsupported_media_type';

export class TockError extends Error {
  readonly code: ErrorCode;
  /** Extra machine-readable facts (for example the `run_id` a conflicting slot already has). */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

/** Bad input: nothing was written. */
export class ValidationError extends TockError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('validation_error', message, details);
  }
}

export class NotFoundError extends TockError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('not_found', message, details);
  }
}

/** The state of the target does not allow the operation (replay of a live run, a slot that already has a run). */
export class ConflictError extends TockError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('conflict', message, details);
  }
}

/** The caller's lease token is not the live one: another worker owns the run now, or it finished. */
export class LeaseLostError extends TockError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('lease_lost', message, details);
  }
}

/**
 * Thrown by a handler to say that retrying cannot help (bad arguments, a missing table):
 * the run is dead-lettered at once instead of spending its remaining attempts.
 */
export class PermanentError extends TockError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('permanent_failure', message, details);
  }
}

/**
 * Thrown by a handler (or an executor) to retry no sooner than `retryAfterMs` from now, e.g. an
 * HTTP 429 or 503 with `Retry-After`. Any other error retries after the job's backoff.
 */
export class RetryLaterError extends TockError {
  readonly retryAfterMs: number;

  constructor(message: string, retryAfterMs: number, details: Record<string, unknown> = {}) {
    super('retry_later', message, details);
    this.retryAfterMs = Math.max(0, Math.round(retryAfterMs));
  }
}
