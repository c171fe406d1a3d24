/**
 * Text PostgreSQL refuses, over real HTTP: U+0000 or an unpaired surrogate (sent as `\u0000`,
 * `\ud800` escapes in the JSON text, which Fastify's parser turns into those characters) in a
 * payload, a payload key, a key name, a completion's output or error, or a release reason, and a
 * payload number JSON.parse turns into Infinity (`1e309`), answer 400 `validation_error` naming
 * the field (never a 500, never a silent change), and leave every table as it was. Bodies are sent
 * raw, byte for byte. A live lease is held on a run so that a wrongly accepted complete or release
 * would show in the digest.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, call, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

interface Row {
  name: string;
  method: string;
  /** `{run}` is the leased run. */
  path: string;
  /** Raw JSON text; `{token}` is the run's lease token. */
  body?: string;
  /** The field the message must start with. */
  field: string;
  as?: 'admin' | 'worker';
}

const job = (extra: string) => `{"schedule":"@every 10s","handler":"h",${extra}}`;
const bulk = (second: string) =>
  `{"jobs":[{"job_id":"bulk-a","schedule":"@every 10s","handler":"h"},{"job_id":"bulk-b","schedule":"@every 10s","handler":"h",${second}}]}`;
const complete = (extra: string) => `{"lease_token":"{token}",${extra}}`;

const rows: Row[] = [
  {
    name: 'NUL in a payload string',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: job('"payload":{"a":["ok","x\\u0000y"]}'),
    field: 'payload.a[1]',
  },
  {
    name: 'lone surrogate in a payload',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: job('"payload":{"s":"\\ud800"}'),
    field: 'payload.s',
  },
  {
    name: 'NUL in a payload key',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: job('"payload":{"k\\u0000":1}'),
    field: 'payload["k\\u0000"]',
  },
  {
    name: '1e309 in a payload',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: job('"payload":{"n":1e309}'),
    field: 'payload.n',
  },
  {
    name: '-1e309 deep in a payload',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: job('"payload":{"a":[{"b":-1e309}]}'),
    field: 'payload.a[0].b',
  },
  {
    name: 'NUL in the schedule',
    method: 'PUT',
    path: '/v1/jobs/new-job',
    body: '{"schedule":"@every 10s\\u0000","handler":"h"}',
    field: 'schedule',
  },
  {
    name: 'bulk: NUL in the second payload',
    method: 'PUT',
    path: '/v1/jobs',
    body: bulk('"payload":{"x":"\\u0000"}'),
    field: 'jobs[1].payload.x',
  },
  {
    name: 'bulk: lone surrogate in the second payload',
    method: 'PUT',
    path: '/v1/jobs',
    body: bulk('"payload":"\\udfff"'),
    field: 'jobs[1].payload',
  },
  {
    name: 'bulk: 1e309 in the second payload',
    method: 'PUT',
    path: '/v1/jobs',
    body: bulk('"payload":[1e309]'),
    field: 'jobs[1].payload[0]',
  },
  {
    name: 'NUL in a key name',
    method: 'POST',
    path: '/v1/keys',
    body: '{"role":"reader","name":"ops\\u0000"}',
    field: 'name',
  },
  {
    name: 'lone surrogate in a key name',
    method: 'POST',
    path: '/v1/keys',
    body: '{"role":"reader","name":"ops\\ud83d"}',
    field: 'name',
  },
  {
    name: 'NUL in a completion output',
    method: 'POST',
    path: '/v1/runs/{run}/complete',
    body: complete('"status":"succeeded","output":"binary\\u0000output"'),
    field: 'output',
    as: 'worker',
  },
  {
    name: 'NUL in a failure error',
    method: 'POST',
    path: '/v1/runs/{run}/complete',
    body: complete('"status":"failed","error":"boom\\u0000"'),
    field: 'error',
    as: 'worker',
  },
  {
    name: 'lone surrogate in a failure output',
    method: 'POST',
    path: '/v1/runs/{run}/complete',
    body: complete('"status":"failed","error":"boom","output":"\\udc00"'),
    field: 'output',
    as: 'worker',
  },
  {
    name: 'NUL in a release reason',
    method: 'POST',
    path: '/v1/runs/{run}/release',
    body: complete('"reason":"bye\\u0000"'),
    field: 'reason',
    as: 'worker',
  },
  {
    name: 'NUL in a trigger body',
    method: 'POST',
    path: '/v1/jobs/existing/runs',
    body: '{"scheduled_for":"\\u0000"}',
    field: 'scheduled_for',
  },
  { name: 'NUL in a query parameter', method: 'GET', path: '/v1/jobs?cursor=%00', field: 'cursor' },
  { name: 'NUL in a path parameter', method: 'GET', path: '/v1/jobs/a%00b', field: 'job_id' },
];

let db: TestDatabase;
let api: Api;
let acme: RoleKeys;
let runId: string;
let token: string;
let before: Record<string, string>;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  acme = await keysFor(db, 'acme');
  const put = await call(api.base, 'PUT', '/v1/jobs/existing', {
    key: acme.operator,
    body: { schedule: '@every 1h', handler: 'h' },
  });
  expect(put.status).toBe(200);
  const run = await call(api.base, 'POST', '/v1/jobs/existing/runs', {
    key: acme.operator,
    body: { scheduled_for: '2025-12-31T23:00:00.000Z' },
  });
  expect(run.status).toBe(201);
  const [claimed] = await db.store.claimRuns({
    workerId: 'w-text',
    pool: 'default',
    max: 1,
    now: db.clock.nowMs(),
    tenantId: 'acme',
  });
  runId = claimed!.runId;
  token = claimed!.leaseToken;
  before = await snapshot(db.pool);
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

test.each(rows)('$name → 400 naming $field', async (row) => {
  const answer = await call(api.base, row.method, row.path.replaceAll('{run}', runId), {
    key: acme[row.as ?? 'admin'],
    body: row.body?.replaceAll('{token}', token),
  });
  expectError(answer, 400, 'validation_error');
  expect(answer.json.error.message.startsWith(`${row.field} `), answer.json.error.message).toBe(true);
  expect(await snapshot(db.pool)).toEqual(before);
});

test('clean text with a well-formed pair is accepted, and the lease still works', async () => {
  const answer = await call(api.base, 'POST', `/v1/runs/${runId}/complete`, {
    key: acme.worker,
    body: { lease_token: token, status: 'succeeded', output: 'fine \uD83D\uDE00' },
  });
  expect(answer.status, answer.text).toBe(200);
  const run = await call(api.base, 'GET', `/v1/runs/${runId}`, { key: acme.reader });
  expect(run.json.output ?? run.json.attempts?.[0]?.output).toBe('fine \uD83D\uDE00');
});
