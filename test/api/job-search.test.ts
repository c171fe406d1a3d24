/**
 * `GET /v1/jobs` with filters (issue 22, operator features, item 1): `q` (an id prefix, taken
 * literally), `state`, `pool` and `handler`, alone and together, paged by cursor; another tenant's
 * jobs never appear; bad filters are a 400.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, startApi } from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let acme: RoleKeys;
let other: RoleKeys;

const put = async (key: string, jobId: string, body: Record<string, unknown> = {}) => {
  const a = await http('PUT', `/v1/jobs/${encodeURIComponent(jobId)}`, {
    key,
    body: { schedule: '@every 1h', handler: 'h', ...body },
  });
  expect(a.status, a.text).toBe(200);
};

/** Every job id of a listing, page after page of `limit`, with the query `query`. */
async function allIds(key: string, query: Record<string, string>, limit = 2): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 50; i++) {
    const q = new URLSearchParams({ ...query, limit: String(limit), ...(cursor ? { cursor } : {}) });
    const a = await http('GET', `/v1/jobs?${q}`, { key });
    expect(a.status, a.text).toBe(200);
    expect(a.json.jobs.length).toBeLessThanOrEqual(limit);
    ids.push(...a.json.jobs.map((j: { job_id: string }) => j.job_id));
    cursor = a.json.next_cursor;
    if (cursor === null) return ids;
  }
  throw new Error('more than 50 pages');
}

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  http = client(api.base);
  acme = await keysFor(db, 'acme');
  other = await keysFor(db, 'other');
  for (const id of ['billing.a', 'billing.b', 'billing.c', 'billing.d', 'billingX', 'mail.a', 'mail.b'])
    await put(acme.admin, id, id.startsWith('mail') ? { pool: 'io', handler: 'send' } : {});
  // `_` is a LIKE wildcard and may be in an id; `%` and `\` may not (ID_PATTERN), but may be in q.
  for (const id of ['under_1', 'underX1', 'under_x', 'back.1']) await put(acme.admin, id);
  await put(acme.admin, 'paused.a');
  expect((await http('POST', '/v1/jobs/paused.a/pause', { key: acme.admin })).status).toBe(200);
  // The other tenant's jobs match every filter used below.
  for (const id of ['billing.a', 'billing.z', 'mail.a', 'under_2'])
    await put(other.admin, id, { pool: 'io', handler: 'send' });
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

describe('GET /v1/jobs filters', () => {
  test('q: the jobs whose id starts with it, paged by cursor, none of another tenant', async () => {
    expect(await allIds(acme.reader, { q: 'billing.' })).toEqual([
      'billing.a',
      'billing.b',
      'billing.c',
      'billing.d',
    ]);
    expect(await allIds(acme.reader, { q: 'billing' }, 1)).toEqual([
      'billing.a',
      'billing.b',
      'billing.c',
      'billing.d',
      'billingX',
    ]);
    expect(await allIds(other.reader, { q: 'billing' })).toEqual(['billing.a', 'billing.z']);
    // A prefix, not a substring.
    expect(await allIds(acme.reader, { q: 'ling' })).toEqual([]);
    expect(await allIds(acme.reader, { q: 'zzz' })).toEqual([]);
  });

  test('q: %, _ and \\ are matched as themselves, never as wildcards', async () => {
    expect(await allIds(acme.reader, { q: 'under_' })).toEqual(['under_1', 'under_x']);
    expect(await allIds(acme.reader, { q: 'under_1' })).toEqual(['under_1']);
    expect(await allIds(acme.reader, { q: 'under%' })).toEqual([]);
    expect(await allIds(acme.reader, { q: '%' })).toEqual([]);
    expect(await allIds(acme.reader, { q: '_' })).toEqual([]);
    expect(await allIds(acme.reader, { q: 'back\\' })).toEqual([]);
    expect(await allIds(acme.reader, { q: 'b%' })).toEqual([]);
  });

  test('state, pool and handler, alone and with q', async () => {
    expect(await allIds(acme.reader, { state: 'paused' })).toEqual(['paused.a']);
    const active = await allIds(acme.reader, { state: 'active' }, 5);
    expect(active).toContain('billing.a');
    expect(active).not.toContain('paused.a');
    expect(await allIds(acme.reader, { pool: 'io' })).toEqual(['mail.a', 'mail.b']);
    expect(await allIds(acme.reader, { handler: 'send', q: 'mail.b' })).toEqual(['mail.b']);
    expect(await allIds(acme.reader, { handler: 'send', pool: 'default' })).toEqual([]);
    expect(await allIds(acme.reader, { q: 'paused', state: 'active' })).toEqual([]);
  });

  test('no filter: every job of the tenant, each once, in id order', async () => {
    const ids = await allIds(acme.reader, {}, 3);
    expect(ids).toEqual([...ids].sort());
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toContain('mail.b');
    expect(ids).not.toContain('billing.z');
  });

  test('bad filters are a 400', async () => {
    for (const query of [
      'q=',
      `q=${'a'.repeat(201)}`,
      'q=a%00b',
      'state=gone',
      'pool=a%20b',
      'handler=',
      'q=a&q=b',
      'search=a',
    ])
      expectError(await http('GET', `/v1/jobs?${query}`, { key: acme.reader }), 400, 'validation_error');
    // Bytes that are not UTF-8 arrive as U+FFFD (a URL cannot carry a lone surrogate): no id has it.
    expect(await allIds(acme.reader, { q: '\ufffd' })).toEqual([]);
    const broken = await http('GET', '/v1/jobs?q=%ED%A0%80', { key: acme.reader });
    expect(broken.status, broken.text).toBe(200);
    expect(broken.json.jobs).toEqual([]);
  });
});
