/**
 * Bad requests, table-driven, over real HTTP. Each row is sent raw (body text byte for byte) and
 * must answer its status with the envelope `{error: {code, message}}` and its code, never a 500,
 * and leave every table exactly as it was: a digest of jobs, runs, attempts, api_keys and
 * idempotency_keys is taken once before the table and compared after every row. The fixtures are
 * live (a claimable pending run, a job, keys), so a request wrongly accepted would show up as a
 * changed digest.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Role } from '../../src/core/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, call, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

type Who = `${'acme' | 'globex'}.${Role}` | 'none' | 'forged' | 'revoked';

interface Row {
  name: string;
  method: string;
  /** `{run}` is acme's pending run, `{key}` acme's reader key id. */
  path: string;
  /** Sent raw with `Content-Type: application/json` unless `headers` say otherwise. */
  body?: string;
  headers?: Record<string, string>;
  /** Whose key; default `acme.admin`. */
  as?: Who;
  expectStatus: number;
  expectCode: string;
  /** A fragment the message must contain. */
  message?: string;
  /** For a slot conflict: the run the error must name (`{run}`). */
  runId?: string;
}

const SLOT = '2025-12-31T23:00:00.000Z';
const job = (fields: Record<string, unknown>) =>
  JSON.stringify({ schedule: '@every 10s', handler: 'h', ...fields });
const PUT = (name: string, body: string, extra: Partial<Row> = {}): Row => ({
  name,
  method: 'PUT',
  path: '/v1/jobs/new-job',
  body,
  expectStatus: 400,
  expectCode: 'validation_error',
  ...extra,
});
const schedule = (name: string, s: string, message: string, tz?: string): Row =>
  PUT(name, JSON.stringify({ schedule: s, handler: 'h', ...(tz ? { timezone: tz } : {}) }), { message });
const v400 = (name: string, method: string, path: string, body?: string, extra: Partial<Row> = {}): Row => ({
  name,
  method,
  path,
  body,
  expectStatus: 400,
  expectCode: 'validation_error',
  ...extra,
});
const TOKEN = '00000000-0000-4000-8000-000000000001';
const backfill = (from: string, to: string) => JSON.stringify({ from, to });

const rows: Row[] = [
  // -- JSON syntax and shape -------------------------------------------------------------------
  PUT('malformed JSON', '{"schedule": "@every 10s", "handler":'),
  PUT('JSON array body', '[{"schedule":"@every 10s","handler":"h"}]', { message: 'object' }),
  PUT('JSON string body', '"@every 10s"'),
  PUT('JSON null body', 'null'),
  PUT('empty body with a JSON content type', ''),
  PUT('trailing garbage after the object', `${job({})} x`),
  PUT('NaN (not JSON)', '{"schedule":"@every 10s","handler":"h","priority":NaN}'),
  PUT('Infinity (not JSON)', '{"schedule":"@every 10s","handler":"h","priority":Infinity}'),
  PUT('1e309 (parses to Infinity)', '{"schedule":"@every 10s","handler":"h","priority":1e309}', {
    message: 'priority',
  }),
  PUT('__proto__ key', '{"schedule":"@every 10s","handler":"h","__proto__":{"admin":true}}'),
  // -- wrong types: nothing is coerced ---------------------------------------------------------
  PUT('priority "3" (a string)', job({ priority: '3' }), { message: 'priority' }),
  PUT('max_attempts true', job({ max_attempts: true }), { message: 'max_attempts' }),
  PUT('payload fine, schedule 5', JSON.stringify({ schedule: 5, handler: 'h', payload: { ok: true } }), {
    message: 'schedule',
  }),
  PUT('handler null', job({ handler: null }), { message: 'handler' }),
  PUT('timezone 0', job({ timezone: 0 }), { message: 'timezone' }),
  // -- ranges ----------------------------------------------------------------------------------
  PUT('priority -1', job({ priority: -1 }), { message: 'priority' }),
  PUT('priority 101', job({ priority: 101 }), { message: 'field "priority" must be at most 100' }),
  PUT('priority 1.5 (float for an integer)', job({ priority: 1.5 }), { message: 'priority' }),
  PUT('max_attempts 0', job({ max_attempts: 0 }), { message: 'max_attempts' }),
  PUT('lease_seconds 0', job({ lease_seconds: 0 }), { message: 'lease_seconds' }),
  PUT('jitter_seconds 86401', job({ jitter_seconds: 86401 }), { message: 'jitter_seconds' }),
  PUT('backoff_base_seconds 1 (below 1.1)', job({ backoff_base_seconds: 1 }), {
    message: 'backoff_base_seconds',
  }),
  PUT('misfire "sometimes"', job({ misfire: 'sometimes' }), {
    message: 'field "misfire" must be one of "skip", "fire_once", "catch_up"',
  }),
  // -- fields ----------------------------------------------------------------------------------
  PUT('unknown field', job({ command: 'rm -rf /' }), { message: 'unknown field "command"' }),
  PUT('misspelt field max_attempt', job({ max_attempt: 3 }), { message: 'unknown field "max_attempt"' }),
  PUT('missing schedule', JSON.stringify({ handler: 'h' }), { message: 'missing field "schedule"' }),
  PUT('missing handler', JSON.stringify({ schedule: '@daily' }), { message: 'handler' }),
  PUT('empty object', '{}'),
  // -- identifiers in the path -----------------------------------------------------------------
  PUT('job id of 201 characters', job({}), { path: `/v1/jobs/${'j'.repeat(201)}`, message: 'job_id' }),
  PUT('unicode job id (jöb)', job({}), { path: `/v1/jobs/${encodeURIComponent('jöb')}`, message: 'job_id' }),
  PUT('SQL-looking job id', job({}), {
    path: `/v1/jobs/${encodeURIComponent("x';DROP TABLE jobs;--")}`,
    message: 'job_id',
  }),
  PUT('job id with an encoded slash', job({}), { path: '/v1/jobs/a%2Fb', message: 'job_id' }),
  PUT('bad percent-encoding in the path', job({}), { path: '/v1/jobs/%zz' }),
  PUT('job id of 2000 characters (past the router limit)', job({}), { path: `/v1/jobs/${'j'.repeat(2000)}` }),
  PUT('handler with a space', job({ handler: 'my handler' }), { message: 'handler' }),
  // -- schedules -------------------------------------------------------------------------------
  schedule('cron minute 61', '61 * * * *', 'minute'),
  schedule('unknown timezone', '0 9 * * *', 'timezone', 'Mars/Olympus_Mons'),
  schedule('@every 0s', '@every 0s', '@every'),
  schedule('@every without a duration', '@every', '@every'),
  schedule('@at in the past', '@at 2020-01-01T00:00:00Z', 'past'),
  schedule('@at without an offset', '@at 2027-01-01T00:00:00', '@at'),
  schedule('0 0 31 2 * never fires', '0 0 31 2 *', 'never'),
  schedule('unknown macro', '@fortnightly', 'macro'),
  schedule('seven cron fields', '0 0 0 1 1 * 2027', 'cron'),
  PUT('empty schedule', job({ schedule: '' }), { message: 'schedule' }),
  PUT('schedule of 257 characters', job({ schedule: `0 * * * *${' '.repeat(248)}` }), {
    message: 'schedule',
  }),
  // -- sizes and media types -------------------------------------------------------------------
  PUT('payload over 64 KiB in a body under 1 MiB', job({ payload: 'x'.repeat(70_000) }), {
    message: 'payload',
  }),
  PUT('body over 1 MiB', job({ payload: 'x'.repeat(1_100_000) }), {
    expectStatus: 413,
    expectCode: 'payload_too_large',
  }),
  PUT('text/plain body', job({}), {
    headers: { 'content-type': 'text/plain' },
    expectStatus: 415,
    expectCode: 'unsupported_media_type',
  }),
  PUT('form-encoded body', 'schedule=%40daily&handler=h', {
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    expectStatus: 415,
    expectCode: 'unsupported_media_type',
  }),
  // -- list parameters -------------------------------------------------------------------------
  v400('limit=0', 'GET', '/v1/jobs?limit=0', undefined, { message: 'limit' }),
  v400('limit=501', 'GET', '/v1/jobs?limit=501', undefined, { message: 'limit' }),
  v400('limit=abc', 'GET', '/v1/runs?limit=abc', undefined, { message: 'limit' }),
  v400('limit=-1', 'GET', '/v1/jobs?limit=-1', undefined, { message: 'limit' }),
  v400('limit=1.5', 'GET', '/v1/jobs/existing/runs?limit=1.5', undefined, { message: 'limit' }),
  v400('limit twice', 'GET', '/v1/jobs?limit=1&limit=2', undefined, {
    message: 'query parameter "limit" must be given once',
  }),
  v400('cursor that is not base64 JSON', 'GET', '/v1/jobs?cursor=not-a-cursor', undefined, {
    message: 'cursor',
  }),
  v400(
    'run cursor of the wrong shape',
    'GET',
    `/v1/runs?cursor=${Buffer.from(JSON.stringify(['x', 1])).toString('base64url')}`,
    undefined,
    { message: 'cursor' },
  ),
  v400('run cursor of 501 characters', 'GET', `/v1/runs?cursor=${'a'.repeat(501)}`, undefined, {
    message: 'cursor',
  }),
  v400('state filter "zombie"', 'GET', '/v1/runs?state=zombie', undefined, { message: 'state' }),
  v400('unknown query parameter', 'GET', '/v1/jobs?sort=desc', undefined, {
    message: 'unknown query parameter "sort"',
  }),
  {
    name: 'run id that is not a UUID',
    method: 'GET',
    path: '/v1/runs/not-a-uuid',
    expectStatus: 404,
    expectCode: 'not_found',
  },
  {
    name: 'runs of a job that does not exist',
    method: 'GET',
    path: '/v1/jobs/ghost/runs',
    expectStatus: 404,
    expectCode: 'not_found',
  },
  // -- triggers and Idempotency-Key ------------------------------------------------------------
  v400('scheduled_for that is not a date', 'POST', '/v1/jobs/existing/runs', '{"scheduled_for":"tomorrow"}', {
    message: 'scheduled_for',
  }),
  v400(
    'scheduled_for on 30 February',
    'POST',
    '/v1/jobs/existing/runs',
    '{"scheduled_for":"2026-02-30T00:00:00Z"}',
    {
      message: 'scheduled_for',
    },
  ),
  v400(
    'scheduled_for in year 0',
    'POST',
    '/v1/jobs/existing/runs',
    '{"scheduled_for":"0000-01-01T00:00:00Z"}',
    {
      message: 'scheduled_for',
    },
  ),
  v400('scheduled_for a number', 'POST', '/v1/jobs/existing/runs', '{"scheduled_for":1767225600000}', {
    message: 'scheduled_for',
  }),
  v400('trigger with an unknown field', 'POST', '/v1/jobs/existing/runs', '{"priority":9}'),
  v400(
    'trigger payload over 64 KiB',
    'POST',
    '/v1/jobs/existing/runs',
    JSON.stringify({ payload: 'x'.repeat(70_000) }),
    {
      message: 'payload is larger than 65536 bytes',
    },
  ),
  v400('trigger payload with a NUL', 'POST', '/v1/jobs/existing/runs', '{"payload":{"a":"x\\u0000"}}', {
    message: 'payload.a',
  }),
  v400('trigger payload 1e309', 'POST', '/v1/jobs/existing/runs', '{"payload":[1e309]}', {
    message: 'payload[0]',
  }),
  // -- backfill --------------------------------------------------------------------------------
  v400(
    'backfill from after to',
    'POST',
    '/v1/jobs/existing/backfill',
    backfill('2026-01-02T00:00:00Z', '2026-01-01T00:00:00Z'),
    {
      message: 'from 2026-01-02T00:00:00.000Z is after to 2026-01-01T00:00:00.000Z',
    },
  ),
  v400(
    'backfill over 10000 slots',
    'POST',
    '/v1/jobs/existing/backfill',
    backfill('2020-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
    {
      message: 'holds more than 10000 slots',
    },
  ),
  v400(
    'backfill from that is not a date',
    'POST',
    '/v1/jobs/existing/backfill',
    backfill('yesterday', '2026-01-01T00:00:00Z'),
    {
      message: 'from',
    },
  ),
  v400(
    'backfill to without an offset',
    'POST',
    '/v1/jobs/existing/backfill',
    backfill('2025-12-01T00:00:00Z', '2026-01-01T00:00:00'),
    {
      message: 'to',
    },
  ),
  v400('backfill without to', 'POST', '/v1/jobs/existing/backfill', '{"from":"2025-12-01T00:00:00Z"}', {
    message: 'to',
  }),
  v400(
    'backfill with an unknown field',
    'POST',
    '/v1/jobs/existing/backfill',
    '{"from":"2025-12-01T00:00:00Z","to":"2026-01-01T00:00:00Z","limit":5}',
  ),
  v400(
    'backfill with a bad Idempotency-Key',
    'POST',
    '/v1/jobs/existing/backfill',
    backfill('2025-12-01T00:00:00Z', '2026-01-01T00:00:00Z'),
    {
      headers: { 'idempotency-key': 'two words' },
      message: 'Idempotency-Key',
    },
  ),
  {
    name: 'backfill of a job that does not exist',
    method: 'POST',
    path: '/v1/jobs/ghost/backfill',
    body: backfill('2025-12-01T00:00:00Z', '2026-01-01T00:00:00Z'),
    expectStatus: 404,
    expectCode: 'not_found',
  },
  v400('Idempotency-Key of 201 characters', 'POST', '/v1/jobs/existing/runs', '{}', {
    headers: { 'idempotency-key': 'k'.repeat(201) },
    message: 'Idempotency-Key',
  }),
  v400('Idempotency-Key with a space', 'POST', '/v1/jobs/existing/runs', '{}', {
    headers: { 'idempotency-key': 'two words' },
    message: 'Idempotency-Key',
  }),
  {
    name: 'trigger of a slot that already has a run',
    method: 'POST',
    path: '/v1/jobs/existing/runs',
    body: JSON.stringify({ scheduled_for: SLOT }),
    expectStatus: 409,
    expectCode: 'conflict',
    runId: '{run}',
  },
  {
    name: 'replay of a run that is not dead',
    method: 'POST',
    path: '/v1/runs/{run}/replay',
    expectStatus: 409,
    expectCode: 'conflict',
  },
  // -- worker calls ----------------------------------------------------------------------------
  v400('heartbeat with an empty token', 'POST', '/v1/runs/{run}/heartbeat', '{"lease_token":""}', {
    message: 'lease_token',
  }),
  v400(
    'heartbeat with a token of 101 characters',
    'POST',
    '/v1/runs/{run}/heartbeat',
    `{"lease_token":"${'t'.repeat(101)}"}`,
  ),
  v400('heartbeat with a numeric token', 'POST', '/v1/runs/{run}/heartbeat', '{"lease_token":12345}'),
  v400(
    'heartbeat with an unknown field',
    'POST',
    '/v1/runs/{run}/heartbeat',
    `{"lease_token":"${TOKEN}","ttl":60}`,
  ),
  {
    name: 'heartbeat with a token that is not the live one',
    method: 'POST',
    path: '/v1/runs/{run}/heartbeat',
    body: `{"lease_token":"${TOKEN}"}`,
    expectStatus: 409,
    expectCode: 'lease_lost',
  },
  v400(
    'complete with status "done"',
    'POST',
    '/v1/runs/{run}/complete',
    `{"lease_token":"${TOKEN}","status":"done"}`,
    {
      message: 'status',
    },
  ),
  v400(
    'complete with an unknown field',
    'POST',
    '/v1/runs/{run}/complete',
    `{"lease_token":"${TOKEN}","status":"succeeded","result":{}}`,
  ),
  v400(
    'complete with retryable "false" (a string)',
    'POST',
    '/v1/runs/{run}/complete',
    `{"lease_token":"${TOKEN}","status":"failed","retryable":"false"}`,
    { message: 'retryable' },
  ),
  v400('complete without a token', 'POST', '/v1/runs/{run}/complete', '{"status":"succeeded"}', {
    message: 'lease_token',
  }),
  v400(
    'complete with retry_after_ms -1',
    'POST',
    '/v1/runs/{run}/complete',
    `{"lease_token":"${TOKEN}","status":"failed","retry_after_ms":-1}`,
  ),
  {
    name: 'complete (failed, not retryable) with a token that is not the live one',
    method: 'POST',
    path: '/v1/runs/{run}/complete',
    body: `{"lease_token":"${TOKEN}","status":"failed","retryable":false}`,
    expectStatus: 409,
    expectCode: 'lease_lost',
  },
  v400('leases with max 0', 'POST', '/v1/leases', '{"worker_id":"w","pool":"bad-pool","max":0}', {
    message: 'max',
  }),
  v400('leases with max 501', 'POST', '/v1/leases', '{"worker_id":"w","pool":"bad-pool","max":501}', {
    message: 'max',
  }),
  v400(
    'leases with wait_ms 60000',
    'POST',
    '/v1/leases',
    '{"worker_id":"w","pool":"bad-pool","wait_ms":60000}',
    {
      message: 'wait_ms',
    },
  ),
  v400('leases with wait_ms -1', 'POST', '/v1/leases', '{"worker_id":"w","pool":"bad-pool","wait_ms":-1}'),
  v400('leases without worker_id', 'POST', '/v1/leases', '{"pool":"bad-pool"}', { message: 'worker_id' }),
  v400('leases with handlers []', 'POST', '/v1/leases', '{"worker_id":"w","pool":"bad-pool","handlers":[]}'),
  v400(
    'leases with a worker_id holding a space',
    'POST',
    '/v1/leases',
    '{"worker_id":"w 1","pool":"bad-pool"}',
  ),
  v400('leases with max "1"', 'POST', '/v1/leases', '{"worker_id":"w","pool":"bad-pool","max":"1"}'),
  v400('worker heartbeat with leases not an array', 'POST', '/v1/workers/w/heartbeat', '{"leases":{}}'),
  v400(
    'worker heartbeat with 1001 leases',
    'POST',
    '/v1/workers/w/heartbeat',
    JSON.stringify({ leases: Array.from({ length: 1001 }, () => ({ run_id: TOKEN, lease_token: TOKEN })) }),
  ),
  v400('worker heartbeat for worker id " "', 'POST', '/v1/workers/%20/heartbeat', '{"leases":[]}'),
  // -- keys ------------------------------------------------------------------------------------
  v400('key with role "root"', 'POST', '/v1/keys', '{"role":"root"}', { message: 'role' }),
  v400('key with an unknown field', 'POST', '/v1/keys', '{"role":"reader","tenant_id":"globex"}'),
  v400(
    'key with a name of 201 characters',
    'POST',
    '/v1/keys',
    `{"role":"reader","name":"${'n'.repeat(201)}"}`,
  ),
  {
    name: 'revoke a key that does not exist',
    method: 'DELETE',
    path: '/v1/keys/key_000000000000',
    expectStatus: 404,
    expectCode: 'not_found',
  },
  // -- authentication and roles ----------------------------------------------------------------
  {
    name: 'no key',
    method: 'GET',
    path: '/v1/jobs',
    as: 'none',
    expectStatus: 401,
    expectCode: 'unauthorized',
  },
  {
    name: 'malformed Authorization header',
    method: 'GET',
    path: '/v1/jobs',
    as: 'none',
    headers: { authorization: 'Bearer' },
    expectStatus: 401,
    expectCode: 'unauthorized',
  },
  {
    name: 'forged key',
    method: 'GET',
    path: '/v1/jobs',
    as: 'forged',
    expectStatus: 401,
    expectCode: 'unauthorized',
  },
  {
    name: 'revoked key',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: job({}),
    as: 'revoked',
    expectStatus: 401,
    expectCode: 'unauthorized',
  },
  {
    name: 'reader PUTs a job',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: job({}),
    as: 'acme.reader',
    expectStatus: 403,
    expectCode: 'forbidden',
  },
  {
    name: 'worker lists jobs',
    method: 'GET',
    path: '/v1/jobs',
    as: 'acme.worker',
    expectStatus: 403,
    expectCode: 'forbidden',
  },
  {
    name: 'operator takes leases',
    method: 'POST',
    path: '/v1/leases',
    body: '{"worker_id":"w","pool":"bad-pool"}',
    as: 'acme.operator',
    expectStatus: 403,
    expectCode: 'forbidden',
    message: 'an operator key may not work runs',
  },
  {
    name: 'operator creates a key',
    method: 'POST',
    path: '/v1/keys',
    body: '{"role":"admin"}',
    as: 'acme.operator',
    expectStatus: 403,
    expectCode: 'forbidden',
    message: 'an operator key may not manage API keys',
  },
  // -- another tenant --------------------------------------------------------------------------
  ...(
    [
      ['reads the job', 'GET', '/v1/jobs/existing', 'globex.reader'],
      ['reads the run', 'GET', '/v1/runs/{run}', 'globex.reader'],
      ["lists the job's runs", 'GET', '/v1/jobs/existing/runs', 'globex.reader'],
      ['deletes the job', 'DELETE', '/v1/jobs/existing', 'globex.admin'],
      ['pauses the job', 'POST', '/v1/jobs/existing/pause', 'globex.operator'],
      ['triggers the job', 'POST', '/v1/jobs/existing/runs', 'globex.operator', '{}'],
      [
        'backfills the job',
        'POST',
        '/v1/jobs/existing/backfill',
        'globex.operator',
        '{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}',
      ],
      ['replays the run', 'POST', '/v1/runs/{run}/replay', 'globex.operator'],
      ['cancels the run', 'POST', '/v1/runs/{run}/cancel', 'globex.operator'],
      ["revokes acme's key", 'DELETE', '/v1/keys/{key}', 'globex.admin'],
    ] as [string, string, string, Who, string?][]
  ).map(
    ([what, method, path, as, body]): Row => ({
      name: `another tenant ${what}`,
      method,
      path,
      as,
      body,
      expectStatus: 404,
      expectCode: 'not_found',
    }),
  ),
  // -- routes ----------------------------------------------------------------------------------
  { name: 'unknown route', method: 'GET', path: '/v1/cron', expectStatus: 404, expectCode: 'not_found' },
  {
    name: 'unknown method on a route',
    method: 'PATCH',
    path: '/v1/jobs/existing',
    body: '{"priority":1}',
    expectStatus: 404,
    expectCode: 'not_found',
  },
];

let db: TestDatabase;
let api: Api;
let acme: RoleKeys;
let globex: RoleKeys;
let revoked: string;
let forged: string;
let runId: string;
let before: Record<string, string>;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  acme = await keysFor(db, 'acme');
  globex = await keysFor(db, 'globex');
  const r = await db.store.createApiKey({ tenantId: 'acme', role: 'admin', now: db.clock.nowMs() });
  await db.store.revokeApiKey({
    tenantId: 'acme',
    keyId: r.key.keyId,
    now: db.clock.nowMs(),
    by: 'database',
  });
  revoked = r.secret;
  forged = `tock_${'A'.repeat(43)}`;
  const put = await call(api.base, 'PUT', '/v1/jobs/existing', {
    key: acme.operator,
    body: { schedule: '@every 1h', handler: 'h', pool: 'bad-pool' },
  });
  expect(put.status).toBe(200);
  // A pending run that is already claimable: a lease request wrongly accepted would take it.
  const run = await call(api.base, 'POST', '/v1/jobs/existing/runs', {
    key: acme.operator,
    body: { scheduled_for: SLOT },
  });
  expect(run.status).toBe(201);
  runId = run.json.run_id;
  before = await snapshot(db.pool);
  expect(before.runs).toMatch(/^1:/);
  expect(before.idempotency_keys).toBe('0:');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

function keyOf(who: Who): string | undefined {
  if (who === 'none') return undefined;
  if (who === 'forged') return forged;
  if (who === 'revoked') return revoked;
  const [tenant, role] = who.split('.') as ['acme' | 'globex', Role];
  return (tenant === 'acme' ? acme : globex)[role];
}

test('the table has at least 40 distinct rows', () => {
  expect(rows.length).toBeGreaterThanOrEqual(40);
  expect(new Set(rows.map((r) => r.name)).size).toBe(rows.length);
});

test.each(rows)('$name → $expectStatus $expectCode', async (row) => {
  const fill = (s: string) => s.replaceAll('{run}', runId).replaceAll('{key}', acme.ids.reader);
  const answer = await call(api.base, row.method, fill(row.path), {
    key: keyOf(row.as ?? 'acme.admin'),
    body: row.body,
    headers: row.headers,
  });
  expect(answer.status, answer.text).not.toBe(500);
  expectError(answer, row.expectStatus, row.expectCode);
  if (row.message !== undefined) expect(answer.json.error.message).toContain(row.message);
  if (row.expectCode === 'validation_error') {
    // Named as the user wrote it: no validator paths (body/priority), no schema jargon.
    expect(answer.json.error.message).not.toMatch(
      /^(body|querystring|params|headers)\b|\/[a-z_]+ must|must NOT/,
    );
  }
  if (row.runId !== undefined) expect(answer.json.error.run_id).toBe(fill(row.runId));
  expect(await snapshot(db.pool)).toEqual(before);
});
