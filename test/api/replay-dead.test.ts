/**
 * `POST /v1/runs/replay` (issue 22, operator features, item 2): the dead runs a filter picks, counted
 * first (`dry_run`), then replayed in bounded batches with a cursor, each as the single replay does;
 * another tenant's dead runs are never counted or touched; a reader key and bad filters are refused
 * with nothing changed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { replayDeadRuns } from '../../src/store/dead-letters.js';
import * as R from '../../src/store/queries/runs.js';
import type { Queryable } from '../../src/store/rows.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import {
  type Api,
  client,
  expectError,
  jobWithRuns,
  keysFor,
  type RoleKeys,
  snapshot,
  startApi,
} from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let acme: RoleKeys;
let other: RoleKeys;

/** `n` runs of a new job of `tenant`, each failed permanently with `error`: dead, oldest slot first. */
async function deadRuns(
  tenantId: string,
  key: string,
  jobId: string,
  n: number,
  error: string,
): Promise<string[]> {
  const ids = await jobWithRuns(api.base, key, db.clock.nowMs(), { jobId, pool: `pool-${jobId}`, n });
  const claimed = await db.store.claimRuns({
    workerId: 'w-1',
    pool: `pool-${jobId}`,
    max: n,
    handlers: [`${jobId}-handler`],
    tenantId,
    now: db.clock.nowMs(),
  });
  expect(claimed).toHaveLength(n);
  for (const c of claimed)
    await db.store.failRun({
      runId: c.runId,
      leaseToken: c.leaseToken,
      error,
      permanent: true,
      now: db.clock.nowMs(),
    });
  return ids;
}

const replay = (key: string, body: Record<string, unknown>) => http('POST', '/v1/runs/replay', { key, body });

async function stateOf(runId: string): Promise<string> {
  const { rows } = await db.pool.query('SELECT state FROM runs WHERE run_id = $1', [runId]);
  return rows[0].state;
}

let timeouts: string[];
let refused: string[];
let otherDead: string[];

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  http = client(api.base);
  acme = await keysFor(db, 'acme');
  other = await keysFor(db, 'other');
  timeouts = await deadRuns('acme', acme.admin, 'fetch', 5, 'upstream Timeout after 30s (50%_done\\)');
  refused = await deadRuns('acme', acme.admin, 'mail', 2, 'connection refused');
  // The other tenant's dead runs match every filter below.
  otherDead = await deadRuns('other', other.admin, 'fetch', 3, 'upstream timeout after 30s (50%_done\\)');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

describe('POST /v1/runs/replay', () => {
  test('a dry run counts the matching dead runs of the tenant and changes nothing', async () => {
    const before = await snapshot(db.pool);
    const count = async (body: Record<string, unknown>) => {
      const a = await replay(acme.operator, { ...body, dry_run: true });
      expect(a.status, a.text).toBe(200);
      expect(a.json).toMatchObject({
        dry_run: true,
        more_matching: false,
        replayed: 0,
        skipped: 0,
        next_cursor: null,
      });
      return a.json.matching;
    };
    expect(await count({})).toBe(7);
    expect(await count({ job_id: 'fetch' })).toBe(5);
    expect(await count({ error_contains: 'TIMEOUT' })).toBe(5);
    // The error text is literal: LIKE's wildcards and escape are themselves.
    expect(await count({ error_contains: '50%_done\\' })).toBe(5);
    expect(await count({ error_contains: '50%done' })).toBe(0);
    expect(await count({ error_contains: '%' })).toBe(5);
    expect(await count({ error_contains: '_' })).toBe(5);
    // Slots: jobWithRuns put them a second apart, the last a second before now.
    const now = db.clock.nowMs();
    const iso = (ms: number) => new Date(ms).toISOString();
    expect(await count({ job_id: 'fetch', slot_from: iso(now - 3000), slot_to: iso(now - 1000) })).toBe(2);
    expect(await count({ job_id: 'nobody' })).toBe(0);
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('a reader key is refused, with nothing changed; a worker key too', async () => {
    const before = await snapshot(db.pool);
    for (const key of [acme.reader, acme.worker]) {
      expectError(await replay(key, {}), 403, 'forbidden');
      expectError(await replay(key, { dry_run: true }), 403, 'forbidden');
    }
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('bad filters are a 400 with nothing changed', async () => {
    const before = await snapshot(db.pool);
    const now = new Date(db.clock.nowMs()).toISOString();
    for (const body of [
      { job_id: 'a b' },
      { error_contains: '' },
      { error_contains: 'a\u0000b' },
      { error_contains: 'a\ud800b' },
      { error_contains: 'x'.repeat(201) },
      { slot_from: 'yesterday' },
      { slot_from: '2026-02-30T00:00:00Z' },
      { slot_from: now, slot_to: now },
      { limit: 0 },
      { limit: 501 },
      { cursor: 'not-a-cursor' },
      { cursor: Buffer.from(JSON.stringify([1, 'x\u0000'])).toString('base64url') },
      { dry_run: true, limit: 5 },
      { dry_run: 'yes' },
      { filter: {} },
    ])
      expectError(await replay(acme.operator, body), 400, 'validation_error');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('replays in batches with a cursor, each as the single replay does; one replayed alone before is not found', async () => {
    // One of the matching runs is replayed alone first: the bulk replay finds it no longer dead.
    const single = await http('POST', `/v1/runs/${timeouts[0]}/replay`, { key: acme.operator });
    expect(single.status, single.text).toBe(200);

    const first = await replay(acme.operator, { error_contains: 'timeout', limit: 3 });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({ dry_run: false, matching: 3, replayed: 3, skipped: 0 });
    // Newest slot first.
    expect(first.json.replayed_run_ids).toEqual([timeouts[4], timeouts[3], timeouts[2]]);
    expect(first.json.next_cursor).toEqual(expect.any(String));

    const rest = await replay(acme.operator, {
      error_contains: 'timeout',
      limit: 3,
      cursor: first.json.next_cursor,
    });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.json).toMatchObject({ matching: 1, replayed: 1, skipped: 0, next_cursor: null });
    expect(rest.json.replayed_run_ids).toEqual([timeouts[1]]);

    // Each is pending again with a fresh budget of attempts, numbered on, as the single replay does.
    for (const id of timeouts) {
      const run = await http('GET', `/v1/runs/${id}`, { key: acme.reader });
      expect(run.json).toMatchObject({ state: 'pending', attempt: 2, max_attempts: 4 });
    }
    // The rest is untouched: the other job's dead runs, and every dead run of the other tenant.
    for (const id of [...refused, ...otherDead]) expect(await stateOf(id)).toBe('dead');
    const left = await replay(acme.operator, { dry_run: true });
    expect(left.json.matching).toBe(2);
  });

  test('a run that stops being dead between the read and the write is skipped and counted', async () => {
    expect(await db.store.countDeadRuns({ tenantId: 'acme', filter: { jobId: 'mail' } })).toEqual({
      count: 2,
      atLeast: false,
    });
    // A pause point between the batch's read and its write: another operator replays one run of it.
    const paused: Queryable = {
      query: async (sql: string, params?: unknown[]) => {
        if (sql === R.runReplay)
          await db.store.replayRun({ tenantId: 'acme', runId: refused[1]!, now: db.clock.nowMs() });
        return db.pool.query(sql, params);
      },
    } as Queryable;
    const done = await replayDeadRuns(paused, {
      tenantId: 'acme',
      filter: { jobId: 'mail' },
      limit: 10,
      now: db.clock.nowMs(),
      agingStepMs: 1000,
    });
    expect(done).toEqual({ matched: 2, replayed: [refused[0]], skipped: 1, nextCursor: null });
    for (const id of refused) expect(await stateOf(id)).toBe('pending');
    // Replayed once each: the single replay's attempt 2, not a second pass.
    const { rows } = await db.pool.query('SELECT attempt FROM runs WHERE run_id = ANY($1::uuid[])', [
      refused,
    ]);
    expect(rows.map((r) => r.attempt)).toEqual([2, 2]);
  });

  test("the other tenant's replay sees only its own", async () => {
    const counted = await replay(other.operator, { dry_run: true });
    expect(counted.json.matching).toBe(3);
    const done = await replay(other.admin, {});
    expect(done.json).toMatchObject({ matching: 3, replayed: 3, skipped: 0, next_cursor: null });
    expect(new Set(done.json.replayed_run_ids)).toEqual(new Set(otherDead));
    expect(await stateOf(refused[0]!)).toBe('pending');
  });
});
