/**
 * The `api_keys` table. A key's secret is shown once, at creation; only its hash is stored, and a
 * key is found by that hash. Revoking keeps the first revocation time, and a cluster-admin key can
 * be revoked only by a role with the `cluster` permission or by the database itself.
 */
import {
  allows,
  badTextAt,
  describeBadText,
  hashSecret,
  KEY_PREFIX,
  keyOfRole,
  NotFoundError,
  newApiKey,
  parseRole,
  type Role,
  TockError,
  ValidationError,
  validateId,
} from '../core/index.js';
import { checkInstant } from './checks.js';
import * as A from './queries/api.js';
import { type Queryable, toApiKey } from './rows.js';
import type { ApiKey } from './types.js';

export async function createApiKey(
  db: Queryable,
  p: { tenantId: string; role: Role; name?: string; now: number },
): Promise<{ key: ApiKey; secret: string }> {
  const tenantId = validateId(p.tenantId, 'tenant_id');
  const role = parseRole(p.role);
  const name = p.name ?? '';
  if (typeof name !== 'string' || name.length > 200)
    throw new ValidationError('name must be at most 200 characters', { field: 'name' });
  const bad = badTextAt(name, 'name');
  if (bad) throw new ValidationError(describeBadText(bad), { field: 'name' });
  const { keyId, secret } = newApiKey();
  const { rows } = await db.query(A.apiKeyInsert, [
    keyId,
    tenantId,
    role,
    name,
    hashSecret(secret),
    checkInstant(p.now, 'now'),
  ]);
  return { key: toApiKey(rows[0]), secret };
}

/** The live key with this secret, or null (not a key's shape, unknown, or revoked). */
export async function authenticate(db: Queryable, p: { secret: string }): Promise<ApiKey | null> {
  const { secret } = p;
  if (typeof secret !== 'string' || !secret.startsWith(KEY_PREFIX) || secret.length > 200) return null;
  const { rows } = await db.query(A.apiKeyBySecret, [hashSecret(secret)]);
  return rows[0] ? toApiKey(rows[0]) : null;
}

export async function listApiKeys(db: Queryable, p: { tenantId: string }): Promise<ApiKey[]> {
  const { rows } = await db.query(A.apiKeyList, [p.tenantId]);
  return rows.map(toApiKey);
}

export async function revokeApiKey(
  db: Queryable,
  p: { tenantId: string; keyId: string; now: number; by: Role | 'database' },
): Promise<ApiKey> {
  const mayRevokeCluster = p.by === 'database' || allows(parseRole(p.by), 'cluster');
  const { rows } = await db.query(A.apiKeyRevoke, [
    p.tenantId,
    p.keyId,
    checkInstant(p.now, 'now'),
    mayRevokeCluster,
  ]);
  if (!rows[0]) throw new NotFoundError(`key ${p.keyId} does not exist`, { key_id: p.keyId });
  if (!rows[0].revoked) {
    throw new TockError(
      'forbidden',
      `${keyOfRole(p.by)} may not revoke a cluster-admin key: that needs a cluster-admin key or the database`,
      { key_id: p.keyId },
    );
  }
  return toApiKey(rows[0]);
}

/** Whether any live key exists. */
export async function hasApiKeys(db: Queryable): Promise<boolean> {
  const { rows } = await db.query(A.apiKeyAny);
  return rows[0].any === true;
}
