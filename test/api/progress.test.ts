/**
 * Progress and log lines over HTTP: the heartbeat bodies (one run's, a worker's batch) carry what
 * a handler reported, written only under the live lease and for the caller's tenant; more than the
 * bounds is refused (400) with nothing written; `GET /v1/runs/{id}` shows it on the run and its
 * attempts. `HttpLeaseSource.heartbeatRuns` sends a worker's reports.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { HttpLeaseSource } from '../../src/client/index.js';
import { LOG_LINE_MAX_CHARS, LOG_LINES_MAX, PROGRESS_MESSAGE_MAX_CHARS } from '../../src/core/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { countRows } from '../setup/factories.js';
import {
  type Api,
  client,
  expectError,
  keysFor,
  jobWithRuns as putJobWithRuns,
  type RoleKeys,
  snapshot,
  startApi,
} from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;
let otherKeys: RoleKeys;
const iso = (ms: number) => new Date(ms).toISOString();

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  keys = await keysFor(db, 'acme');
  otherKeys = await keysFor(db, 'globex');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

/** `n` runs of a job in its own pool, each claimed in a claim of its own; their leases. */
async function claimed(jobId: string, n = 1): Promise<{ run_id: string; lease_token: string }[]> {
  const pool = `p-${jobId}`;
  await putJobWithRuns(api.base, keys.operator, db.clock.nowMs(), { jobId, pool, n });
  const out: { run_id: string; lease_token: string }[] = [];
  for (let i = 0; i < n; i++) {
    const a = await http('POST', '/v1/leases', {
      key: keys.worker,
      body: { worker_id: 'w-1', pool, max: 1 },
    });
    expect(a.status, a.text).toBe(200);
    const { run_id, lease_token } = a.json.runs[0];
    out.push({ run_id, lease_token });
  }
  return out;
}

const getRun = async (runId: string) => (await http('GET', `/v1/runs/${runId}`, { key: keys.reader })).json;

test("one run's heartbeat carries progress and lines; GET /v1/runs/{id} shows them on the run and its attempt", async () => {
  const [l] = await claimed('beat-one');
  const a = await http('POST', `/v1/runs/${l!.run_id}/heartbeat`, {
    key: keys.worker,
    body: {
      lease_token: l!.lease_token,
      progress: { value: 42.5, message: 'rows 425 of 1000' },
      logs: ['connected', 'copying'],
      logs_dropped: 3,
    },
  });
  expect(a.status, a.text).toBe(200);
  const run = await getRun(l!.run_id);
  expect(run).toMatchObject({ state: 'running', progress: 42.5, progress_message: 'rows 425 of 1000' });
  expect(run.attempts).toEqual([
    expect.objectContaining({
      outcome: null,
      progress: 42.5,
      progress_message: 'rows 425 of 1000',
      logs: ['connected', 'copying'],
      logs_dropped: 3,
      reported_at: iso(db.clock.nowMs()),
    }),
  ]);

  // The rest goes with the result (here a bare completion); the succeeded attempt keeps it all.
  const done = await http('POST', `/v1/runs/${l!.run_id}/complete`, {
    key: keys.worker,
    body: { lease_token: l!.lease_token, status: 'succeeded' },
  });
  expect(done.status, done.text).toBe(200);
  const after = await getRun(l!.run_id);
  expect(after).toMatchObject({ state: 'succeeded', progress: 42.5 });
  expect(after.attempts[0]).toMatchObject({ outcome: 'succeeded', logs: ['connected', 'copying'] });
});

test("a worker's batched heartbeat writes each live lease's report, and nothing for a lost one", async () => {
  const [live, done] = await claimed('beat-many', 2);
  await http('POST', `/v1/runs/${done!.run_id}/complete`, {
    key: keys.worker,
    body: { lease_token: done!.lease_token, status: 'succeeded' },
  });
  const a = await http('POST', '/v1/workers/w-1/heartbeat', {
    key: keys.worker,
    body: {
      leases: [
        { ...live, progress: { value: 7 }, logs: ['live line'] },
        { ...done, progress: { value: 99 }, logs: ['too late'] },
      ],
    },
  });
  expect(a.status, a.text).toBe(200);
  expect(a.json.lost).toEqual([done!.run_id]);
  expect((await getRun(live!.run_id)).attempts[0]).toMatchObject({
    progress: 7,
    progress_message: null,
    logs: ['live line'],
  });
  expect((await getRun(done!.run_id)).attempts[0]).toMatchObject({ progress: null, logs: [] });
});

test("another tenant's worker cannot write a report on a run, even with its token", async () => {
  const [l] = await claimed('beat-foreign');
  const one = await http('POST', `/v1/runs/${l!.run_id}/heartbeat`, {
    key: otherKeys.worker,
    body: { lease_token: l!.lease_token, logs: ['intruder'] },
  });
  expect(one.status).toBe(404);
  const many = await http('POST', '/v1/workers/w-x/heartbeat', {
    key: otherKeys.worker,
    body: { leases: [{ ...l, progress: { value: 1 }, logs: ['intruder'] }] },
  });
  expect(many.json.lost).toEqual([l!.run_id]);
  expect(await countRows(db.pool, 'attempt_progress', 'run_id = $1', [l!.run_id])).toBe(0);
});

test('more than the bounds, or text PostgreSQL refuses, is 400 with nothing written', async () => {
  const [l] = await claimed('beat-bounds');
  const bad: [string, Record<string, unknown>][] = [
    ['too many lines', { logs: Array.from({ length: LOG_LINES_MAX + 1 }, () => 'x') }],
    ['a line too long', { logs: ['y'.repeat(LOG_LINE_MAX_CHARS + 1)] }],
    ['a message too long', { progress: { value: 1, message: 'm'.repeat(PROGRESS_MESSAGE_MAX_CHARS + 1) } }],
    ['a progress without a value', { progress: { message: 'no value' } }],
    ['a progress that is not a number', { progress: { value: '50' } }],
    ['a progress that JSON cannot carry', { progress: { value: Number.POSITIVE_INFINITY } }],
    ['a negative dropped count', { logs_dropped: -1 }],
    ['a NUL in a line', { logs: ['nul \u0000 here'] }],
    ['a lone surrogate in the message', { progress: { value: 1, message: 'half \uD800' } }],
    ['an unknown field', { progres: { value: 1 } }],
  ];
  const before = await snapshot(db.pool);
  for (const [what, report] of bad) {
    // JSON.stringify writes Infinity as null: the body says 1e999 instead, which parses to it.
    const one = JSON.stringify({ lease_token: l!.lease_token, ...report }).replace('null', '1e999');
    const a = await http('POST', `/v1/runs/${l!.run_id}/heartbeat`, { key: keys.worker, body: one });
    expectError(a, 400, 'validation_error');
    const many = JSON.stringify({ leases: [{ ...l, ...report }] }).replace('null', '1e999');
    const b = await http('POST', '/v1/workers/w-1/heartbeat', { key: keys.worker, body: many });
    expect(b.status, `${what}: ${b.text}`).toBe(400);
  }
  expect(await snapshot(db.pool)).toEqual(before);
  // At the bounds exactly, it is accepted.
  const ok = await http('POST', `/v1/runs/${l!.run_id}/heartbeat`, {
    key: keys.worker,
    body: {
      lease_token: l!.lease_token,
      progress: { value: -3, message: 'm'.repeat(PROGRESS_MESSAGE_MAX_CHARS) },
      logs: Array.from({ length: LOG_LINES_MAX }, () => 'z'.repeat(LOG_LINE_MAX_CHARS)),
    },
  });
  expect(ok.status, ok.text).toBe(200);
  expect((await getRun(l!.run_id)).attempts[0].logs).toHaveLength(LOG_LINES_MAX);
});

test("HttpLeaseSource.heartbeatRuns sends each lease's report", async () => {
  const [l] = await claimed('beat-source');
  const source = new HttpLeaseSource({
    url: api.base,
    key: keys.worker,
    clock: db.clock,
    resultLingerMs: 0,
    workerId: 'w-1',
  });
  const { renewed } = await source.heartbeatRuns({
    leases: [
      {
        runId: l!.run_id,
        leaseToken: l!.lease_token,
        progress: { value: 3, message: 'three' },
        logs: ['from the source'],
        logsDropped: 1,
      },
    ],
  });
  expect(renewed.map((r) => r.runId)).toEqual([l!.run_id]);
  expect((await getRun(l!.run_id)).attempts[0]).toMatchObject({
    progress: 3,
    progress_message: 'three',
    logs: ['from the source'],
    logs_dropped: 1,
  });
});

test('one lease named twice in a batched heartbeat, in two spellings of its uuids, writes both reports once (not a 500)', async () => {
  // Found in review: the reports were merged by the ids as sent, so the same run in upper and
  // lower case made two rows for one (run, token) pair and the upsert failed (21000), a 500.
  const [l] = await claimed('beat-twice');
  const a = await http('POST', '/v1/workers/w-1/heartbeat', {
    key: keys.worker,
    body: {
      leases: [
        { ...l!, logs: ['first'] },
        { run_id: l!.run_id.toUpperCase(), lease_token: l!.lease_token.toUpperCase(), logs: ['second'] },
      ],
    },
  });
  expect(a.status, a.text).toBe(200);
  expect((await getRun(l!.run_id)).attempts[0].logs).toEqual(['first', 'second']);
});
