/**
 * Issue 14, item 3: a lease token is not a capability across tenants. Tenant B's worker key sends
 * a heartbeat with one of B's own run ids and tenant A's lease token: A's claim must not be renewed
 * (its `lease_expires_at` in `run_claims` stays as it was), and B is told the lease is lost. Over
 * real HTTP on both heartbeat routes, and at the store.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, uniqueId, upsertJob } from '../setup/factories.js';
import { type Api, client, expectError, keysFor, type RoleKeys, startApi } from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let a: RoleKeys;
let b: RoleKeys;
const iso = (ms: number) => new Date(ms).toISOString();

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  a = await keysFor(db, 'tenant-a');
  b = await keysFor(db, 'tenant-b');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

/** One run of a fresh job of `keys`' tenant in `pool`, claimed over HTTP: its run id and token. */
async function claimedRun(keys: RoleKeys, pool: string): Promise<{ run_id: string; lease_token: string }> {
  const jobId = uniqueId('j');
  const put = await http('PUT', `/v1/jobs/${jobId}`, {
    key: keys.operator,
    body: { schedule: '@every 1h', handler: 'h', pool },
  });
  expect(put.status, put.text).toBe(200);
  const t = await http('POST', `/v1/jobs/${jobId}/runs`, {
    key: keys.operator,
    body: { scheduled_for: iso(db.clock.nowMs() - 1000) },
  });
  expect(t.status, t.text).toBe(201);
  const c = await http('POST', '/v1/leases', { key: keys.worker, body: { worker_id: 'w', pool } });
  expect(c.json.runs, c.text).toHaveLength(1);
  return c.json.runs[0];
}

/** The expiry of the claim row holding `token`, straight from `run_claims`. */
async function claimExpiry(token: string): Promise<string> {
  const { rows } = await db.pool.query('SELECT lease_expires_at FROM run_claims WHERE lease_token = $1', [
    token,
  ]);
  return (rows[0].lease_expires_at as Date).toISOString();
}

test("B's own run id with A's token renews nothing of A's on either heartbeat route", async () => {
  const victim = await claimedRun(a, uniqueId('p-a'));
  const mine = await claimedRun(b, uniqueId('p-b'));
  const before = await claimExpiry(victim.lease_token);
  db.clock.advance(20_000);

  const one = await http('POST', `/v1/runs/${mine.run_id}/heartbeat`, {
    key: b.worker,
    body: { lease_token: victim.lease_token },
  });
  expectError(one, 409, 'lease_lost');
  expect(await claimExpiry(victim.lease_token)).toBe(before);

  const many = await http('POST', '/v1/workers/w-b/heartbeat', {
    key: b.worker,
    body: { leases: [{ run_id: mine.run_id, lease_token: victim.lease_token }] },
  });
  expect(many.status, many.text).toBe(200);
  expect(many.json.renewed).toEqual([]);
  expect(many.json.lost).toEqual([mine.run_id]);
  expect(await claimExpiry(victim.lease_token)).toBe(before);

  // A's own pair still renews A's claim.
  const own = await http('POST', `/v1/runs/${victim.run_id}/heartbeat`, {
    key: a.worker,
    body: { lease_token: victim.lease_token },
  });
  expect(own.status, own.text).toBe(200);
  expect(await claimExpiry(victim.lease_token)).toBe(iso(db.clock.nowMs() + 30_000));
});

test('the store renews a claim only for a (run, token) pair it holds, of the given tenant', async () => {
  const now = db.clock.nowMs();
  const pool = uniqueId('p-store');
  const runOf = async (tenantId: string) => {
    const def = job({ pool });
    await upsertJob(db.store, { tenantId, job: def, now });
    const run = await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: now - 1000, now });
    const [claimed] = await db.store.claimRuns({ workerId: 'w', pool, max: 1, now, tenantId });
    expect(claimed?.runId).toBe(run.runId);
    return claimed!;
  };
  const victim = await runOf('tenant-a');
  const mine = await runOf('tenant-b');
  const before = await claimExpiry(victim.leaseToken);
  const later = now + 20_000;
  for (const tenantId of ['tenant-b', undefined]) {
    const r = await db.store.heartbeatRuns({
      leases: [{ runId: mine.runId, leaseToken: victim.leaseToken }],
      now: later,
      tenantId,
    });
    expect(r).toEqual({ renewed: [], lost: [mine.runId] });
    expect(await claimExpiry(victim.leaseToken)).toBe(before);
  }
  // A's run with A's token, but as tenant B: not B's run, so nothing is renewed either.
  const asB = await db.store.heartbeatRuns({
    leases: [{ runId: victim.runId, leaseToken: victim.leaseToken }],
    now: later,
    tenantId: 'tenant-b',
  });
  expect(asB.renewed).toEqual([]);
  expect(await claimExpiry(victim.leaseToken)).toBe(before);
});
