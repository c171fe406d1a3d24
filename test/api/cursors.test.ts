/**
 * Forged cursors (review of issue 14, item 1): a cursor is base64url JSON, so the text guard on the
 * query string never sees what it decodes to. A cursor decoding to U+0000, an unpaired surrogate or
 * an instant outside 1970-9999 answers 400 `validation_error` on every paged route (never a 500 from
 * PostgreSQL, never a silent U+FFFD).
 */
import { afterAll, beforeAll, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, startApi } from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

const cursor = (parts: unknown[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');

const forged: [string, unknown[]][] = [
  ['/v1/jobs', ['a\u0000b']],
  ['/v1/jobs', ['a\ud800b']],
  ['/v1/status', ['worker\u0000', 1_700_000_000_000, 'x']],
  ['/v1/status', ['worker', 1_700_000_000_000, 'x\u0000']],
  ['/v1/status', ['worker', 1e300, 'x']],
  ['/v1/status', ['worker', -1e15, 'x']],
];

test.each(forged)('GET %s with a forged cursor %j answers 400', async (path, parts) => {
  for (const key of [keys.admin, keys['cluster-admin']]) {
    expectError(await http('GET', `${path}?cursor=${cursor(parts)}`, { key }), 400, 'validation_error');
  }
});
