/**
 * The fields of a job definition, in one table: the one place to add or change a job field (with
 * a migration for its column). The order is the API's: request bodies, answers and the API
 * reference list the fields in it. The TSDoc of each entry is what `JobInput`, `JobSpec` and the
 * client's `JobBody` show for that field.
 */
import { DEFAULT_BACKOFF } from '../backoff.js';
import { MAX_CATCH_UP_LIMIT, MISFIRE_POLICIES } from '../misfire.js';
import { MAX_PRIORITY, MIN_PRIORITY } from '../priority.js';
import type { AnswerOf, BodyOf, Fields, InputOf, PgType, SpecOf } from './field.js';

/** What a job does with a slot arriving while its earlier run runs (`limits.ts` enforces it). */
export const OVERLAP_POLICIES = ['allow', 'skip', 'queue'] as const;
/** Largest concurrency cap of a job or a limit. */
export const MAX_CONCURRENCY = 100_000;
/** Most named limits one job may list. */
export const MAX_JOB_LIMITS = 16;
/** The prefix of the key of a tenant's own limit (`tenant:<id>`). */
export const TENANT_KEY_PREFIX = 'tenant:';
/** The prefix of the key of a job's own gate (`job:<id>`), which only the job writes. */
export const JOB_KEY_PREFIX = 'job:';
/** Longest serialised payload, bytes: 64 KiB. */
export const MAX_PAYLOAD_BYTES = 64 * 1024;
/** Longest serialised payload schema, bytes: 16 KiB. */
export const MAX_PAYLOAD_SCHEMA_BYTES = 16 * 1024;
/** Largest `misfire_threshold_seconds` a job may set: a day. */
export const MAX_MISFIRE_THRESHOLD_SECONDS = 86_400;
/** Longest `lease_seconds`, `jitter_seconds` and `timeout_seconds` a job may set: a day. */
const DAY_SECONDS = 86_400;
/** Largest `jitter_seconds`: a run becomes available at most this long after its slot. */
export const MAX_JITTER_SECONDS = DAY_SECONDS;

export const JOB_FIELDS = {
  /** The job's id, unique in its tenant: 1-200 of `A-Z a-z 0-9 . _ : -`, not `.` or `..`. */
  jobId: { api: 'job_id', type: 'id', description: 'job id', column: 'job_id', pgType: 'text' },
  /** Cron (5 or 6 fields), a macro (`@daily`), `@every <duration>` or `@at <instant>`. */
  schedule: {
    api: 'schedule',
    type: 'string',
    minLength: 1,
    maxLength: 256,
    description: 'cron, macro, "@every <duration>" or "@at <instant>"',
    column: 'schedule',
    pgType: 'text',
  },
  /** IANA timezone the cron expression is read in. Default `UTC`. */
  timezone: {
    api: 'timezone',
    type: 'string',
    default: 'UTC',
    minLength: 1,
    maxLength: 64,
    description: 'IANA name; default UTC',
    column: 'timezone',
    pgType: 'text',
  },
  /** Name of the handler a worker runs for this job. */
  handler: {
    api: 'handler',
    type: 'id',
    description: 'handler a worker runs',
    column: 'handler',
    pgType: 'text',
  },
  /**
   * JSON given to the handler. Default `{}`. At most 64 KiB once serialised. Refused
   * (`ValidationError` naming the path) when a string or key holds U+0000 or an unpaired surrogate
   * or a number is not finite. Numbers are IEEE-754 doubles: integers are exact up to 2^53 − 1.
   */
  payload: {
    api: 'payload',
    type: 'json',
    default: {},
    maxBytes: MAX_PAYLOAD_BYTES,
    description: 'any JSON value',
    answerDescription: 'any JSON value',
    column: 'payload',
    pgType: 'jsonb',
  },
  /**
   * A JSON Schema (draft-07; TypeBox's `Type.Object(…)` is one) every payload of the job must match:
   * its own `payload`, checked when the job is upserted, and each triggered run's, checked before
   * the run is written (a mismatch is a `ValidationError` naming the failing path). At most 16 KiB
   * once serialised; no `$ref` outside the schema. Default `null`: any JSON payload.
   */
  payloadSchema: {
    api: 'payload_schema',
    type: 'json',
    nullable: true,
    default: null,
    maxBytes: MAX_PAYLOAD_SCHEMA_BYTES,
    description:
      'JSON Schema every payload must match (at most 16 KiB; no pattern or patternProperties); default null: any payload',
    answerDescription: 'JSON Schema every payload must match; null: any payload',
    column: 'payload_schema',
    pgType: 'jsonb',
    hashedOnlyWhenSet: true,
  },
  /** 0–100, higher first. Default 0. */
  priority: {
    api: 'priority',
    type: 'integer',
    min: MIN_PRIORITY,
    max: MAX_PRIORITY,
    default: 0,
    description: 'default 0',
    column: 'priority',
    pgType: 'integer',
  },
  /** Attempts before a run is dead-lettered, 1–100. Default 3. */
  maxAttempts: {
    api: 'max_attempts',
    type: 'integer',
    min: 1,
    max: 100,
    default: 3,
    description: 'default 3',
    column: 'max_attempts',
    pgType: 'integer',
  },
  /** Retry backoff base in seconds (`base^attempt`), 1.1–60. Default 2. */
  backoffBaseSeconds: {
    api: 'backoff_base_seconds',
    type: 'number',
    min: 1.1,
    max: 60,
    default: DEFAULT_BACKOFF.baseSeconds,
    description: 'default 2',
    column: 'backoff_base_seconds',
    pgType: 'double precision',
  },
  /** Longest retry wait in seconds, 1–604800. Default 3600. */
  backoffCapSeconds: {
    api: 'backoff_cap_seconds',
    type: 'number',
    min: 1,
    max: 604_800,
    default: DEFAULT_BACKOFF.capSeconds,
    description: 'default 3600',
    column: 'backoff_cap_seconds',
    pgType: 'double precision',
  },
  /** Misfire policy after downtime. Default `fire_once`. */
  misfire: {
    api: 'misfire',
    type: 'enum',
    values: MISFIRE_POLICIES,
    default: 'fire_once',
    column: 'misfire',
    pgType: 'text',
  },
  /** Most missed slots `catch_up` backfills, 1–1000. Default 10. */
  catchUpLimit: {
    api: 'catch_up_limit',
    type: 'integer',
    min: 1,
    max: MAX_CATCH_UP_LIMIT,
    default: 10,
    description: 'default 10',
    column: 'catch_up_limit',
    pgType: 'integer',
  },
  /**
   * The misfire policy applies only once the job's next slot is more than this many seconds late
   * (0–86400); a tick merely a little late fires every slot. Default `null`: the scheduler's
   * threshold (60 s unless its store was given another).
   */
  misfireThresholdSeconds: {
    api: 'misfire_threshold_seconds',
    type: 'integer',
    nullable: true,
    min: 0,
    max: MAX_MISFIRE_THRESHOLD_SECONDS,
    default: null,
    description:
      "the misfire policy applies once the next slot is more than this late; default null: the scheduler's (60 s)",
    answerDescription: "the job's own; null: the scheduler's",
    column: 'misfire_threshold_seconds',
    pgType: 'integer',
    hashedOnlyWhenSet: true,
  },
  /** Worker pool that runs it. Default `default`. */
  pool: {
    api: 'pool',
    type: 'id',
    default: 'default',
    description: 'worker pool; default "default"',
    column: 'pool',
    pgType: 'text',
  },
  /** Lease length in seconds for this job's runs, 1–86400. Default: the server's `--lease`. */
  leaseSeconds: {
    api: 'lease_seconds',
    type: 'integer',
    nullable: true,
    min: 1,
    max: DAY_SECONDS,
    default: null,
    column: 'lease_seconds',
    pgType: 'integer',
  },
  /** Spread runs up to this many seconds after their slot, deterministically per job, 0–86400. Default 0. */
  jitterSeconds: {
    api: 'jitter_seconds',
    type: 'integer',
    min: 0,
    max: MAX_JITTER_SECONDS,
    default: 0,
    description: 'default 0',
    column: 'jitter_seconds',
    pgType: 'integer',
  },
  /** A run taking longer than this many seconds is aborted and retried, 1–86400. Default: none. */
  timeoutSeconds: {
    api: 'timeout_seconds',
    type: 'integer',
    nullable: true,
    min: 1,
    max: DAY_SECONDS,
    default: null,
    description: 'abort and retry a run after this long',
    column: 'timeout_seconds',
    pgType: 'integer',
  },
  /**
   * What happens when a slot arrives while an earlier run of the job is running: `allow` (run
   * both), `skip` (the slot's run is `skipped`, recorded in the job's history), `queue` (it waits
   * until the earlier run ends). Default `allow`.
   */
  overlap: {
    api: 'overlap',
    type: 'enum',
    values: OVERLAP_POLICIES,
    default: 'allow',
    column: 'overlap',
    pgType: 'text',
    hashedOnlyWhenSet: true,
  },
  /** At most this many runs of the job running at once, 1–100000. Default: no cap. */
  maxConcurrency: {
    api: 'max_concurrency',
    type: 'integer',
    nullable: true,
    min: 1,
    max: MAX_CONCURRENCY,
    default: null,
    description: 'at most this many runs at once; default null: no cap',
    column: 'max_concurrency',
    pgType: 'integer',
    hashedOnlyWhenSet: true,
  },
  /**
   * Named limits (`PUT /v1/limits/{key}`) every run of the job takes a token and a slot of, at
   * most 16 distinct keys, each defined before the job names it. Default `[]`. Changing the list
   * applies to runs created after the change.
   */
  limits: {
    api: 'limits',
    type: 'ids',
    maxItems: MAX_JOB_LIMITS,
    default: [],
    description: 'named limits (rate, burst, concurrency) the runs take; default []',
    column: 'limits',
    pgType: 'text[]',
    hashedOnlyWhenSet: true,
  },
  /**
   * How long the job's finished runs are kept, by state, where it differs from its tenant's
   * retention (`PUT /v1/retention`): `{ "succeeded": "1d", "dead": "forever" }`. Each value a
   * duration from 1s to 366d or `forever`; states left out take the tenant's. Default null.
   */
  retention: {
    api: 'retention',
    type: 'json',
    nullable: true,
    default: null,
    maxBytes: 1024,
    description:
      'how long finished runs are kept by state (succeeded, dead, cancelled, skipped): a duration or "forever" each; states left out take the tenant\'s retention; default null',
    answerDescription: "retention by state that overrides the tenant's; null: the tenant's",
    column: 'retention',
    pgType: 'jsonb',
    hashedOnlyWhenSet: true,
  },
} as const satisfies Fields;

export type JobField = keyof typeof JOB_FIELDS;

/** What a caller gives to register or update a job. Unset fields take their defaults. */
export type JobInputFields = InputOf<typeof JOB_FIELDS>;
/** A validated definition with every default applied. */
export type JobSpecFields = SpecOf<typeof JOB_FIELDS>;
/** A job definition in the API's snake_case (`PUT /v1/jobs`, job files). */
export type JobBodyJson = BodyOf<typeof JOB_FIELDS>;
/** The definition part of a job in an API answer. */
export type JobDefinitionJson = AnswerOf<typeof JOB_FIELDS>;

/** A column the store writes from a validated definition. */
export interface JobColumn {
  column: string;
  pgType: PgType;
  /** The parameter value for this column (a `jsonb` column's JSON text). */
  value: (spec: JobSpecFields) => unknown;
}

/**
 * The definition's columns, in the table's order: the store builds its upsert from this list (one
 * INSERT … ON CONFLICT for one job or many). The columns the store sets itself (`tenant_id`,
 * `shard_id`, `next_run_at`, `definition_hash`, `version`, `created_at`, `updated_at`) are not here.
 */
export const JOB_COLUMNS: readonly JobColumn[] = (Object.keys(JOB_FIELDS) as JobField[]).map((property) => {
  const f: (typeof JOB_FIELDS)[JobField] = JOB_FIELDS[property];
  return {
    column: f.column,
    pgType: f.pgType,
    value:
      f.type === 'json'
        ? (spec: JobSpecFields) => JSON.stringify(spec[property])
        : (spec: JobSpecFields) => spec[property],
  };
});
