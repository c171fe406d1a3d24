/** What the route modules share: the error responses of every route, a list's page size. */
import { ValidationError } from '../../core/index.js';
import * as S from '../schemas.js';

export const errors = { '4xx': S.ErrorBody };

/** A list's `limit` (1 to 500), or `fallback` (default 50) when none is given. */
export function limitOf(query: { limit?: string }, fallback = 50): number {
  if (query.limit === undefined) return fallback;
  const n = Number(query.limit);
  if (!Number.isInteger(n) || n < 1 || n > 500)
    throw new ValidationError('limit must be an integer from 1 to 500', { field: 'limit' });
  return n;
}
