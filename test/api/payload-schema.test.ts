/**
 * A job's `payload_schema` over real HTTP: stored with the job and shown by GET; refused when it is
 * no schema, too large, or its job's own payload fails it; and every trigger's payload checked
 * against it, a mismatch being a 400 naming the failing path with nothing written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

const SCHEMA = {
  type: 'object',
  required: ['user_id'],
  properties: { user_id: { type: 'integer', minimum: 1 }, note: { type: 'string', maxLength: 20 } },
  additionalProperties: false,
};

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

async function put(jobId: string, body: Record<string, unknown>) {
  return http('PUT', `/v1/jobs/${jobId}`, { key: keys.operator, body });
}

const trigger = (jobId: string, body: Record<string, unknown>) =>
  http('POST', `/v1/jobs/${jobId}/runs`, { key: keys.operator, body });

describe('payload_schema', () => {
  test('is stored with the job, shown by GET, and a re-PUT of the same definition is unchanged', async () => {
    const body = { schedule: '@every 1h', handler: 'mail', payload: { user_id: 1 }, payload_schema: SCHEMA };
    const created = await put('mail', body);
    expect(created.status, created.text).toBe(200);
    expect(created.json.payload_schema).toEqual(SCHEMA);
    const got = await http('GET', '/v1/jobs/mail', { key: keys.reader });
    expect(got.json.payload_schema).toEqual(SCHEMA);
    expect((await put('mail', body)).json.change).toBe('unchanged');
    // A job without one shows null.
    await put('plain', { schedule: '@every 1h', handler: 'plain' });
    expect((await http('GET', '/v1/jobs/plain', { key: keys.reader })).json.payload_schema).toBeNull();
  });

  test("a trigger whose payload fails the job's schema is a 400 naming the path, and writes nothing", async () => {
    const before = await snapshot(db.pool);
    const wrongType = await trigger('mail', { payload: { user_id: 'seven' } });
    expectError(wrongType, 400, 'validation_error');
    expect(wrongType.json.error.message).toBe(
      "payload.user_id does not match the job's payload_schema: must be integer",
    );
    const missing = await trigger('mail', { payload: { note: 'hi' } });
    expectError(missing, 400, 'validation_error');
    expect(missing.json.error.message).toMatch(/^payload\.user_id does not match/);
    const extra = await trigger('mail', { payload: { user_id: 2, admin: true } });
    expectError(extra, 400, 'validation_error');
    expect(extra.json.error.message).toMatch(/must NOT have additional properties/);
    // An Idempotency-Key does not keep a refusal: the same key with a good payload then runs.
    const keyed = await http('POST', '/v1/jobs/mail/runs', {
      key: keys.operator,
      body: { payload: { user_id: 0 } },
      headers: { 'idempotency-key': 'k-1' },
    });
    expectError(keyed, 400, 'validation_error');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('a trigger whose payload matches is a 201 with that payload; without one the run has the job’s', async () => {
    const good = await trigger('mail', { payload: { user_id: 42, note: 'hello' } });
    expect(good.status, good.text).toBe(201);
    expect(good.json.payload).toEqual({ user_id: 42, note: 'hello' });
    db.clock.advance(1000);
    const bare = await http('POST', '/v1/jobs/mail/runs', { key: keys.operator });
    expect(bare.status, bare.text).toBe(201);
    expect(bare.json.payload).toEqual({ user_id: 1 });
  });

  test('a job without a schema takes any payload, as before', async () => {
    for (const payload of [{ anything: ['goes', 1] }, 'text', 5, null]) {
      db.clock.advance(1000);
      const a = await trigger('plain', { payload });
      expect(a.status, a.text).toBe(201);
    }
  });

  test('a definition is refused when the schema is none, too large or remote, or its payload fails it', async () => {
    const before = await snapshot(db.pool);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ payload_schema: 'object' }, /^payload_schema must be a JSON Schema object/],
      [{ payload_schema: { type: 'bogus' } }, /^payload_schema is not a valid JSON Schema/],
      [
        { payload_schema: { $ref: 'https://example.com/s.json' } },
        /^payload_schema is not a valid JSON Schema/,
      ],
      [
        { payload_schema: { type: 'object', description: 'x'.repeat(16 * 1024) } },
        /^payload_schema is larger than 16384 bytes/,
      ],
      [{ payload_schema: SCHEMA }, /^payload\.user_id does not match the job's payload_schema/],
      [{ payload: { user_id: 1, x: 1 }, payload_schema: SCHEMA }, /additional properties/],
    ];
    for (const [extra, message] of cases) {
      const a = await put('refused', { schedule: '@every 1h', handler: 'h', ...extra });
      expectError(a, 400, 'validation_error');
      expect(a.json.error.message).toMatch(message);
    }
    // In a bulk PUT too, naming the job's index.
    const bulk = await http('PUT', '/v1/jobs', {
      key: keys.operator,
      body: { jobs: [{ job_id: 'bulk', schedule: '@every 1h', handler: 'h', payload_schema: SCHEMA }] },
    });
    expectError(bulk, 400, 'validation_error');
    expect(bulk.json.error.message).toMatch(/^jobs\[0\]: payload\.user_id does not match/);
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('removing the schema (null) takes any payload again', async () => {
    const a = await put('mail', {
      schedule: '@every 1h',
      handler: 'mail',
      payload: { user_id: 1 },
      payload_schema: null,
    });
    expect(a.json.change).toBe('updated');
    db.clock.advance(1000);
    expect((await trigger('mail', { payload: { user_id: 'any' } })).status).toBe(201);
  });
});
