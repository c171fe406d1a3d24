/** API keys as an operator reads them: `tock keys list`, and a key just created. */
import type * as Api from '../../client/index.js';
import { formatFields, formatTable } from './table.js';

/** Keys a row each (never their secrets). */
export function keyTable(keys: readonly Api.ApiKey[]): string {
  if (keys.length === 0) return 'no keys\n';
  return formatTable(
    ['KEY', 'ROLE', 'NAME', 'CREATED', 'REVOKED'],
    keys.map((k) => [k.key_id, k.role, k.name === '' ? null : k.name, k.created_at, k.revoked_at]),
  );
}

/** A new key's details, then the secret alone on the last line. */
export function createdKeyText(k: Api.CreatedKey): string {
  const fields = formatFields([
    ['key_id', k.key_id],
    ['tenant_id', k.tenant_id],
    ['role', k.role],
    ['name', k.name === '' ? null : k.name],
    ['created_at', k.created_at],
  ]);
  return `${fields}${k.key}\n`;
}
