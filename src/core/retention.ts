/**
 * Retention: how long a finished run is kept, by the state it ended in, before the pruner deletes
 * it with its attempts and reports. A tenant has defaults (`PUT /v1/retention`), a job may override
 * some states (its `retention` field); a state neither sets takes `DEFAULT_RETENTION`. A pending
 * or running run is never pruned, whatever its age.
 *
 * Values are durations in the canonical form `formatDuration` writes (`7d`, `12h30m`), which the
 * store hands to PostgreSQL as intervals, or `forever`.
 */
import { formatDuration, parseDuration } from './duration.js';
import { ValidationError } from './errors.js';

/** The states a run ends in, each with its own retention. */
export const RETENTION_STATES = ['succeeded', 'dead', 'cancelled', 'skipped'] as const;
export type RetentionState = (typeof RETENTION_STATES)[number];

/** Keep a finished run without end. */
export const FOREVER = 'forever';

/** Some states' retention: a canonical duration or `forever` each. */
export type Retention = Partial<Record<RetentionState, string>>;

/**
 * The built-in defaults: a week of history, a month of dead letters (an operator may still want
 * to replay them).
 */
export const DEFAULT_RETENTION: Readonly<Record<RetentionState, string>> = Object.freeze({
  succeeded: '7d',
  dead: '30d',
  cancelled: '7d',
  skipped: '7d',
});

/** Shortest retention: a run finished a second ago is still there for its caller to read. */
export const MIN_RETENTION_MS = 1000;

/** One state's value checked: a duration of at least a second and at most a year, or `forever`; canonical. */
export function checkRetentionValue(value: unknown, what: string): string {
  if (value === FOREVER) return FOREVER;
  if (typeof value !== 'string')
    throw new ValidationError(`${what} must be a duration such as "7d" or "forever"`, { field: what });
  let ms: number;
  try {
    ms = parseDuration(value, what);
  } catch (err) {
    throw err instanceof ValidationError ? new ValidationError(err.message, { field: what }) : err;
  }
  if (ms < MIN_RETENTION_MS)
    throw new ValidationError(`${what} "${value}" is shorter than a second`, { field: what });
  return formatDuration(ms);
}

/**
 * A retention object checked: only the states of `RETENTION_STATES`, each a duration or `forever`.
 * Returns a canonical copy (`168h` becomes `7d`), states in `RETENTION_STATES`' order.
 */
export function checkRetention(value: unknown, what = 'retention'): Retention {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError(
      `${what} must be an object of states (${RETENTION_STATES.join(', ')}) to durations or "forever"`,
      { field: what },
    );
  const given = value as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!(RETENTION_STATES as readonly string[]).includes(key))
      throw new ValidationError(
        `${what} has no state "${key}": finished runs are ${RETENTION_STATES.join(', ')}`,
        { field: `${what}.${key}` },
      );
  }
  const out: Retention = {};
  for (const state of RETENTION_STATES) {
    if (given[state] !== undefined) out[state] = checkRetentionValue(given[state], `${what}.${state}`);
  }
  return out;
}

/** A canonical value in ms; `forever` is null. */
export function retentionMs(value: string): number | null {
  return value === FOREVER ? null : parseDuration(value);
}

/** The retention in force for each state: the job's value, else the tenant's, else the default. */
export function effectiveRetention(
  tenant: Retention | null,
  job: Retention | null = null,
): Record<RetentionState, string> {
  const out = { ...DEFAULT_RETENTION };
  for (const state of RETENTION_STATES) {
    const value = job?.[state] ?? tenant?.[state];
    if (value !== undefined) out[state] = value;
  }
  return out;
}

/**
 * The shortest retention in force for any of a tenant's runs, ms: its settings (with defaults) and
 * `jobsShortestMs`, the shortest override among its jobs (null: none); null when every value is
 * `forever`. The pruner looks at no run scheduled after `now −` this: none can have expired (a run
 * ends after its slot; one that ended early is pruned once its slot is that old).
 */
export function shortestRetentionMs(tenant: Retention | null, jobsShortestMs: number | null): number | null {
  let shortest = jobsShortestMs;
  for (const value of Object.values(effectiveRetention(tenant))) {
    const ms = retentionMs(value);
    if (ms !== null && (shortest === null || ms < shortest)) shortest = ms;
  }
  return shortest;
}
