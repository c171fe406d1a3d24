/** Statements on `api_keys` and `idempotency_keys`. */

/** $1 key id, $2 tenant, $3 role, $4 name, $5 secret hash, $6 now */
export const apiKeyInsert = `
INSERT INTO api_keys (key_id, tenant_id, role, name, secret_hash, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING key_id, tenant_id, role, name, created_at, revoked_at`;

/** $1 secret hash. A live key only. */
export const apiKeyBySecret = `
SELECT key_id, tenant_id, role, name, created_at, revoked_at FROM api_keys
WHERE secret_hash = $1 AND revoked_at IS NULL`;

/** $1 tenant */
export const apiKeyList = `
SELECT key_id, tenant_id, role, name, created_at, revoked_at FROM api_keys
WHERE tenant_id = $1 ORDER BY created_at, key_id`;

/**
 * $1 tenant, $2 key id, $3 now, $4 whether the caller may revoke a cluster-admin key (it has the
 * `cluster` permission, or is the database itself).
 * Revoking twice keeps the first revocation time. One row when the key is the tenant's: `revoked`
 * false (and the key's columns null) when it is a cluster-admin key and $4 is false, and nothing was
 * changed. No row: no such key in the tenant. A key's role never changes, so the check and the
 * update see the same role.
 */
export const apiKeyRevoke = `
WITH target AS (
  SELECT key_id FROM api_keys WHERE tenant_id = $1 AND key_id = $2
), revoked AS (
  UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3)
  WHERE tenant_id = $1 AND key_id = $2 AND (role <> 'cluster-admin' OR $4::boolean)
  RETURNING key_id, tenant_id, role, name, created_at, revoked_at
)
SELECT r.key_id IS NOT NULL AS revoked, r.key_id, r.tenant_id, r.role, r.name, r.created_at, r.revoked_at
FROM target t LEFT JOIN revoked r ON true`;

/** Whether any key exists (a server without keys refuses to start unless --insecure). */
export const apiKeyAny = `SELECT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL) AS any`;

/**
 * $1 tenant, $2 scope, $3 key, $4 request hash, $5 now, $6 not before (expiry).
 * Takes the key for a request in progress (status 0). Returns the row when taken; nothing when a
 * live entry (finished or in progress) holds the key. An expired entry is replaced.
 */
export const idempotencyClaim = `
INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, status, body, created_at)
VALUES ($1, $2, $3, $4, 0, 'null', $5)
ON CONFLICT (tenant_id, scope, key) DO UPDATE SET
  request_hash = EXCLUDED.request_hash, status = 0, body = 'null', created_at = EXCLUDED.created_at
WHERE idempotency_keys.created_at <= $6
RETURNING key`;

/** $1 tenant, $2 scope, $3 key, $4 not before (expiry). */
export const idempotencyGet = `
SELECT request_hash, status, body FROM idempotency_keys
WHERE tenant_id = $1 AND scope = $2 AND key = $3 AND created_at > $4`;

/** $1 tenant, $2 scope, $3 key, $4 request hash, $5 status, $6 body. Records the answer of the request that took the key. */
export const idempotencyFinish = `
UPDATE idempotency_keys SET status = $5, body = $6
WHERE tenant_id = $1 AND scope = $2 AND key = $3 AND request_hash = $4 AND status = 0`;

/** $1 tenant, $2 scope, $3 key. Frees a key whose request failed unexpectedly, so a retry can run. */
export const idempotencyRelease = `
DELETE FROM idempotency_keys WHERE tenant_id = $1 AND scope = $2 AND key = $3 AND status = 0`;

/** $1 expiry, $2 batch. Deletes expired entries in bounded batches. */
export const idempotencyPrune = `
DELETE FROM idempotency_keys WHERE ctid IN (
  SELECT ctid FROM idempotency_keys WHERE created_at <= $1 LIMIT $2
)`;
