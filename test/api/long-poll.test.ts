/**
 * Long-poll amplification (issue 14, item 4): many waiting `POST /v1/leases` from one worker key
 * must not re-query the database every 200 ms, must be capped per key and per tenant, and their
 * re-claims must count against the tenant's quota. Real HTTP, the test database, the FakeClock the
 * waiting requests sleep on; the store is the real one, with its claims counted.
 */
import { afterEach, beforeEach, expect, test } from 'vitest';
import {
  LONG_POLL_MIN_SLEEP_MS,
  LONG_POLL_RETRY_AFTER_S,
  LONG_POLL_UNLISTENED_MS,
  RunWakeups,
} from '../../src/api/long-poll.js';
import type { PostgresStore } from '../../src/store/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import {
  type Answer,
  type Api,
  client,
  expectError,
  keysFor,
  type RoleKeys,
  startApi,
  until,
} from './helpers.js';

let db: TestDatabase;
let api: Api | undefined;
let keys: RoleKeys;
let claims = 0;

/** The real store, counting the claim statements it runs. */
function countingStore(store: PostgresStore): PostgresStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop !== 'claimRuns' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        claims += 1;
        return value.apply(target, args);
      };
    },
  });
}

beforeEach(async () => {
  db = await setupDatabase();
  keys = await keysFor(db, 'acme');
  claims = 0;
});

afterEach(async () => {
  await api?.close();
  api = undefined;
  await db?.teardown();
});

/** Starts `n` long-polls with `key`; each settles into `answers` when it is answered. */
function longPolls(n: number, key: string, answers: Answer[], pool = 'p-none') {
  const http = client(api!.base);
  return Array.from({ length: n }, (_, i) =>
    http('POST', '/v1/leases', { key, body: { worker_id: `w-${i}`, pool, wait_ms: 30_000 } }).then((a) => {
      answers.push(a);
      return a;
    }),
  );
}

test('waiting long-polls do not re-claim on a short poll: none in 800 ms of waiting', async () => {
  api = await startApi(db, { store: countingStore(db.store) });
  const answers: Answer[] = [];
  const pending = longPolls(10, keys.worker, answers);
  await until(() => db.clock.pendingSleeps === 10, 'ten long-polls to wait');
  expect(claims).toBe(10); // the first claim of each
  // The unfixed server re-claimed every 200 ms: four more claims per waiting request here.
  for (let i = 0; i < 4; i++) {
    db.clock.advance(200);
    await until(() => db.clock.pendingSleeps === 10, 'the long-polls to wait again');
  }
  expect(LONG_POLL_UNLISTENED_MS).toBeGreaterThan(800);
  expect(claims).toBe(10);
  expect(answers).toEqual([]);
  db.clock.advance(30_000);
  for (const a of await Promise.all(pending)) expect(a.json.runs).toEqual([]);
});

test('a run claimable ahead but not for this request does not make a long-poll claim in a loop', async () => {
  api = await startApi(db, { store: countingStore(db.store) });
  const http = client(api.base);
  const put = await http('PUT', '/v1/jobs/other', {
    key: keys.operator,
    body: { schedule: '@every 1h', handler: 'other', pool: 'p-ahead' },
  });
  expect(put.status, put.text).toBe(200);
  // A run of another handler, claimable 500 ms from now: inside the request's ahead_ms.
  const run = await http('POST', '/v1/jobs/other/runs', {
    key: keys.operator,
    body: { scheduled_for: new Date(db.clock.nowMs() + 500).toISOString() },
  });
  expect(run.status, run.text).toBe(201);
  const pending = http('POST', '/v1/leases', {
    key: keys.worker,
    body: { worker_id: 'w-ahead', pool: 'p-ahead', handlers: ['mine'], ahead_ms: 1000, wait_ms: 2000 },
  });
  await until(() => db.clock.pendingSleeps === 1, 'the long-poll to wait');
  // The unfixed server slept 0 ms here and claimed again at once, without end.
  expect(claims).toBe(1);
  db.clock.advance(LONG_POLL_MIN_SLEEP_MS);
  await until(() => claims === 2 && db.clock.pendingSleeps === 1, 'one more claim, then a wait');
  db.clock.advance(2000);
  expect((await pending).json.runs).toEqual([]);
});

test('waiting long-polls are capped per key and per tenant: 429 rate_limited with Retry-After', async () => {
  api = await startApi(db, { limits: { longPollsPerKey: 3, longPollsPerTenant: 5 } });
  const more = await keysFor(db, 'acme');
  const other = await keysFor(db, 'globex');
  const answers: Answer[] = [];
  const pending = [...longPolls(3, keys.worker, answers)];
  await until(() => db.clock.pendingSleeps === 3, 'three long-polls of one key to wait');
  // The key's fourth is refused at once, before any claim.
  const [refused] = await Promise.all(longPolls(1, keys.worker, answers));
  expectError(refused!, 429, 'rate_limited');
  expect(refused!.headers.get('retry-after')).toBe(String(LONG_POLL_RETRY_AFTER_S));
  // Another key of the tenant gets the tenant's two remaining places, then 429.
  pending.push(...longPolls(2, more.worker, answers));
  await until(() => db.clock.pendingSleeps === 5, 'five long-polls of the tenant to wait');
  const [overTenant] = await Promise.all(longPolls(1, more.admin, answers));
  expectError(overTenant!, 429, 'rate_limited');
  // Another tenant is not affected, and a claim without wait_ms is never capped.
  pending.push(...longPolls(1, other.worker, answers));
  await until(() => db.clock.pendingSleeps === 6, "the other tenant's long-poll to wait");
  const now = await client(api.base)('POST', '/v1/leases', {
    key: keys.worker,
    body: { worker_id: 'w-now', pool: 'p-none' },
  });
  expect(now.status, now.text).toBe(200);
  db.clock.advance(30_000);
  for (const a of await Promise.all(pending)) expect(a.status).toBe(200);
  // Places are given back when the long-polls end.
  const again = longPolls(3, keys.worker, answers);
  await until(() => db.clock.pendingSleeps === 3, 'the key to have its places back');
  db.clock.advance(30_000);
  for (const a of await Promise.all(again)) expect(a.status).toBe(200);
});

test('closing the server answers waiting long-polls at once, with no runs', async () => {
  api = await startApi(db);
  const answers: Answer[] = [];
  const pending = longPolls(3, keys.worker, answers);
  await until(() => db.clock.pendingSleeps === 3, 'three long-polls to wait');
  // No time passes: the unfixed server held the close until each wait (30 s) ended.
  await api.close();
  api = undefined;
  for (const a of await Promise.all(pending)) {
    expect(a.status).toBe(200);
    expect(a.json.runs).toEqual([]);
  }
  expect(db.clock.pendingSleeps).toBe(0);
});

test("each re-claim of a waiting long-poll takes a token of the tenant's re-claim quota, not of its request quota", async () => {
  // Buckets of 4 that refill once in 1000 s.
  api = await startApi(db, { store: countingStore(db.store), quota: { perSecond: 0.001, burst: 4 } });
  const http = client(api.base);
  const answers: Answer[] = [];
  const pending = longPolls(1, keys.worker, answers); // its request takes 1 token of the worker bucket
  await until(() => db.clock.pendingSleeps === 1, 'the long-poll to wait');
  // Five fallback wake-ups: four re-claims spend the re-claim bucket; the fifth waits for a token.
  for (let i = 0; i < 5; i++) {
    db.clock.advance(LONG_POLL_UNLISTENED_MS);
    await until(() => db.clock.pendingSleeps === 1, 'the long-poll to wait again');
  }
  expect(claims).toBe(1 + 4);
  // The request bucket is whole (a lease request is paid from the worker bucket): four requests
  // pass, the next is refused.
  for (let i = 0; i < 4; i++) expect((await http('GET', '/v1/jobs', { key: keys.reader })).status).toBe(200);
  expectError(await http('GET', '/v1/jobs', { key: keys.reader }), 429, 'rate_limited');
  db.clock.advance(30_000);
  await Promise.all(pending);
});

test("another tenant's notifications cannot spend a tenant's request quota: re-claims spend the re-claim quota", async () => {
  // Review finding: every notification (any tenant's trigger or release) woke every waiter, and
  // each re-claim took a token of the waiter's request quota, so tenant a's triggers spent tenant
  // b's quota until b's heartbeats and completions were refused.
  const wakeups = new RunWakeups(db.clock);
  wakeups.listening = true;
  api = await startApi(db, {
    store: countingStore(db.store),
    wakeups,
    quota: { perSecond: 0.001, burst: 10 },
  });
  const http = client(api.base);
  const answers: Answer[] = [];
  const pending = longPolls(5, keys.worker, answers); // 5 tokens of the worker bucket
  await until(() => wakeups.waiting === 5, 'five long-polls to wait on notifications');
  // 50 notifications (another tenant's triggers), no time passing.
  for (let i = 0; i < 50; i++) {
    wakeups.wake();
    await until(() => db.clock.pendingSleeps === 5, 'the long-polls to sleep again');
  }
  // Ten re-claims spent the re-claim bucket (10); then the waiters wait for its tokens.
  expect(claims).toBe(5 + 10);
  // The request quota is whole: 10 tokens. (Unfixed: spent, 429.)
  for (let i = 0; i < 10; i++) expect((await http('GET', '/v1/jobs', { key: keys.reader })).status).toBe(200);
  expectError(await http('GET', '/v1/jobs', { key: keys.reader }), 429, 'rate_limited');
  db.clock.advance(30_000);
  for (const a of await Promise.all(pending)) expect(a.status).toBe(200);
});
