/**
 * The fields of an API key as the API answers them (never its secret, shown once at creation), in
 * the API's order: the answer schema, the mapping from the store and the client's type derive
 * from this table.
 */
import { ROLES } from '../keys.js';
import type { AnswerFields, AnswerOf, StoredOf } from './field.js';

export const API_KEY_FIELDS = {
  keyId: { api: 'key_id', type: 'string' },
  tenantId: { api: 'tenant_id', type: 'string' },
  role: { api: 'role', type: 'string', values: ROLES },
  name: { api: 'name', type: 'string' },
  createdAt: { api: 'created_at', type: 'instant', answerDescription: 'created' },
  revokedAt: { api: 'revoked_at', type: 'instant', nullable: true, answerDescription: 'revoked' },
} as const satisfies AnswerFields;

/** An API key in an API answer. */
export type ApiKeyJson = AnswerOf<typeof API_KEY_FIELDS>;
/** What a key's answer is made from. */
export type StoredApiKey = StoredOf<typeof API_KEY_FIELDS>;
