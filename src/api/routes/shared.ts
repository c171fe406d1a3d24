/** What the route modules share: paging, the error responses, body hashing. */
import { createHash } from 'node:crypto';
import { ValidationError } from '../../core/index.js';
import * as S from '../schemas.js';

export const errors = { '4xx': S.ErrorBody };

export function limitOf(query: { limit?: string }): number {
  if (query.limit === undefined) return 50;
  const n = Number(query.limit);
  if (!Number.isInteger(n) || n < 1 || n > 500)
    throw new ValidationError('limit must be an integer from 1 to 500', { field: 'limit' });
  return n;
}

export function hashBody(body: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(body ?? null))
    .digest('hex');
}
