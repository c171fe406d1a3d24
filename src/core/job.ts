/**
 * Job definitions: validation and defaults, pure, from the field table `JOB_FIELDS`
 * (`fields/job.ts`). A definition is checked completely before any write, so bad input is a
 * `ValidationError` that names the field and nothing is stored.
 */
import { createHash } from 'node:crypto';
import { ValidationError } from './errors.js';
import { answerOf, type Field } from './fields/field.js';
import {
  JOB_FIELDS,
  JOB_KEY_PREFIX,
  type JobDefinitionJson,
  type JobField,
  type JobInputFields,
  type JobSpecFields,
  TENANT_KEY_PREFIX,
} from './fields/job.js';
import { checkPayloadAgainst, checkPayloadSchema } from './payload-schema.js';
import { checkRetention } from './retention.js';
import { isValidTimezone, parseSchedule, type Schedule } from './schedule/schedule.js';
import { badTextAt, describeBadText } from './text.js';

export { MAX_MISFIRE_THRESHOLD_SECONDS, MAX_PAYLOAD_BYTES } from './fields/job.js';

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

/** What a caller gives to register or update a job. Unset fields take their defaults (`JOB_FIELDS`). */
export interface JobInput extends JobInputFields {}

/** A validated definition with every default applied. */
export interface JobSpec extends JobSpecFields {}

/** The misfire threshold of jobs that set none, unless the scheduler is given another, ms. */
export const DEFAULT_MISFIRE_THRESHOLD_MS = 60_000;

const PROPERTIES = Object.keys(JOB_FIELDS) as JobField[];
const KNOWN_FIELDS = new Set<string>(PROPERTIES);
/**
 * The fields checked first, in this order (the rest follow in the table's order): which error a
 * definition with several bad fields gets. `timezone` comes before `schedule`, which is read in it.
 */
const CHECKED_FIRST: readonly JobField[] = [
  'jobId',
  'handler',
  'pool',
  'timezone',
  'schedule',
  'payload',
  'misfire',
  'leaseSeconds',
];
const CHECK_ORDER: readonly JobField[] = [
  ...CHECKED_FIRST,
  ...PROPERTIES.filter((p) => !CHECKED_FIRST.includes(p)),
];

/** An integer from `min` to `max`, or a `ValidationError` naming `what` and the bounds. */
export function checkInteger(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(`${what} must be an integer from ${min} to ${max}`, { field: what });
  }
  return value;
}

/** A finite number from `min` to `max`, or a `ValidationError` naming `what` and the bounds. */
export function checkNumber(value: unknown, what: string, min: number, max: number): number {
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

/** A JSON value: serialisable, no text jsonb cannot store, no more than `maxBytes` serialised; a copy. */
function checkJson(value: unknown, what: string, maxBytes: number): unknown {
  let serialised: string | undefined;
  try {
    serialised = JSON.stringify(value);
  } catch {
    serialised = undefined;
  }
  if (serialised === undefined) throw new ValidationError(`${what} must be JSON`, { field: what });
  // Refused, not changed: `\u0000` and lone surrogates are what jsonb cannot store, and a
  // non-finite number would silently become `null` (nothing in a payload is coerced).
  const bad = badTextAt(value, what);
  if (bad) throw new ValidationError(describeBadText(bad), { field: bad.path });
  if (Buffer.byteLength(serialised) > maxBytes) {
    throw new ValidationError(`${what} is larger than ${maxBytes} bytes`, { field: what });
  }
  return JSON.parse(serialised);
}

/** One given field's value checked against its entry of `JOB_FIELDS`; an omitted one, its default. */
function checkField(f: Field, value: unknown): unknown {
  // A required field has no default: when missing, it is refused as the wrong type below. A JSON
  // default is checked like a given value, so that each spec holds its own copy.
  if (value === undefined && 'default' in f) {
    if (f.type !== 'json') return f.default;
    value = f.default;
  } else if (value === null && f.nullable) return null;
  const what = f.api;
  switch (f.type) {
    case 'id':
      return validateId(value, what);
    case 'string':
      if (typeof value !== 'string') throw new ValidationError(`${what} must be a string`, { field: what });
      return value;
    case 'integer':
      return checkInteger(value, what, f.min ?? Number.MIN_SAFE_INTEGER, f.max ?? Number.MAX_SAFE_INTEGER);
    case 'number':
      return checkNumber(value, what, f.min ?? -Number.MAX_VALUE, f.max ?? Number.MAX_VALUE);
    case 'enum': {
      if (typeof value !== 'string') throw new ValidationError(`${what} must be a string`, { field: what });
      const values = f.values ?? [];
      if (values.includes(value)) return value;
      throw new ValidationError(`${what} "${value}" is not one of ${values.join(', ')}`, { field: what });
    }
    case 'json':
      return checkJson(value, what, f.maxBytes ?? Number.POSITIVE_INFINITY);
    case 'ids':
      return checkIds(value, what, f.maxItems ?? Number.POSITIVE_INFINITY);
  }
}

/** A list of distinct ids, at most `maxItems`; a copy. */
function checkIds(value: unknown, what: string, maxItems: number): string[] {
  if (!Array.isArray(value) || value.length > maxItems) {
    throw new ValidationError(`${what} must be a list of at most ${maxItems} ids`, { field: what });
  }
  const ids = value.map((v, i) => validateId(v, `${what}[${i}]`));
  const dup = ids.find((id, i) => ids.indexOf(id) !== i);
  if (dup !== undefined) throw new ValidationError(`${what} names "${dup}" twice`, { field: what });
  return ids;
}

/**
 * A payload checked as a job's `payload` field is (JSON, at most `MAX_PAYLOAD_BYTES` serialised, no
 * text PostgreSQL refuses, finite numbers): for a run given its own payload. A copy; `undefined`
 * (no payload given) is refused.
 */
export function checkPayload(value: unknown): unknown {
  if (value === undefined) throw new ValidationError('payload must be JSON', { field: 'payload' });
  return checkField(JOB_FIELDS.payload, value);
}

/** Validates a definition and applies defaults; also returns the parsed schedule. */
export function validateJob(input: JobInput): { spec: JobSpec; schedule: Schedule } {
  if (typeof input !== 'object' || input === null) throw new ValidationError('job must be an object');
  for (const key of Object.keys(input)) {
    if (!KNOWN_FIELDS.has(key)) throw new ValidationError(`unknown job field "${key}"`, { field: key });
  }
  const given = input as unknown as Record<JobField, unknown>;
  const checked: Partial<Record<JobField, unknown>> = {};
  let schedule: Schedule | undefined;
  for (const property of CHECK_ORDER) {
    checked[property] = checkField(JOB_FIELDS[property], given[property]);
    if (property === 'schedule') {
      // The schedule is parsed in the timezone (checked before it): an error is the timezone's
      // when that is no zone at all.
      const timezone = checked.timezone as string;
      schedule = withField(isValidTimezone(timezone) ? 'schedule' : 'timezone', () =>
        parseSchedule(checked.schedule as string, timezone),
      );
      checked.schedule = schedule.source;
    }
  }
  checkBacklogFields(checked as Record<JobField, unknown>);
  checkPayloadFields(checked as Record<JobField, unknown>);
  if (checked.retention !== null) checked.retention = checkRetention(checked.retention);
  // The spec's keys in the table's order, whatever order they were checked in.
  const spec = Object.fromEntries(PROPERTIES.map((p) => [p, checked[p]])) as unknown as JobSpec;
  const result = { spec, schedule: schedule as Schedule };
  validated.add(result);
  return result;
}

/**
 * Overlap `skip` or `queue` lets one run of the job run at a time: a `max_concurrency` above 1
 * would say otherwise, so it is refused. A job lists named limits only: its tenant's and its own
 * gates apply without being listed.
 */
function checkBacklogFields(checked: Record<JobField, unknown>): void {
  const cap = checked.maxConcurrency as number | null;
  if (checked.overlap !== 'allow' && cap !== null && cap > 1) {
    throw new ValidationError(
      `max_concurrency ${cap} contradicts overlap "${checked.overlap}", which runs one at a time`,
      { field: 'max_concurrency' },
    );
  }
  for (const [i, k] of (checked.limits as string[]).entries()) {
    if (k.startsWith(JOB_KEY_PREFIX) || k.startsWith(TENANT_KEY_PREFIX)) {
      throw new ValidationError(
        `limits[${i}] "${k}": a job lists named limits; its tenant's limit and its own cap apply without being listed`,
        { field: `limits[${i}]` },
      );
    }
  }
}

/**
 * A payload schema must be one (a JSON Schema object ajv compiles), and the job's own payload, what
 * its scheduled runs get, must match it: a definition that fails its own schema is refused.
 */
function checkPayloadFields(checked: Record<JobField, unknown>): void {
  if (checked.payloadSchema === null) return;
  checkPayloadSchema(checked.payloadSchema);
  checkPayloadAgainst(checked.payloadSchema, checked.payload);
}

/** The results of `validateJob`, by identity. */
const validated = new WeakSet<object>();

/**
 * Whether `job` is a result of `validateJob` (or `validateJobs`) itself: an object of the same shape
 * made any other way (a caller's `{ spec, schedule }`) is not, and is validated like any input.
 */
export function isValidatedJob(job: unknown): boolean {
  return typeof job === 'object' && job !== null && validated.has(job);
}

/** A stable digest of a definition: equal digests mean an upsert changes nothing. */
export function definitionHash(spec: JobSpec): string {
  // A field added later is left out while it has its default, so that a definition written
  // before it existed keeps its digest (re-applying it stays `unchanged`).
  const hashed: Record<string, unknown> = { ...spec };
  for (const property of PROPERTIES) {
    const f: Field = JOB_FIELDS[property];
    if (f.hashedOnlyWhenSet && stableJson(hashed[property]) === stableJson(f.default))
      delete hashed[property];
  }
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

/** API name → property, from the table. */
const API_FIELDS: ReadonlyMap<string, JobField> = new Map(PROPERTIES.map((p) => [JOB_FIELDS[p].api, p]));

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
    const field = API_FIELDS.get(key);
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
  for (const [apiField, field] of API_FIELDS) {
    if (field === 'jobId' && options.withId === false) continue;
    const value = (input as unknown as Record<JobField, unknown>)[field];
    if (value !== undefined) out[apiField] = value;
  }
  return out;
}

/**
 * Every definition field of a validated or stored job in the API's snake_case (the definition
 * part of the API's job answer).
 */
export function jobSpecToApi(spec: JobSpecFields): JobDefinitionJson {
  return answerOf(JOB_FIELDS, spec);
}
