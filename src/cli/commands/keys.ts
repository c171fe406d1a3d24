/**
 * `tock keys …`: create, list and revoke API keys over the HTTP API, and `keys create --tenant`,
 * which writes a tenant's first key straight to the database (src/runtime/keys.ts).
 */
import type { Command } from 'commander';
import type { CreatedKey } from '../../client/index.js';
import { TockError } from '../../core/index.js';
import { type ApiOptions, apiAction, clientOf, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { createdKeyText, keyTable } from '../format/keys.js';

type CreateOptions = OptionsFor<'keys create'>;

/** A new key's details, then the secret alone on the last line; or the JSON document. */
function printCreatedKey(k: CreatedKey, asJson: boolean): void {
  if (asJson) {
    printJson(k);
    return;
  }
  process.stderr.write('the key is shown once: store it now\n');
  write(createdKeyText(k));
}

/** `keys create --tenant`: the key goes straight to the database, which it names. */
async function createOnDatabase(tenantId: string, o: CreateOptions, cmd: Command): Promise<void> {
  const [{ createLogger }, { createKeyOnDatabase }] = await Promise.all([
    import('../../runtime/logger.js'),
    import('../../runtime/keys.js'),
  ]);
  // Logs go to stderr, so stdout is the key's details and the key; quiet unless asked.
  const level = cmd.getOptionValueSource('logLevel') === 'default' ? 'warn' : o.logLevel;
  const logger = createLogger(o.logFormat, level, { stderr: true });
  const { key, secret, where } = await createKeyOnDatabase({
    tenantId,
    role: o.role,
    name: o.name,
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    logger,
  }).catch((err: unknown) => {
    throw err instanceof TockError ? new Error(err.message) : err;
  });
  const created: CreatedKey = {
    key_id: key.keyId,
    tenant_id: key.tenantId,
    role: key.role,
    name: key.name,
    created_at: key.createdAt.toISOString(),
    revoked_at: key.revokedAt === null ? null : key.revokedAt.toISOString(),
    key: secret,
  };
  // Say which database holds the key: a key in a database no server reads answers 401.
  if (o.json) return printJson({ ...created, database: where });
  process.stderr.write(`key created in ${where}\n`);
  printCreatedKey(created, false);
}

async function create(o: CreateOptions, cmd: Command): Promise<void> {
  if (o.tenant !== undefined) return createOnDatabase(o.tenant, o, cmd);
  const key = await clientOf(o).createKey({ role: o.role, name: o.name });
  printCreatedKey(key, o.json);
}

async function list(o: ApiOptions): Promise<void> {
  const answer = await clientOf(o).listKeys();
  if (o.json) return printJson(answer);
  write(keyTable(answer.keys));
}

async function revoke(keyId: string, o: ApiOptions): Promise<void> {
  const key = await clientOf(o).revokeKey(keyId);
  if (o.json) return printJson(key);
  write(`revoked key ${key.key_id} (${key.role}${key.name ? `, ${key.name}` : ''})\n`);
}

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description("manage the API keys of the caller's tenant");
  defineCommand(
    keys,
    'keys create',
    'create an API key and print it once, alone on the last line. With --tenant it writes to the database directly (DATABASE_URL, or the existing embedded one under --data-dir), says which, and makes the first key of a tenant; without, it asks the server with an admin --key',
  ).action(apiAction(create));
  defineCommand(keys, 'keys list', "list the tenant's keys (never their secrets)").action(apiAction(list));
  defineCommand(keys, 'keys revoke', 'revoke a key: requests made with it are refused from now on', [
    ['<key_id>', 'the key, e.g. key_1a2b3c4d5e6f (not the secret)'],
  ]).action(apiAction(revoke));
}
