/**
 * The store's checks of what callers give it, shared by the table modules: each throws
 * `ValidationError` naming the field before any write. These protect the statements (an instant
 * PostgreSQL cannot hold, a malformed uuid) and so stay in the driver; checks of what a definition
 * means are the edges' (`validateJob`, the API schemas).
 */
import { resultText, ValidationError } from '../core/index.js';
import type { LeaseRef } from './types.js';

/** A run id, lease token or claim id: a uuid in its text form. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Uuids that passed `UUID` as one array literal (`{a,b}`), for a `uuid[]` parameter: the driver
 * would quote and escape each element on its own, a measurable share of a worker's CPU at tens of
 * thousands of runs a second. Only for checked uuids, which hold nothing a literal must escape.
 */
export const uuidArray = (ids: readonly string[]): string => `{${ids.join(',')}}`;

/** Finite numbers or nulls as one array literal (`{1.5,NULL}`), for a `float8[]` parameter. */
export const numberArray = (xs: readonly (number | null)[]): string =>
  `{${xs.map((x) => (x === null ? 'NULL' : String(x))).join(',')}}`;

/** A page size from 1 to `max` (default 500). */
export function checkLimit(limit: number, max = 500): number {
  if (!Number.isInteger(limit) || limit < 1 || limit > max) {
    throw new ValidationError(`limit must be an integer from 1 to ${max}`, { field: 'limit' });
  }
  return limit;
}

/** The first instant after the year 9999, epoch ms. */
const YEAR_10000_MS = Date.UTC(10000, 0, 1);

/** An instant (epoch ms) in the years 1970-9999, which PostgreSQL's timestamptz holds; as given. */
function checkInstantMs(ms: number, what: string): number {
  if (!Number.isFinite(ms)) throw new ValidationError(`${what} must be a finite instant`, { field: what });
  if (ms < 0 || ms >= YEAR_10000_MS) {
    throw new ValidationError(`${what} is outside the years 1970-9999`, { field: what });
  }
  return ms;
}

/** An instant (epoch ms) PostgreSQL's timestamptz holds, in the years 1970-9999. */
export function checkInstant(ms: number, what: string): Date {
  return new Date(checkInstantMs(ms, what));
}

/**
 * A handler start a worker reported, checked, as epoch ms (the statements take numbers: the driver
 * sends one in a third of the time a `Date` takes; and checking a number makes no `Date`, one per
 * run of a completion); null when it reported none.
 */
export function startedMsOf(ms: number | null | undefined): number | null {
  if (ms === undefined || ms === null) return null;
  return checkInstantMs(ms, 'started_at');
}

/**
 * Output, error and release-reason text as it is stored (`resultText`: the last 64 KiB, U+0000 and
 * unpaired surrogates replaced by U+FFFD), null when absent. The last line of defence: no text a
 * handler or an API caller sends can make these writes fail with SQLSTATE 22021 (a data error the
 * whole completion batch would share).
 */
export function storedText(text: string | null | undefined): string | null {
  return text === undefined || text === null ? null : resultText(String(text));
}

/**
 * Splits leases into well-formed ones (as the statements' parallel arrays of ids and tokens, in
 * order) and the run ids of the rest, which no statement could match: those are lost.
 */
export function checkLeases<L extends LeaseRef>(
  leases: readonly L[],
): { ids: string[]; tokens: string[]; invalid: string[]; valid: L[] } {
  const ids: string[] = [];
  const tokens: string[] = [];
  const invalid: string[] = [];
  const valid: L[] = [];
  for (const l of leases) {
    if (UUID.test(l.runId) && UUID.test(l.leaseToken)) {
      ids.push(l.runId);
      tokens.push(l.leaseToken);
      valid.push(l);
    } else {
      invalid.push(l.runId);
    }
  }
  return { ids, tokens, invalid, valid };
}
