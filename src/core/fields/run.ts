/**
 * The fields of a run, of its attempts and of a leased run as the API answers them, in the API's order: the one
 * place that lists them for the answer schemas (`api/schemas.ts`), the mapping from the store's
 * rows (`api/present.ts`) and the client's types. The TSDoc of each entry is the client's.
 */
import { RUN_STATES } from '../run-state.js';
import type { AnswerFields, AnswerOf, StoredOf } from './field.js';

export const RUN_FIELDS = {
  runId: { api: 'run_id', type: 'string' },
  jobId: { api: 'job_id', type: 'string' },
  /** The slot: with the job, the run's identity. */
  scheduledFor: {
    api: 'scheduled_for',
    type: 'instant',
    answerDescription: 'the slot: with the job, the run identity',
  },
  state: {
    api: 'state',
    type: 'string',
    values: RUN_STATES,
    answerDescription: 'pending, running, succeeded, dead or cancelled',
  },
  attempt: { api: 'attempt', type: 'integer' },
  maxAttempts: { api: 'max_attempts', type: 'integer' },
  handler: { api: 'handler', type: 'string' },
  payload: { api: 'payload', type: 'json', answerDescription: 'any JSON value' },
  pool: { api: 'pool', type: 'string' },
  priority: { api: 'priority', type: 'integer' },
  /** When the run is (or was) claimable from. */
  availableAt: { api: 'available_at', type: 'instant', answerDescription: 'claimable from' },
  leaseOwner: { api: 'lease_owner', type: 'string', nullable: true },
  leaseExpiresAt: {
    api: 'lease_expires_at',
    type: 'instant',
    nullable: true,
    answerDescription: 'lease expiry while running',
  },
  /** The last failed attempt's error message (its stack is on the attempt). */
  lastError: {
    api: 'last_error',
    type: 'string',
    nullable: true,
    answerDescription: "the last failed attempt's error message",
  },
  createdAt: { api: 'created_at', type: 'instant', answerDescription: 'materialised' },
  /** When the last ended attempt's handler started; running: the later of its claim and `available_at`. */
  startedAt: {
    api: 'started_at',
    type: 'instant',
    nullable: true,
    answerDescription:
      "the last ended attempt's handler start; running: the later of its claim and available_at, when the handler can start",
  },
  /** When the attempt `started_at` belongs to was claimed. */
  claimedAt: {
    api: 'claimed_at',
    type: 'instant',
    nullable: true,
    answerDescription: 'when the attempt of started_at was claimed',
  },
  finishedAt: { api: 'finished_at', type: 'instant', nullable: true, answerDescription: 'ended' },
} as const satisfies AnswerFields;

export const ATTEMPT_FIELDS = {
  /** From 1, numbered on across replays. */
  attempt: { api: 'attempt', type: 'integer', answerDescription: 'from 1, numbered on across replays' },
  workerId: { api: 'worker_id', type: 'string' },
  /** When the handler started (never before the claim, nor before the slot of a run claimed ahead). */
  startedAt: {
    api: 'started_at',
    type: 'instant',
    answerDescription:
      "the handler's start as its worker reported it (within the claim and the end); unreported: the later of the claim and available_at",
  },
  /** When the attempt was claimed; null on attempts recorded before it was kept. */
  claimedAt: {
    api: 'claimed_at',
    type: 'instant',
    nullable: true,
    answerDescription: 'claimed (null on attempts recorded before it was kept)',
  },
  finishedAt: { api: 'finished_at', type: 'instant', nullable: true, answerDescription: 'ended' },
  /** `succeeded`, `failed`, `lease_expired`, `released` or `cancelled`; `null` while running. */
  outcome: {
    api: 'outcome',
    type: 'string',
    nullable: true,
    answerDescription: 'succeeded, failed, lease_expired, released or cancelled',
  },
  /** The error's message. */
  error: { api: 'error', type: 'string', nullable: true, answerDescription: "the error's message" },
  /** The error's stack, when the handler threw an `Error`. */
  errorStack: {
    api: 'error_stack',
    type: 'string',
    nullable: true,
    answerDescription: "the error's stack, when the handler threw an Error",
  },
  /** The last 64 KiB of what the handler printed. */
  output: {
    api: 'output',
    type: 'string',
    nullable: true,
    answerDescription: 'the last 64 KiB of what the handler printed',
  },
  /** The handler's latest `ctx.progress` value (any finite number; by convention a percentage), or null. */
  progress: {
    api: 'progress',
    type: 'number',
    nullable: true,
    answerDescription: "the handler's latest progress (ctx.progress: any finite number); null: none reported",
  },
  /** The message of that progress report (at most 200 characters), or null. */
  progressMessage: {
    api: 'progress_message',
    type: 'string',
    nullable: true,
    answerDescription: 'the message of that progress report (at most 200 characters)',
  },
  /** The attempt's last 100 `ctx.log` lines (each at most 1,000 characters), oldest first. */
  logs: {
    api: 'logs',
    type: 'strings',
    answerDescription:
      "the attempt's last 100 log lines (ctx.log; each at most 1,000 characters), oldest first",
  },
  /** Log lines dropped (oldest first) to keep the last 100. */
  logsDropped: {
    api: 'logs_dropped',
    type: 'integer',
    answerDescription: 'log lines dropped, oldest first, to keep the last 100',
  },
  /** When the handler last reported progress or log lines that were written, or null. */
  reportedAt: {
    api: 'reported_at',
    type: 'instant',
    nullable: true,
    answerDescription: 'when progress or log lines were last written; null: none reported',
  },
} as const satisfies AnswerFields;

/** A run handed to a worker under a lease (`POST /v1/leases`). */
export const LEASED_RUN_FIELDS = {
  runId: { api: 'run_id', type: 'string' },
  tenantId: { api: 'tenant_id', type: 'string' },
  jobId: { api: 'job_id', type: 'string' },
  handler: { api: 'handler', type: 'string' },
  payload: { api: 'payload', type: 'json', answerDescription: 'any JSON value' },
  scheduledFor: { api: 'scheduled_for', type: 'instant', answerDescription: 'the slot' },
  attempt: { api: 'attempt', type: 'integer' },
  leaseToken: { api: 'lease_token', type: 'string' },
  leaseExpiresAt: { api: 'lease_expires_at', type: 'instant', answerDescription: 'renew before this' },
  pool: { api: 'pool', type: 'string' },
  maxAttempts: { api: 'max_attempts', type: 'integer' },
  /** When the run became claimable. */
  availableAt: { api: 'available_at', type: 'instant', answerDescription: 'claimable since' },
  /** The job's timeout, or null. */
  timeoutSeconds: {
    api: 'timeout_seconds',
    type: 'integer',
    nullable: true,
    answerDescription: 'abort the handler after this long; null: no limit',
  },
} as const satisfies AnswerFields;

/** A run in an API answer. */
export type RunJson = AnswerOf<typeof RUN_FIELDS>;
/** An attempt of a run in an API answer. */
export type AttemptJson = AnswerOf<typeof ATTEMPT_FIELDS>;
/** A leased run in an API answer. */
export type LeasedRunJson = AnswerOf<typeof LEASED_RUN_FIELDS>;
/** What a run's answer is made from (the store's `Run` has these and more). */
export type StoredRun = StoredOf<typeof RUN_FIELDS>;
/** What an attempt's answer is made from. */
export type StoredAttempt = StoredOf<typeof ATTEMPT_FIELDS>;
