/** Domain objects → the API's snake_case JSON, by the field tables of core (`core/fields/`). */

import type { Limit } from '../core/index.js';
import {
  API_KEY_FIELDS,
  ATTEMPT_FIELDS,
  answerOf,
  jobSpecToApi,
  LEASED_RUN_FIELDS,
  RUN_FIELDS,
} from '../core/index.js';
import type {
  ApiKey,
  BackfillResult,
  ClaimedRun,
  Job,
  LimitGauge,
  Run,
  RunWithAttempts,
} from '../store/index.js';

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

/** What a job is doing: paused by an operator, finished (no slot left), or active. */
export function jobState(j: Pick<Job, 'enabled' | 'nextRunAt'>): 'active' | 'paused' | 'finished' {
  if (!j.enabled) return 'paused';
  return j.nextRunAt === null ? 'finished' : 'active';
}

/** A job as the API answers it: its definition (from `JOB_FIELDS`) and its state. */
export function jobJson(j: Job) {
  return {
    ...jobSpecToApi(j),
    misfire_after_seconds: j.misfireAfterSeconds,
    enabled: j.enabled,
    state: jobState(j),
    // A paused job's stored next_run_at is stale (resuming computes a new one from then on).
    next_run_at: j.enabled ? iso(j.nextRunAt) : null,
    version: j.version,
    created_at: j.createdAt.toISOString(),
    updated_at: j.updatedAt.toISOString(),
  };
}

export function runJson(r: Run) {
  return answerOf(RUN_FIELDS, r);
}

export function backfillJson(b: BackfillResult) {
  return {
    created: b.created,
    existing: b.existing,
    first_slot: iso(b.firstSlot),
    last_slot: iso(b.lastSlot),
  };
}

export function runWithAttemptsJson(r: RunWithAttempts, waitingFor: string | null = null) {
  // The run's progress is its latest attempt's (the attempts are in order).
  const last = r.attempts.at(-1);
  return {
    ...runJson(r),
    waiting_for: waitingFor,
    progress: last?.progress ?? null,
    progress_message: last?.progressMessage ?? null,
    attempts: r.attempts.map((a) => answerOf(ATTEMPT_FIELDS, a)),
  };
}

export function leasedRunJson(r: ClaimedRun) {
  return answerOf(LEASED_RUN_FIELDS, {
    ...r,
    timeoutSeconds: r.timeoutMs === null ? null : r.timeoutMs / 1000,
  });
}

export function keyJson(k: ApiKey) {
  return answerOf(API_KEY_FIELDS, k);
}

/** A limit as the API answers it (`tokens` as of the answer). */
export function limitJson(l: Limit) {
  return {
    key: l.key,
    rate: l.rate,
    burst: l.burst,
    max_concurrency: l.maxConcurrency,
    tokens: l.tokens,
    in_use: l.inUse,
    created_at: l.createdAt.toISOString(),
    updated_at: l.updatedAt.toISOString(),
  };
}

/** A limit with the runs it holds back (`GET /v1/limits`, `GET /v1/limits/{key}`). */
export function limitStateJson(l: LimitGauge) {
  return { ...limitJson(l), held: l.heldRuns, held_capped: l.heldCapped };
}
