/**
 * Text PostgreSQL refuses, at the store: output, error and release-reason text holding U+0000 or
 * an unpaired surrogate is stored with U+FFFD in their place (never a SQLSTATE 22021 that would
 * fail a whole completion batch); a payload or a key name holding them is refused, naming the
 * field, and nothing is written.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ValidationError } from '../../src/core/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import {
  attemptRows,
  countRows,
  expectTockError,
  job,
  runRow,
  uniqueId,
  upsertJob,
} from '../setup/factories.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());

/** `n` claimed runs of a fresh tenant: their leases. */
async function claimed(n: number) {
  const tenantId = uniqueId('t');
  const def = job();
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  for (let i = 0; i < n; i++) {
    await db.store.triggerRun({
      tenantId,
      jobId: def.jobId,
      scheduledFor: db.clock.nowMs() - (i + 1) * 60_000,
      now: db.clock.nowMs(),
    });
  }
  const runs = await db.store.claimRuns({
    workerId: 'w-text',
    pool: 'default',
    max: n,
    now: db.clock.nowMs(),
    tenantId,
  });
  expect(runs).toHaveLength(n);
  return runs;
}

test('a completion batch with NUL and lone surrogates in outputs records every run, sanitised', async () => {
  const runs = await claimed(3);
  const outputs = ['binary\u0000output', 'ok', 'half \uD83D'];
  const { completed, lost } = await db.store.completeRuns({
    leases: runs.map((r, i) => ({ runId: r.runId, leaseToken: r.leaseToken, output: outputs[i] })),
    now: db.clock.nowMs(),
  });
  expect(lost).toEqual([]);
  expect(completed.sort()).toEqual(runs.map((r) => r.runId).sort());
  const stored = await Promise.all(runs.map((r) => runRow(db.pool, r.runId)));
  expect(stored.map((r) => [r.state, r.output])).toEqual([
    ['succeeded', 'binary\uFFFDoutput'],
    ['succeeded', 'ok'],
    ['succeeded', 'half \uFFFD'],
  ]);
});

test('failRun keeps the real error and output, sanitised', async () => {
  const [run] = await claimed(1);
  const result = await db.store.failRun({
    runId: run!.runId,
    leaseToken: run!.leaseToken,
    error: 'Error: bad byte \u0000 here',
    output: 'partial\u0000',
    now: db.clock.nowMs(),
  });
  expect(result.state).toBe('pending');
  const [attempt] = await attemptRows(db.pool, run!.runId);
  expect(attempt).toMatchObject({ error: 'Error: bad byte \uFFFD here', output: 'partial\uFFFD' });
});

test('releaseRuns stores a reason holding NUL, sanitised', async () => {
  const [run] = await claimed(1);
  const { released } = await db.store.releaseRuns({
    leases: [{ runId: run!.runId, leaseToken: run!.leaseToken }],
    reason: 'shutting\u0000down',
    now: db.clock.nowMs(),
  });
  expect(released).toEqual([run!.runId]);
  const [attempt] = await attemptRows(db.pool, run!.runId);
  expect(attempt).toMatchObject({ outcome: 'released', error: 'shutting\uFFFDdown' });
});

test('a clipped error that would start with half a pair is stored well-formed', async () => {
  const [run] = await claimed(1);
  // 64 KiB is kept from the end: an odd cut lands between the halves of the first emoji kept.
  const error = `${'\uD83D\uDE00'.repeat(40_000)}y`;
  await db.store.failRun({ runId: run!.runId, leaseToken: run!.leaseToken, error, now: db.clock.nowMs() });
  const [attempt] = await attemptRows(db.pool, run!.runId);
  expect((attempt!.error as string).startsWith('\uFFFD\uD83D\uDE00')).toBe(true);
});

test('a payload or an API key name PostgreSQL cannot store is refused, naming the field', async () => {
  const tenantId = uniqueId('t');
  const before = await countRows(db.pool, 'jobs');
  const err = await expectTockError(
    upsertJob(db.store, { tenantId, job: job({ payload: { a: ['x\u0000'] } }), now: db.clock.nowMs() }),
    'validation_error',
  );
  expect(err.details).toEqual({ field: 'payload.a[0]' });
  const inf = await expectTockError(
    upsertJob(db.store, {
      tenantId,
      job: job({ payload: { n: JSON.parse('1e309') } }),
      now: db.clock.nowMs(),
    }),
    'validation_error',
  );
  expect(inf.details).toEqual({ field: 'payload.n' });
  expect(await countRows(db.pool, 'jobs')).toBe(before);
  const key = await expectTockError(
    db.store.createApiKey({ tenantId, role: 'reader', name: 'ops\u0000', now: db.clock.nowMs() }),
    'validation_error',
  );
  expect(key).toBeInstanceOf(ValidationError);
  expect(key.details).toEqual({ field: 'name' });
});
