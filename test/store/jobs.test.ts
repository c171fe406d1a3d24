/**
 * Job definitions in the store: upsert semantics (created / unchanged / updated and what each does
 * to `next_run_at`), paging, pause/resume, delete, tenant isolation, and bad input that writes nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type JobInput, shardOf, validateJob, validateJobs } from '../../src/core/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { alignUp, countRows, expectTockError, job, uniqueId, upsertJob } from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

const TEN_S = 10_000;

/** The first `@every 10s` slot strictly after `ms`. */
const slotAfter = (ms: number) => (Math.floor(ms / TEN_S) + 1) * TEN_S;

async function jobRow(tenantId: string, jobId: string) {
  const { rows } = await db.pool.query('SELECT * FROM jobs WHERE tenant_id = $1 AND job_id = $2', [
    tenantId,
    jobId,
  ]);
  return rows;
}

async function snapshot() {
  const jobs = await db.pool.query('SELECT * FROM jobs ORDER BY tenant_id, job_id');
  const runs = await db.pool.query('SELECT * FROM run_states ORDER BY run_id');
  return { jobs: jobs.rows, runs: runs.rows };
}

describe('upsert', () => {
  test('creates a job with its defaults and the first epoch-aligned slot at or after now', async () => {
    const tenantId = uniqueId('t-create');
    db.clock.advance(3_500); // off the 10 s grid
    const now = db.clock.nowMs();
    expect(now % TEN_S).not.toBe(0);
    const def = job();
    const before = await countRows(db.pool, 'jobs');

    const { job: created, change } = await upsertJob(db.store, { tenantId, job: def, now });

    expect(change).toBe('created');
    expect(created.nextRunAt).toEqual(new Date(alignUp(now, TEN_S)));
    expect(created.nextRunAt!.getTime() % TEN_S).toBe(0);
    expect(created.nextRunAt!.getTime() - now).toBe(alignUp(now, TEN_S) - now);
    expect(created).toMatchObject({
      tenantId,
      jobId: def.jobId,
      handler: 'noop',
      payload: {},
      schedule: '@every 10s',
      timezone: 'UTC',
      priority: 0,
      maxAttempts: 3,
      backoffBaseSeconds: 2,
      backoffCapSeconds: 3600,
      misfire: 'fire_once',
      catchUpLimit: 10,
      pool: 'default',
      leaseSeconds: null,
      enabled: true,
      version: 1,
    });
    expect(created.createdAt).toEqual(new Date(now));
    expect(created.updatedAt).toEqual(new Date(now));
    expect(await countRows(db.pool, 'jobs')).toBe(before + 1);
    const rows = await jobRow(tenantId, def.jobId);
    expect(rows).toHaveLength(1);
    expect(rows[0].next_run_at).toEqual(new Date(alignUp(now, TEN_S)));
  });

  test('a job registered exactly on a slot starts at that slot', async () => {
    const tenantId = uniqueId('t-onslot');
    db.clock.set(alignUp(db.clock.nowMs(), TEN_S));
    const now = db.clock.nowMs();
    const { job: created } = await upsertJob(db.store, { tenantId, job: job(), now });
    expect(created.nextRunAt).toEqual(new Date(now));
  });

  test('the same definition again is unchanged and keeps next_run_at, after the clock moved and after a tick', async () => {
    const tenantId = uniqueId('t-same');
    const def = job({ payload: { a: 1, b: [1, 2] } });
    const t = db.clock.nowMs();
    const { job: first } = await upsertJob(db.store, { tenantId, job: def, now: t });
    const original = await jobRow(tenantId, def.jobId);

    db.clock.advance(25_000);
    const again = await upsertJob(db.store, { tenantId, job: { ...def }, now: db.clock.nowMs() });
    expect(again.change).toBe('unchanged');
    expect(again.job.nextRunAt).toEqual(first.nextRunAt);
    expect(again.job.version).toBe(1);
    expect(again.job.updatedAt).toEqual(new Date(t));
    expect(await jobRow(tenantId, def.jobId)).toEqual(original);

    // A tick advances next_run_at; re-registering must not pull it back to "first slot from now".
    const now = db.clock.nowMs();
    await db.store.tick({ now, lookaheadMs: 0, batchSize: 1000 });
    const advanced = await db.store.getJob({ tenantId, jobId: def.jobId });
    expect(advanced.nextRunAt).toEqual(new Date(slotAfter(now)));
    expect(advanced.nextRunAt).not.toEqual(first.nextRunAt);

    db.clock.advance(3_000);
    // Same definition, keys in a different order: still the same definition.
    const reordered = {
      payload: { b: [1, 2], a: 1 },
      handler: 'noop',
      schedule: '@every 10s',
      jobId: def.jobId,
    };
    const third = await upsertJob(db.store, { tenantId, job: reordered, now: db.clock.nowMs() });
    expect(third.change).toBe('unchanged');
    expect(third.job.nextRunAt).toEqual(new Date(slotAfter(now)));
    expect(third.job.version).toBe(1);
    const row = await jobRow(tenantId, def.jobId);
    expect(row[0].next_run_at).toEqual(new Date(slotAfter(now)));
    expect(row[0].version).toBe(1);
    expect(row[0].updated_at).toEqual(new Date(t));
  });

  test('a new payload is an update: version + 1, next_run_at kept', async () => {
    const tenantId = uniqueId('t-payload');
    const def = job({ payload: { n: 1 } });
    const t = db.clock.nowMs();
    const { job: first } = await upsertJob(db.store, { tenantId, job: def, now: t });

    db.clock.advance(37_000); // a recomputation from now would give a different slot
    const now = db.clock.nowMs();
    expect(alignUp(now, TEN_S)).not.toBe(first.nextRunAt!.getTime());
    const { job: updated, change } = await upsertJob(db.store, {
      tenantId,
      job: { ...def, payload: { n: 2 } },
      now,
    });

    expect(change).toBe('updated');
    expect(updated.version).toBe(2);
    expect(updated.payload).toEqual({ n: 2 });
    expect(updated.nextRunAt).toEqual(first.nextRunAt);
    expect(updated.createdAt).toEqual(new Date(t));
    expect(updated.updatedAt).toEqual(new Date(now));
    const row = await jobRow(tenantId, def.jobId);
    expect(row[0]).toMatchObject({ version: 2, payload: { n: 2 }, next_run_at: first.nextRunAt });
  });

  test('a new schedule recomputes next_run_at from now', async () => {
    const tenantId = uniqueId('t-sched');
    const def = job();
    const { job: first } = await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });

    db.clock.advance(37_000);
    const now = db.clock.nowMs();
    const { job: updated, change } = await upsertJob(db.store, {
      tenantId,
      job: { ...def, schedule: '@every 1m' },
      now,
    });
    expect(change).toBe('updated');
    expect(updated.version).toBe(2);
    expect(updated.schedule).toBe('@every 1m');
    expect(updated.nextRunAt).toEqual(new Date(alignUp(now, 60_000)));
    expect(updated.nextRunAt).not.toEqual(first.nextRunAt);

    // A new timezone also recomputes (cron in Tokyo: 09:00 local is 00:00 UTC).
    db.clock.advance(1_000);
    const cronAt = db.clock.nowMs();
    const tokyo = await upsertJob(db.store, {
      tenantId,
      job: { ...def, schedule: '0 9 * * *', timezone: 'Asia/Tokyo' },
      now: cronAt,
    });
    expect(tokyo.change).toBe('updated');
    expect(tokyo.job.version).toBe(3);
    expect(tokyo.job.nextRunAt).toEqual(new Date(alignUp(cronAt, 86_400_000)));
  });
});

describe('get and list', () => {
  test('cursor pages over 7 jobs with limit 3 give every job once, ascending, then a null cursor', async () => {
    const tenantId = uniqueId('t-list');
    const ids = ['job-g', 'job-c', 'job-a', 'job-f', 'job-b', 'job-e', 'job-d'];
    for (const jobId of ids) {
      await upsertJob(db.store, {
        tenantId,
        job: job({ jobId, handler: `h-${jobId}` }),
        now: db.clock.nowMs(),
      });
    }
    // Another tenant's jobs sort in between and must not show.
    await upsertJob(db.store, {
      tenantId: uniqueId('t-list-other'),
      job: job({ jobId: 'job-bb' }),
      now: db.clock.nowMs(),
    });

    const pages: string[][] = [];
    const cursors: (string | null)[] = [];
    let cursor: string | null = null;
    do {
      const page = await db.store.listJobs({ tenantId, limit: 3, cursor });
      pages.push(page.items.map((j) => j.jobId));
      for (const j of page.items) expect(j.tenantId).toBe(tenantId);
      cursors.push(page.nextCursor);
      cursor = page.nextCursor;
    } while (cursor !== null && pages.length < 10);

    expect(pages).toEqual([['job-a', 'job-b', 'job-c'], ['job-d', 'job-e', 'job-f'], ['job-g']]);
    expect(cursors[0]).toEqual(expect.any(String));
    expect(cursors[1]).toEqual(expect.any(String));
    expect(cursors[2]).toBeNull();

    for (const jobId of ids) {
      const got = await db.store.getJob({ tenantId, jobId });
      expect(got.jobId).toBe(jobId);
      expect(got.tenantId).toBe(tenantId);
      expect(got.handler).toBe(`h-${jobId}`);
    }
  });

  test('a page that ends exactly at the last job has a null cursor; an empty tenant lists nothing', async () => {
    const tenantId = uniqueId('t-list6');
    for (const jobId of ['a1', 'a2', 'a3', 'a4', 'a5', 'a6']) {
      await upsertJob(db.store, { tenantId, job: job({ jobId }), now: db.clock.nowMs() });
    }
    const one = await db.store.listJobs({ tenantId, limit: 3 });
    expect(one.items.map((j) => j.jobId)).toEqual(['a1', 'a2', 'a3']);
    const two = await db.store.listJobs({ tenantId, limit: 3, cursor: one.nextCursor });
    expect(two.items.map((j) => j.jobId)).toEqual(['a4', 'a5', 'a6']);
    expect(two.nextCursor).toBeNull();
    const all = await db.store.listJobs({ tenantId, limit: 500 });
    expect(all.items).toHaveLength(6);
    expect(all.nextCursor).toBeNull();

    const empty = await db.store.listJobs({ tenantId: uniqueId('t-empty'), limit: 10 });
    expect(empty).toEqual({ items: [], nextCursor: null });
  });
});

describe('pause and resume', () => {
  test('a paused job is disabled and a tick creates nothing for it', async () => {
    const tenantId = uniqueId('t-pause');
    const def = job();
    const { job: created } = await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
    db.clock.advance(20_000); // due
    const pausedAt = db.clock.nowMs();
    const paused = await db.store.pauseJob({ tenantId, jobId: def.jobId, now: pausedAt });
    expect(paused.enabled).toBe(false);
    expect(paused.updatedAt).toEqual(new Date(pausedAt));
    expect(paused.nextRunAt).toEqual(created.nextRunAt);

    const tick = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 60_000, batchSize: 1000 });
    expect(tick.created.filter((r) => r.tenantId === tenantId)).toEqual([]);
    expect(await countRows(db.pool, 'run_states', 'tenant_id = $1', [tenantId])).toBe(0);
    const row = await jobRow(tenantId, def.jobId);
    expect(row[0].enabled).toBe(false);
    expect(row[0].next_run_at).toEqual(created.nextRunAt); // the tick did not touch it

    // Pausing again is harmless and still disabled.
    const again = await db.store.pauseJob({ tenantId, jobId: def.jobId, now: db.clock.nowMs() });
    expect(again.enabled).toBe(false);
  });

  test('resume starts at the first slot at or after now: the paused time is not backfilled', async () => {
    const tenantId = uniqueId('t-resume');
    const def = job();
    const { job: created } = await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
    await db.store.pauseJob({ tenantId, jobId: def.jobId, now: db.clock.nowMs() });

    db.clock.set(alignUp(db.clock.nowMs() + 95_000, TEN_S) + 4_321); // many missed slots, and off the grid
    const resumedAt = db.clock.nowMs();
    expect(resumedAt % TEN_S).not.toBe(0);
    const resumed = await db.store.resumeJob({ tenantId, jobId: def.jobId, now: resumedAt });
    expect(resumed.enabled).toBe(true);
    expect(resumed.nextRunAt).toEqual(new Date(alignUp(resumedAt, TEN_S)));
    expect(resumed.nextRunAt).not.toEqual(created.nextRunAt);
    expect(resumed.updatedAt).toEqual(new Date(resumedAt));

    // Nothing is due yet: the missed slots are gone.
    const early = await db.store.tick({ now: resumedAt, lookaheadMs: 0, batchSize: 1000 });
    expect(early.created.filter((r) => r.tenantId === tenantId)).toEqual([]);

    db.clock.set(alignUp(resumedAt, TEN_S));
    const onTime = await db.store.tick({ now: db.clock.nowMs(), lookaheadMs: 0, batchSize: 1000 });
    const mine = onTime.created.filter((r) => r.tenantId === tenantId);
    expect(mine.map((r) => r.scheduledFor)).toEqual([new Date(alignUp(resumedAt, TEN_S))]);
    expect(await countRows(db.pool, 'run_states', 'tenant_id = $1', [tenantId])).toBe(1);
  });

  test('resume exactly on a slot starts at that slot; resuming an enabled job changes nothing', async () => {
    const tenantId = uniqueId('t-resume2');
    const def = job();
    await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
    await db.store.pauseJob({ tenantId, jobId: def.jobId, now: db.clock.nowMs() });
    db.clock.set(alignUp(db.clock.nowMs() + 120_000, TEN_S));
    const now = db.clock.nowMs();
    const resumed = await db.store.resumeJob({ tenantId, jobId: def.jobId, now });
    expect(resumed.nextRunAt).toEqual(new Date(now));

    const before = await jobRow(tenantId, def.jobId);
    db.clock.advance(7_000);
    const again = await db.store.resumeJob({ tenantId, jobId: def.jobId, now: db.clock.nowMs() });
    expect(again.enabled).toBe(true);
    expect(again.nextRunAt).toEqual(new Date(now));
    expect(await jobRow(tenantId, def.jobId)).toEqual(before);
  });
});

describe('delete', () => {
  test('deletes the job, cancels its pending runs, keeps history, and is not_found afterwards', async () => {
    const tenantId = uniqueId('t-delete');
    const def = job();
    await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
    const now = db.clock.nowMs();
    const slots = [now - 4_000, now - 3_000, now - 2_000, now - 1_000];
    const runs: { runId: string }[] = [];
    for (const s of slots)
      runs.push(await db.store.triggerRun({ tenantId, jobId: def.jobId, scheduledFor: s, now }));
    const claimed = await db.store.claimRuns({ workerId: 'w-del', pool: 'default', max: 2, now, tenantId });
    expect(claimed.map((c) => c.runId)).toEqual([runs[0]!.runId, runs[1]!.runId]);
    await db.store.completeRuns({ leases: [claimed[0]!], now });

    db.clock.advance(1_000);
    const deletedAt = db.clock.nowMs();
    const result = await db.store.deleteJob({ tenantId, jobId: def.jobId, now: deletedAt });
    expect(result).toEqual({ cancelledRuns: 2 });

    expect(await jobRow(tenantId, def.jobId)).toEqual([]);
    await expectTockError(db.store.getJob({ tenantId, jobId: def.jobId }), 'not_found');

    const { rows } = await db.pool.query(
      'SELECT run_id, state, finished_at FROM run_states WHERE tenant_id = $1 ORDER BY scheduled_for',
      [tenantId],
    );
    expect(rows.map((r) => [r.run_id, r.state])).toEqual([
      [runs[0]!.runId, 'succeeded'],
      [runs[1]!.runId, 'running'],
      [runs[2]!.runId, 'cancelled'],
      [runs[3]!.runId, 'cancelled'],
    ]);
    expect(rows[2].finished_at).toEqual(new Date(deletedAt));
    expect(rows[3].finished_at).toEqual(new Date(deletedAt));
    // Deleting the job keeps the runs' attempts (the succeeded and the running one are their run rows).
    const attemptsOf = async (i: number) =>
      (await db.store.getRun({ tenantId, runId: runs[i]!.runId })).attempts.map((a) => a.outcome);
    expect([await attemptsOf(0), await attemptsOf(1), await attemptsOf(2)]).toEqual([
      ['succeeded'],
      [null],
      [],
    ]);
    const history = await db.store.listRuns({ tenantId, jobId: def.jobId, limit: 10 });
    expect(history.items).toHaveLength(4);

    // Every operation on the deleted job is now not_found, and writes nothing.
    const snap = await snapshot();
    await expectTockError(db.store.deleteJob({ tenantId, jobId: def.jobId, now: deletedAt }), 'not_found');
    await expectTockError(db.store.pauseJob({ tenantId, jobId: def.jobId, now: deletedAt }), 'not_found');
    await expectTockError(db.store.resumeJob({ tenantId, jobId: def.jobId, now: deletedAt }), 'not_found');
    await expectTockError(db.store.triggerRun({ tenantId, jobId: def.jobId, now: deletedAt }), 'not_found');
    expect(await snapshot()).toEqual(snap);
  });
});

describe('tenants', () => {
  test('the same job id in two tenants is two jobs', async () => {
    const a = uniqueId('t-a');
    const b = uniqueId('t-b');
    const jobId = 'shared-id';
    const ra = await upsertJob(db.store, {
      tenantId: a,
      job: job({ jobId, handler: 'ha' }),
      now: db.clock.nowMs(),
    });
    const rb = await upsertJob(db.store, {
      tenantId: b,
      job: job({ jobId, handler: 'hb' }),
      now: db.clock.nowMs(),
    });
    expect(ra.change).toBe('created');
    expect(rb.change).toBe('created');
    expect(await countRows(db.pool, 'jobs', 'job_id = $1 AND tenant_id = ANY($2)', [jobId, [a, b]])).toBe(2);
    expect((await db.store.getJob({ tenantId: a, jobId })).handler).toBe('ha');
    expect((await db.store.getJob({ tenantId: b, jobId })).handler).toBe('hb');

    // Pausing one leaves the other; deleting one leaves the other.
    await db.store.pauseJob({ tenantId: a, jobId, now: db.clock.nowMs() });
    expect((await db.store.getJob({ tenantId: b, jobId })).enabled).toBe(true);
    await db.store.deleteJob({ tenantId: a, jobId, now: db.clock.nowMs() });
    await expectTockError(db.store.getJob({ tenantId: a, jobId }), 'not_found');
    const left = await db.store.getJob({ tenantId: b, jobId });
    expect(left).toMatchObject({ tenantId: b, handler: 'hb', enabled: true, version: 1 });
    expect((await db.store.listJobs({ tenantId: a, limit: 10 })).items).toEqual([]);
    expect((await db.store.listJobs({ tenantId: b, limit: 10 })).items.map((j) => j.jobId)).toEqual([jobId]);
  });

  test("another tenant's job is not_found for get, pause, resume, delete and trigger, and stays as it was", async () => {
    const owner = uniqueId('t-owner');
    const other = uniqueId('t-other');
    const def = job();
    await upsertJob(db.store, { tenantId: owner, job: def, now: db.clock.nowMs() });
    const snap = await snapshot();
    const now = db.clock.nowMs();
    await expectTockError(db.store.getJob({ tenantId: other, jobId: def.jobId }), 'not_found');
    await expectTockError(db.store.pauseJob({ tenantId: other, jobId: def.jobId, now }), 'not_found');
    await expectTockError(db.store.resumeJob({ tenantId: other, jobId: def.jobId, now }), 'not_found');
    await expectTockError(db.store.deleteJob({ tenantId: other, jobId: def.jobId, now }), 'not_found');
    await expectTockError(db.store.triggerRun({ tenantId: other, jobId: def.jobId, now }), 'not_found');
    expect(await snapshot()).toEqual(snap);
  });
});

describe('bad input is a typed error and writes nothing', () => {
  const tenantId = 't-bad';
  const existing = 'existing-job';

  beforeAll(async () => {
    await upsertJob(db.store, { tenantId, job: job({ jobId: existing }), now: T0 });
  });

  /** Runs `op`, expects `code`, and shows that the jobs and runs tables are exactly as before. */
  async function rejects(op: () => Promise<unknown>, code: 'validation_error' | 'not_found', field?: string) {
    const jobsBefore = await countRows(db.pool, 'jobs');
    const snap = await snapshot();
    const err = await expectTockError(op(), code);
    if (field !== undefined) expect(err.details.field).toBe(field);
    expect(await countRows(db.pool, 'jobs')).toBe(jobsBefore);
    expect(await snapshot()).toEqual(snap);
    return err;
  }

  const upsert = (j: JobInput, tenant = tenantId) =>
    upsertJob(db.store, { tenantId: tenant, job: j, now: db.clock.nowMs() });

  test('unknown job on get, pause, resume, delete and trigger is not_found', async () => {
    const now = db.clock.nowMs();
    const jobId = 'no-such-job';
    const err = await rejects(() => db.store.getJob({ tenantId, jobId }), 'not_found');
    expect(err.details.job_id).toBe(jobId);
    await rejects(() => db.store.pauseJob({ tenantId, jobId, now }), 'not_found');
    await rejects(() => db.store.resumeJob({ tenantId, jobId, now }), 'not_found');
    await rejects(() => db.store.deleteJob({ tenantId, jobId, now }), 'not_found');
    await rejects(() => db.store.triggerRun({ tenantId, jobId, now }), 'not_found');
    await rejects(
      () => db.store.triggerRun({ tenantId, jobId, scheduledFor: now - 1_000, now }),
      'not_found',
    );
  });

  test.each([
    '61 * * * *',
    '@every 0s',
    '@every -5s',
    '@every',
    'not a cron',
    '@every 500ms',
    '@fortnightly',
    '* * * *',
    '@at yesterday',
    '',
  ])('bad schedule %j is a validation error, for a new job and for an existing one', async (schedule) => {
    await rejects(() => upsert(job({ schedule })), 'validation_error');
    await rejects(() => upsert(job({ jobId: existing, schedule })), 'validation_error');
  });

  test.each<[string, Partial<JobInput>, string]>([
    ['max_attempts 0', { maxAttempts: 0 }, 'max_attempts'],
    ['max_attempts 101', { maxAttempts: 101 }, 'max_attempts'],
    ['max_attempts 1.5', { maxAttempts: 1.5 }, 'max_attempts'],
    ['priority 1000', { priority: 1000 }, 'priority'],
    ['priority -1', { priority: -1 }, 'priority'],
    ['catch_up_limit 0', { catchUpLimit: 0 }, 'catch_up_limit'],
    ['backoff base 1', { backoffBaseSeconds: 1 }, 'backoff_base_seconds'],
    ['lease 0', { leaseSeconds: 0 }, 'lease_seconds'],
    ['bad job id (space)', { jobId: 'has space' }, 'job_id'],
    ['bad job id (empty)', { jobId: '' }, 'job_id'],
    ['bad job id (201 chars)', { jobId: 'x'.repeat(201) }, 'job_id'],
    ['bad job id (slash)', { jobId: 'a/b' }, 'job_id'],
    ['bad handler', { handler: 'bad handler!' }, 'handler'],
    ['bad pool', { pool: 'gpu pool' }, 'pool'],
  ])('%s is a validation error naming the field', async (_name, overrides, field) => {
    await rejects(() => upsert(job(overrides)), 'validation_error', field);
    if (overrides.jobId === undefined) {
      await rejects(() => upsert(job({ ...overrides, jobId: existing })), 'validation_error', field);
    }
  });

  test('bad timezone, bad misfire and an unknown field are validation errors', async () => {
    await rejects(
      () => upsert(job({ schedule: '0 3 * * *', timezone: 'Mars/Olympus_Mons' })),
      'validation_error',
    );
    await rejects(() => upsert(job({ jobId: existing, timezone: 'Nowhere/Land' })), 'validation_error');
    await rejects(() => upsert(job({ misfire: 'sometimes' as never })), 'validation_error');
    await rejects(
      () => upsert({ ...job({ jobId: existing }), retries: 3 } as unknown as JobInput),
      'validation_error',
      'retries',
    );
    await rejects(() => upsert(job({ payload: 'x'.repeat(70_000) })), 'validation_error', 'payload');
  });

  test('a bad tenant id or a bad now is a validation error', async () => {
    await rejects(() => upsert(job(), 'bad tenant'), 'validation_error', 'tenant_id');
    await rejects(() => upsert(job(), ''), 'validation_error', 'tenant_id');
    await rejects(
      () => upsertJob(db.store, { tenantId, job: job(), now: Number.NaN }),
      'validation_error',
      'now',
    );
  });

  test('bad ids on lookups are not_found', async () => {
    const now = db.clock.nowMs();
    await rejects(() => db.store.getJob({ tenantId: 'bad tenant', jobId: existing }), 'not_found');
    await rejects(() => db.store.getJob({ tenantId, jobId: 'bad id!' }), 'not_found');
    await rejects(() => db.store.pauseJob({ tenantId, jobId: '', now }), 'not_found');
    await rejects(() => db.store.deleteJob({ tenantId, jobId: 'x'.repeat(500), now }), 'not_found');
  });

  test('limit 0 and 501 and a garbage cursor are validation errors', async () => {
    await rejects(() => db.store.listJobs({ tenantId, limit: 0 }), 'validation_error', 'limit');
    await rejects(() => db.store.listJobs({ tenantId, limit: 501 }), 'validation_error', 'limit');
    await rejects(() => db.store.listJobs({ tenantId, limit: 2.5 }), 'validation_error', 'limit');
    await rejects(() => db.store.listJobs({ tenantId, limit: 10, cursor: 'garbage!!' }), 'validation_error');
    const notArray = Buffer.from('{"jobId":"a"}').toString('base64url');
    await rejects(() => db.store.listJobs({ tenantId, limit: 10, cursor: notArray }), 'validation_error');
    const wrongType = Buffer.from('[42]').toString('base64url');
    await rejects(() => db.store.listJobs({ tenantId, limit: 10, cursor: wrongType }), 'validation_error');
    // The boundaries themselves are fine.
    const one = await db.store.listJobs({ tenantId, limit: 1 });
    expect(one.items.map((j) => j.jobId)).toEqual([existing]);
    expect(one.nextCursor).toBeNull();
    const most = await db.store.listJobs({ tenantId, limit: 500 });
    expect(most.items.map((j) => j.jobId)).toEqual([existing]);
  });
});

describe('bulk upsert', () => {
  test('creates, updates and leaves unchanged in one call, with the same rules as one at a time', async () => {
    const tenantId = uniqueId('bulk');
    const jobs: JobInput[] = Array.from({ length: 300 }, (_, i) => job({ jobId: `bulk-${i}` }));
    const first = await db.store.upsertJobs({ tenantId, jobs, now: T0 });
    expect(first.changes).toEqual(jobs.map((j) => ({ jobId: j.jobId, change: 'created' })));
    const one = await db.store.getJob({ tenantId, jobId: 'bulk-7' });
    expect(one.nextRunAt).toEqual(new Date(slotAfter(T0 - 1)));

    // Later: two changed (one of them only its payload: next_run_at stays), the rest unchanged.
    const later = T0 + 25_000;
    const again = jobs.map((j, i) =>
      i === 7 ? { ...j, payload: { v: 2 } } : i === 8 ? { ...j, schedule: '@every 1m' } : j,
    );
    const second = await db.store.upsertJobs({ tenantId, jobs: again, now: later });
    expect(second.changes.filter((c) => c.change !== 'unchanged')).toEqual([
      { jobId: 'bulk-7', change: 'updated' },
      { jobId: 'bulk-8', change: 'updated' },
    ]);
    const seven = await db.store.getJob({ tenantId, jobId: 'bulk-7' });
    expect(seven).toMatchObject({ payload: { v: 2 }, nextRunAt: one.nextRunAt, version: 2 });
    const eight = await db.store.getJob({ tenantId, jobId: 'bulk-8' });
    expect(eight.nextRunAt).toEqual(new Date(Math.ceil(later / 60_000) * 60_000));
    // Each job landed in the shard its tenant and id hash to.
    const { rows } = await db.pool.query('SELECT job_id, shard_id FROM jobs WHERE tenant_id = $1', [
      tenantId,
    ]);
    expect(rows).toHaveLength(300);
    for (const r of rows) expect(r.shard_id).toBe(shardOf(tenantId, r.job_id, 64));
  });

  test('one bad job refuses the whole batch, naming its index; nothing is written', async () => {
    const tenantId = uniqueId('bulk-bad');
    const good = job({ jobId: 'fine' });
    await expectTockError(
      db.store.upsertJobs({
        tenantId,
        jobs: [good, job({ jobId: 'broken', schedule: '61 * * * *' })],
        now: T0,
      }),
      'validation_error',
    ).then((err) => expect(err.message).toMatch(/^jobs\[1\]: cron expression "61 \* \* \* \*": minute 61/));
    const twice = await expectTockError(
      db.store.upsertJobs({ tenantId, jobs: [good, job({ jobId: 'fine' })], now: T0 }),
      'validation_error',
    );
    expect(twice.message).toBe('jobs[1]: job_id "fine" appears twice');
    const past = await expectTockError(
      db.store.upsertJobs({
        tenantId,
        jobs: [good, job({ jobId: 'once', schedule: '@at 2025-01-01T00:00:00Z' })],
        now: T0,
      }),
      'validation_error',
    );
    expect(past.message).toBe('jobs[1]: @at instant of job "once" is in the past');
    const many = await expectTockError(
      db.store.upsertJobs({
        tenantId,
        jobs: Array.from({ length: 1001 }, (_, i) => job({ jobId: `m-${i}` })),
        now: T0,
      }),
      'validation_error',
    );
    expect(many.message).toBe('at most 1000 jobs per request (got 1001)');
    await expectTockError(db.store.upsertJobs({ tenantId, jobs: [], now: T0 }), 'validation_error');
    // Shaped like a validated job but not made by validateJob: validated like any input, and refused.
    const { spec, schedule } = validateJob(job({ jobId: 'lookalike' }));
    const lookalike = { spec: { ...spec, jobId: 'not an id!', priority: 7.5 }, schedule };
    await expectTockError(
      db.store.upsertJobs({ tenantId, jobs: [lookalike as unknown as JobInput], now: T0 }),
      'validation_error',
    );
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM jobs WHERE tenant_id = $1', [
      tenantId,
    ]);
    expect(rows[0].n).toBe(0);
  });

  test('re-applying a one-shot that already fired stays a harmless no-op', async () => {
    const tenantId = uniqueId('bulk-at');
    const at = job({ jobId: 'once', schedule: '@at 2026-01-01T00:01:00Z' });
    expect((await db.store.upsertJobs({ tenantId, jobs: [at], now: T0 })).changes[0]!.change).toBe('created');
    expect((await db.store.upsertJobs({ tenantId, jobs: [at], now: T0 + 120_000 })).changes[0]!.change).toBe(
      'unchanged',
    );
  });
});

describe('upsertJobs([job]): the one path for one job and many', () => {
  test('withJobs answers each job as stored, created, updated or unchanged, in the order given', async () => {
    const tenantId = uniqueId('with-jobs');
    const a = validateJob(job({ jobId: 'a' }));
    const b = validateJob(job({ jobId: 'b' }));
    const first = await db.store.upsertJobs({ tenantId, jobs: [a, b], now: T0, withJobs: true });
    expect(first.changes.map((c) => [c.jobId, c.change, c.job.version])).toEqual([
      ['a', 'created', 1],
      ['b', 'created', 1],
    ]);
    expect(first.changes[1]!.job).toEqual(await db.store.getJob({ tenantId, jobId: 'b' }));
    const changedB = validateJob(job({ jobId: 'b', priority: 9 }));
    const second = await db.store.upsertJobs({ tenantId, jobs: [changedB, a], now: T0, withJobs: true });
    expect(second.changes.map((c) => [c.jobId, c.change, c.job.version, c.job.priority])).toEqual([
      ['b', 'updated', 2, 9],
      ['a', 'unchanged', 1, 0],
    ]);
    expect(second.changes[1]!.job).toEqual(await db.store.getJob({ tenantId, jobId: 'a' }));
  });

  test('a validated job on its own is refused in its own words; a batch names the index', async () => {
    const tenantId = uniqueId('past-words');
    const once = validateJob(job({ jobId: 'once', schedule: '@at 2025-01-01T00:00:00Z' }));
    const alone = await expectTockError(
      db.store.upsertJobs({ tenantId, jobs: [once], now: T0 }),
      'validation_error',
    );
    expect(alone.message).toBe('@at instant 2025-01-01T00:00:00.000Z is in the past');
    expect(alone.details).toEqual({ field: 'schedule' });
    const inBatch = await expectTockError(
      db.store.upsertJobs({ tenantId, jobs: validateJobs([job({ jobId: 'x' }), job(once.spec)]), now: T0 }),
      'validation_error',
    );
    expect(inBatch.message).toBe('jobs[1]: @at instant of job "once" is in the past');
    expect(inBatch.details).toEqual({ field: 'schedule', index: 1 });
    expect(await countRows(db.pool, 'jobs', 'tenant_id = $1', [tenantId])).toBe(0);
  });

  test('any JSON payload is stored as given, null and scalars included, in a batch as alone', async () => {
    const tenantId = uniqueId('payloads');
    const payloads = [null, 'text', 0, false, [], { a: [1, null] }];
    const jobs = payloads.map((payload, i) => job({ jobId: `p${i}`, payload }));
    await db.store.upsertJobs({ tenantId, jobs, now: T0 });
    for (const [i, payload] of payloads.entries()) {
      expect((await db.store.getJob({ tenantId, jobId: `p${i}` })).payload).toEqual(payload);
    }
    const alone = await upsertJob(db.store, {
      tenantId,
      job: job({ jobId: 'alone', payload: null }),
      now: T0,
    });
    expect(alone.job.payload).toBeNull();
    expect(
      (await upsertJob(db.store, { tenantId, job: job({ jobId: 'alone', payload: null }), now: T0 })).change,
    ).toBe('unchanged');
  });

  test('a fractional backoff is stored as given, in a batch as alone', async () => {
    const tenantId = uniqueId('fraction');
    const jobs = [
      job({ jobId: 'f1', backoffBaseSeconds: 1.5, backoffCapSeconds: 90.5 }),
      job({ jobId: 'f2' }),
    ];
    await db.store.upsertJobs({ tenantId, jobs, now: T0 });
    expect(await db.store.getJob({ tenantId, jobId: 'f1' })).toMatchObject({
      backoffBaseSeconds: 1.5,
      backoffCapSeconds: 90.5,
    });
  });
});
