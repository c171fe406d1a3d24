/**
 * `.` and `..` are refused as ids (issue 14, item 13): `fetch` and the CLI resolve them as path
 * segments, so a job named so could be written but never read or deleted through the client. The
 * single path (`PUT /v1/jobs/%2E%2E`), the bulk body, a worker id and a pool all answer 400, and
 * nothing is written; a jobs file with such an id is refused too.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { readJobsFile } from '../../src/runtime/jobs-file.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

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

const job = { schedule: '@every 1m', handler: 'h' };

/** A PUT with the path sent byte for byte (`fetch` would resolve `%2E%2E` itself, as the client does). */
function rawPut(path: string, key: string, body: unknown): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(api.base);
    const req = request({
      hostname,
      port,
      path,
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => {
        text += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test('PUT /v1/jobs/%2E and %2E%2E answer 400 and write nothing', async () => {
  const before = await snapshot(db.pool);
  for (const id of ['.', '..', '%2E', '%2E%2E', '%2e%2e']) {
    const a = await rawPut(`/v1/jobs/${id}`, keys.operator, job);
    expect([id, a.status]).toEqual([id, 400]);
    expect(a.json).toMatchObject({ error: { code: 'validation_error', message: expect.any(String) } });
  }
  expect(await snapshot(db.pool)).toEqual(before);
});

test('a bulk body with job_id "." or ".." answers 400 and writes nothing', async () => {
  const before = await snapshot(db.pool);
  for (const id of ['.', '..']) {
    const a = await http('PUT', '/v1/jobs', {
      key: keys.operator,
      body: {
        jobs: [
          { job_id: 'fine', ...job },
          { job_id: id, ...job },
        ],
      },
    });
    expectError(a, 400, 'validation_error');
  }
  expect(await snapshot(db.pool)).toEqual(before);
});

test('a pool or worker id of ".." is refused by the lease route', async () => {
  for (const body of [
    { worker_id: '..', pool: 'p' },
    { worker_id: 'w', pool: '.' },
  ]) {
    expectError(await http('POST', '/v1/leases', { key: keys.worker, body }), 400, 'validation_error');
  }
});

test('ids that merely contain dots are still accepted', async () => {
  const a = await http('PUT', '/v1/jobs/...', { key: keys.operator, body: job });
  expect(a.status, a.text).toBe(200);
  const b = await http('GET', '/v1/jobs/a..b', { key: keys.reader });
  expectError(b, 404, 'not_found');
});

test('a jobs file (tock dev) with job_id ".." is refused', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'tock-dot-ids-'));
  try {
    const path = join(dir, 'jobs.yaml');
    await writeFile(path, 'jobs:\n  - job_id: ".."\n    schedule: "@every 1m"\n    handler: h\n');
    await expect(readJobsFile(path)).rejects.toThrow(/entry 1: job_id must be/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
