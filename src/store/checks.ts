/**
 * The store's checks of what callers give it, shared by `PostgresStore` and the modules it
 * delegates to (`claims.ts`): each throws `ValidationError` naming the field before any write.
 */
import { ValidationError } from '../core/index.js';

/** A run id, lease token or claim id: a uuid in its text form. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A page size from 1 to `max` (default 500). */
export function checkLimit(limit: number, max = 500): number {
  if (!Number.isInteger(limit) || limit < 1 || limit > max) {
    throw new ValidationError(`limit must be an integer from 1 to ${max}`, { field: 'limit' });
  }
  return limit;
}

/** An instant (epoch ms) PostgreSQL's timestamptz holds, in the years 1970-9999. */
export function checkInstant(ms: number, what: string): Date {
  if (!Number.isFinite(ms)) throw new ValidationError(`${what} must be a finite instant`, { field: what });
  const d = new Date(ms);
  if (Number.isNaN(d.getTime()) || d.getUTCFullYear() < 1970 || d.getUTCFullYear() > 9999) {
    throw new ValidationError(`${what} is outside the years 1970-9999`, { field: what });
  }
  return d;
}
