/**
 * Job definitions: validation and defaults, pure. A definition is checked completely before any
 * write, so bad input is a `ValidationError` that names the field and nothing is stored.
 */
import { createHash } from 'node:crypto';
import { DEFAULT_BACKOFF } from './backoff.js';
import { ValidationError } from './errors.js';
import { MAX_CATCH_UP_LIMIT, type MisfirePolicy, parseMisfirePolicy } from './misfire.js';
import { MAX_PRIORITY, MIN_PRIORITY } from './priority.js';
import { isValidTimezone, parseSchedule, type Schedule } from './schedule/schedule.js';
import { badTextAt, describeBadText } from './text.js';

/**
 * What an identifier may be: `[A-Za-z0-9._:-]{1,200}`, except `.` and `..`. Ids go into URL paths
 * (`/v1/jobs/<id>`), where `fetch` and every URL parser resolve `.` and `..` as path segments, so
 * such a job could be created but never read or deleted through the client or the CLI.
 */
export const ID_PATTERN = '^(?!\\.{1,2}$)[A-Za-z0-9._:-]{1,200}$';
const ID = new RegExp(ID_PATTERN);

/**
 * Checks an identifier (job id, tenant, handler, pool, worker id, key name): `[A-Za-z0-9._:-]{1,200}`
 * and not `.` or `..`.
 */
export function validateId(value: unknown, what: string): string {
  if (typeof value !== 'string' || !ID.test(value)) {
    throw new ValidationError(`${what} must be 1-200 characters of A-Z a-z 0-9 . _ : - (and not . or ..)`, {
      field: what,
    });
  }
  return value;
}

/** What a caller gives to register or update a job. Unset fields take the defaults below. */
export interface JobInput {
  jobId: string;
  /** Cron (5 or 6 fields), a macro (`@daily`), `@every <duration>` or `@at <instant>`. */
  schedule: string;
  /** IANA timezone the cron expression is read in. Default `UTC`. */
  timezone?: string;
  /** Name of the handler a worker runs for this job. */
  handler: string;
  /**
   * JSON given to the handler. Default `{}`. At most 64 KiB once serialised. Refused
   * (`ValidationError` naming the path) when a string or key holds U+0000 or an unpaired surrogate
   * or a number is not finite. Numbers are IEEE-754 doubles: integers are exact up to 2^53 − 1.
   */
  payload?: unknown;
  /** 0–100, higher first. Default 0. */
  priority?: number;
  /** Attempts before a run is dead-lettered, 1–100. Default 3. */
  maxAttempts?: number;
  /** Retry backoff base in seconds (`base^attempt`), 1.1–60. Default 2. */
  backoffBaseSeconds?: number;
  /** Longest retry wait in seconds, 1–604800. Default 3600. */
  backoffCapSeconds?: number;
  /** Misfire policy after downtime. Default `fire_once`. */
  misfire?: MisfirePolicy;
  /** Most missed slots `catch_up` backfills, 1–1000. Default 10. */
  catchUpLimit?: number;
  /**
   * The misfire policy applies only once the job's next slot is more than this many seconds late
   * (0–86400); a tick merely a little late fires every slot. Default `null`: the scheduler's
   * threshold (60 s unless its store was given another).
   */
  misfireThresholdSeconds?: number | null;
  /** Worker pool that runs it. Default `default`. */
  pool?: string;
  /** Lease length in seconds for this job's runs, 1–86400. Default: the server's `--lease`. */
  leaseSeconds?: number | null;
  /** Spread runs up to this many seconds after their slot, deterministically per job, 0–86400. Default 0. */
  jitterSeconds?: number;
  /** A run taking longer than this many seconds is aborted and retried, 1–86400. Default: none. */
  timeoutSeconds?: number | null;
}

/** A validated definition with every default applied. */
export interface JobSpec {
  jobId: string;
  schedule: string;
  timezone: string;
  handler: string;
  payload: unknown;
  priority: number;
  maxAttempts: number;
  backoffBaseSeconds: number;
  backoffCapSeconds: number;
  misfire: MisfirePolicy;
  catchUpLimit: number;
  misfireThresholdSeconds: number | null;
  pool: string;
  leaseSeconds: number | null;
  jitterSeconds: number;
  timeoutSeconds: number | null;
}

export const MAX_PAYLOAD_BYTES = 64 * 1024;
/** Largest `misfire_threshold_seconds` a job may set: a day. */
export const MAX_MISFIRE_THRESHOLD_SECONDS = 86_400;
/** The misfire threshold of jobs that set none, unless the scheduler is given another, ms. */
export const DEFAULT_MISFIRE_THRESHOLD_MS = 60_000;

const KNOWN_FIELDS = new Set<string>([
  'jobId',
  'schedule',
  'timezone',
  'handler',
  'payload',
  'priority',
  'maxAttempts',
  'backoffBaseSeconds',
  'backoffCapSeconds',
  'misfire',
  'catchUpLimit',
  'misfireThresholdSeconds',
  'pool',
  'leaseSeconds',
  'jitterSeconds',
  'timeoutSeconds',
]);

function int(value: unknown, what: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(`${what} must be an integer from ${min} to ${max}`, { field: what });
  }
  return value;
}

function num(value: unknown, what: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new ValidationError(`${what} must be a number from ${min} to ${max}`, { field: what });
  }
  return value;
}

/** Runs `fn`, tagging a `ValidationError` it throws with the field it concerns. */
function withField<T>(field: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ValidationError && err.details.field === undefined) {
      throw new ValidationError(err.message, { ...err.details, field });
    }
    throw err;
  }
}

/** Validates a definition and applies defaults; also returns the parsed schedule. */
export function validateJob(input: JobInput): { spec: JobSpec; schedule: Schedule } {
  if (typeof input !== 'object' || input === null) throw new ValidationError('job must be an object');
  for (const key of Object.keys(input)) {
    if (!KNOWN_FIELDS.has(key)) throw new ValidationError(`unknown job field "${key}"`, { field: key });
  }
  const jobId = validateId(input.jobId, 'job_id');
  const handler = validateId(input.handler, 'handler');
  const pool = input.pool === undefined ? 'default' : validateId(input.pool, 'pool');
  if (input.timezone !== undefined && typeof input.timezone !== 'string') {
    throw new ValidationError('timezone must be a string', { field: 'timezone' });
  }
  const timezone = input.timezone ?? 'UTC';
  if (typeof input.schedule !== 'string')
    throw new ValidationError('schedule must be a string', { field: 'schedule' });
  const schedule = withField(isValidTimezone(timezone) ? 'schedule' : 'timezone', () =>
    parseSchedule(input.schedule, timezone),
  );
  const payload = input.payload === undefined ? {} : input.payload;
  let serialised: string | undefined;
  try {
    serialised = JSON.stringify(payload);
  } catch {
    serialised = undefined;
  }
  if (serialised === undefined) throw new ValidationError('payload must be JSON', { field: 'payload' });
  // Refused, not changed: `\u0000` and lone surrogates are what jsonb cannot store, and a
  // non-finite number would silently become `null` (nothing in a payload is coerced).
  const bad = badTextAt(payload, 'payload');
  if (bad) throw new ValidationError(describeBadText(bad), { field: bad.path });
  if (Buffer.byteLength(serialised) > MAX_PAYLOAD_BYTES) {
    throw new ValidationError(`payload is larger than ${MAX_PAYLOAD_BYTES} bytes`, { field: 'payload' });
  }
  if (input.misfire !== undefined && typeof input.misfire !== 'string') {
    throw new ValidationError('misfire must be a string', { field: 'misfire' });
  }
  const misfire =
    input.misfire === undefined
      ? 'fire_once'
      : withField('misfire', () => parseMisfirePolicy(input.misfire as string));
  const leaseSeconds =
    input.leaseSeconds === undefined || input.leaseSeconds === null
      ? null
      : int(input.leaseSeconds, 'lease_seconds', 1, 86_400, 0);
  const spec: JobSpec = {
    jobId,
    schedule: schedule.source,
    timezone,
    handler,
    payload: JSON.parse(serialised),
    priority: int(input.priority, 'priority', MIN_PRIORITY, MAX_PRIORITY, 0),
    maxAttempts: int(input.maxAttempts, 'max_attempts', 1, 100, 3),
    backoffBaseSeconds: num(
      input.backoffBaseSeconds,
      'backoff_base_seconds',
      1.1,
      60,
      DEFAULT_BACKOFF.baseSeconds,
    ),
    backoffCapSeconds: num(
      input.backoffCapSeconds,
      'backoff_cap_seconds',
      1,
      604_800,
      DEFAULT_BACKOFF.capSeconds,
    ),
    misfire,
    catchUpLimit: int(input.catchUpLimit, 'catch_up_limit', 1, MAX_CATCH_UP_LIMIT, 10),
    misfireThresholdSeconds:
      input.misfireThresholdSeconds === undefined || input.misfireThresholdSeconds === null
        ? null
        : int(
            input.misfireThresholdSeconds,
            'misfire_threshold_seconds',
            0,
            MAX_MISFIRE_THRESHOLD_SECONDS,
            0,
          ),
    pool,
    leaseSeconds,
    jitterSeconds: int(input.jitterSeconds, 'jitter_seconds', 0, 86_400, 0),
    timeoutSeconds:
      input.timeoutSeconds === undefined || input.timeoutSeconds === null
        ? null
        : int(input.timeoutSeconds, 'timeout_seconds', 1, 86_400, 0),
  };
  return { spec, schedule };
}

/** A stable digest of a definition: equal digests mean an upsert changes nothing. */
export function definitionHash(spec: JobSpec): string {
  // A field added later is left out while unset, so that a definition written before it existed
  // keeps its digest (re-applying it stays `unchanged`).
  const { misfireThresholdSeconds, ...rest } = spec;
  const hashed = misfireThresholdSeconds === null ? rest : spec;
  return createHash('sha256').update(stableJson(hashed)).digest('hex');
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    );
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The shard a job belongs to: FNV-1a of `tenant/job_id`, modulo the shard count. */
export function shardOf(tenantId: string, jobId: string, shardCount: number): number {
  if (!Number.isInteger(shardCount) || shardCount < 1)
    throw new RangeError('shard count must be a positive integer');
  let h = 0x811c9dc5;
  const key = `${tenantId}/${jobId}`;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shardCount;
}

const API_FIELDS: Record<string, keyof JobInput> = {
  job_id: 'jobId',
  schedule: 'schedule',
  timezone: 'timezone',
  handler: 'handler',
  payload: 'payload',
  priority: 'priority',
  max_attempts: 'maxAttempts',
  backoff_base_seconds: 'backoffBaseSeconds',
  backoff_cap_seconds: 'backoffCapSeconds',
  misfire: 'misfire',
  catch_up_limit: 'catchUpLimit',
  misfire_threshold_seconds: 'misfireThresholdSeconds',
  pool: 'pool',
  lease_seconds: 'leaseSeconds',
  jitter_seconds: 'jitterSeconds',
  timeout_seconds: 'timeoutSeconds',
};

/**
 * Reads a job in the API's snake_case shape (HTTP bodies, job files) into a `JobInput`.
 * Unknown fields are a `ValidationError`; values are checked later by `validateJob`.
 */
export function jobInputFromApi(body: unknown): JobInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ValidationError('a job must be an object');
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    const field = API_FIELDS[key];
    if (!field) throw new ValidationError(`unknown job field "${key}"`, { field: key });
    out[field] = value;
  }
  return out as unknown as JobInput;
}

/**
 * The inverse of `jobInputFromApi`: a `JobInput` in the API's snake_case shape, without unset
 * fields. With `withId: false` the `job_id` is left out (a `PUT /v1/jobs/{job_id}` body).
 */
export function jobInputToApi(input: JobInput, options: { withId?: boolean } = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [apiField, field] of Object.entries(API_FIELDS)) {
    if (field === 'jobId' && options.withId === false) continue;
    const value = input[field];
    if (value !== undefined) out[apiField] = value;
  }
  return out;
}
