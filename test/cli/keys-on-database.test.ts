/**
 * `createKeyOnDatabase` (src/runtime/keys.ts), what `tock keys create --tenant` runs: a key
 * written straight to the database, in the schema asked for, that the store then authenticates;
 * and no key, and no embedded database, where none exists. The binary's paths are in
 * test/e2e/embedded.test.ts.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FakeClock, ValidationError } from '../../src/core/index.js';
import { createKeyOnDatabase } from '../../src/runtime/keys.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';

const logger = pino({ level: 'silent' });
let db: TestDatabase;
let dir: string;

beforeAll(async () => {
  db = await setupDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'tock-keys-'));
});

afterAll(async () => {
  await db.teardown();
  await rm(dir, { recursive: true, force: true });
});

describe('createKeyOnDatabase', () => {
  test('writes a key in the schema asked for, stamped by the clock, that the store authenticates', async () => {
    const made = await createKeyOnDatabase({
      tenantId: 'acme',
      role: 'admin',
      name: 'first',
      databaseUrl: db.url,
      schema: db.schema,
      logger,
      clock: new FakeClock(T0),
    });
    expect(made.where).toContain(`(schema ${db.schema})`);
    expect(made.key).toMatchObject({ tenantId: 'acme', role: 'admin', name: 'first', revokedAt: null });
    expect(made.key.createdAt.getTime()).toBe(T0);
    expect(await db.store.authenticate(made.secret)).toEqual(made.key);
  });

  test('refuses a bad tenant with the validation error, writing nothing', async () => {
    const keys = async () => (await db.pool.query('SELECT count(*)::int AS n FROM api_keys')).rows[0].n;
    const before = await keys();
    const made = createKeyOnDatabase({
      tenantId: 'not a tenant',
      role: 'reader',
      databaseUrl: db.url,
      schema: db.schema,
      logger,
    });
    await expect(made).rejects.toBeInstanceOf(ValidationError);
    expect(await keys()).toBe(before);
  });

  test('without a connection string, a data directory that holds no database is refused, not created', async () => {
    const dataDir = path.join(dir, 'nowhere');
    await expect(createKeyOnDatabase({ tenantId: 'acme', role: 'admin', dataDir, logger })).rejects.toThrow(
      `no database to write the key to: ${dataDir} holds no embedded database`,
    );
    expect(existsSync(dataDir)).toBe(false);
  });
});
