/**
 * The pruner against a real database: a pass deletes every tenant's expired runs in batches, to
 * the end; one node prunes at a time (the maintenance lease), and a node that stops hands over at
 * once; a pass is skipped while the clock is not trusted. The batches' statement is tested in
 * test/store/retention.test.ts. Time moves only through FakeClocks.
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { type PruneBatchEvent, Pruner } from '../../src/scheduler/index.js';
import { until } from '../api/helpers.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { once, WatchedClock } from '../setup/events.js';
import { countRows, endedRun, upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });
const DAY = 86_400_000;
const INTERVAL = 60_000;

let db: TestDatabase;
beforeEach(async () => {
  db = await setupDatabase();
});
afterEach(async () => {
  await db.teardown();
});

/** A clock that lets the pauses between batches pass at once; the pause between passes waits for the test. */
function clockAt(now: number): WatchedClock {
  const clock = new WatchedClock(now);
  clock.events.on('sleep', (ms) => {
    if (ms < INTERVAL) queueMicrotask(() => clock.advance(ms));
  });
  return clock;
}

/**
 * The pruner's next passes, one a call: waits until the pruner waits for its next pass (a wait
 * begun after an advance would be whole), advances \`clock\` by \`advanceMs\`, and resolves with the pass.
 */
function passes(pruner: Pruner, clock: WatchedClock) {
  let waited = 0;
  return async (advanceMs: number) => {
    await until(() => clock.sleeps.indexOf(INTERVAL, waited) >= 0, 'the wait between passes');
    waited = clock.sleeps.length;
    const pass = once<[{ deleted: number }]>(pruner, 'pass');
    clock.advance(advanceMs);
    return (await pass)[0];
  };
}

/** `n` runs of the tenant's job that succeeded 8 days before T0 (past the default week), and one a day before. */
async function history(tenantId: string, n: number): Promise<void> {
  const jobId = 'j';
  await upsertJob(db.store, { tenantId, job: { jobId, schedule: '@every 1h', handler: 'h' }, now: T0 });
  for (let i = 0; i < n; i++) {
    const slot = T0 - 8 * DAY + i * 1000;
    await endedRun(db, { tenantId, jobId, slot, state: 'succeeded', finishedAt: slot });
  }
  await endedRun(db, { tenantId, jobId, slot: T0 - DAY, state: 'succeeded', finishedAt: T0 - DAY });
}

test('one node prunes every tenant to the end in batches; the other waits; a stop hands over', async () => {
  await history('t1', 25);
  await history('t2', 12);
  const clockA = clockAt(T0);
  const clockB = clockAt(T0);
  const a = new Pruner({
    store: db.store,
    clock: clockA,
    logger,
    owner: 'a',
    batchSize: 10,
    intervalMs: INTERVAL,
  });
  const b = new Pruner({
    store: db.newStore(),
    clock: clockB,
    logger,
    owner: 'b',
    batchSize: 10,
    intervalMs: INTERVAL,
  });
  const batchesA: PruneBatchEvent[] = [];
  const batchesB: PruneBatchEvent[] = [];
  a.on('batch', (e) => batchesA.push(e));
  b.on('batch', (e) => batchesB.push(e));
  try {
    const passA = once(a, 'pass');
    a.start();
    const [pass] = await passA;
    expect(pass).toMatchObject({ deleted: 37, tenants: 2 });
    // t1: 26 runs looked at in batches of 10 (3), t2: 13 (2).
    expect(batchesA.map((e) => [e.tenantId, e.scanned, e.byState.succeeded ?? 0])).toEqual([
      ['t1', 10, 10],
      ['t1', 10, 10],
      ['t1', 5, 5],
      ['t2', 10, 10],
      ['t2', 2, 2],
    ]);
    expect(await countRows(db.pool, 'runs')).toBe(2);

    // b's pass finds the lease held: it prunes nothing, and waits for its next pass.
    await history('t3', 3);
    const bWaits = once(clockB.events, 'sleep', (ms: number) => ms === INTERVAL);
    b.start();
    await bWaits;
    expect(batchesB).toEqual([]);
    expect(await countRows(db.pool, 'runs', 'tenant_id = $1', ['t3'])).toBe(4);

    // a stops and gives the lease back: b's next pass prunes.
    await a.stop();
    const passB = once(b, 'pass');
    clockB.advance(INTERVAL);
    expect((await passB)[0]).toMatchObject({ deleted: 3 });
    expect(await countRows(db.pool, 'runs')).toBe(3);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test('skips its passes while the clock is not trusted', async () => {
  await history('t1', 5);
  const clock = clockAt(T0);
  let refusal: string | null = 'clock offset too uncertain';
  const pruner = new Pruner({
    store: db.store,
    clock,
    logger,
    owner: 'a',
    intervalMs: INTERVAL,
    refusal: () => refusal,
  });
  try {
    const waits = once(clock.events, 'sleep', (ms: number) => ms === INTERVAL);
    pruner.start();
    await waits;
    expect(await countRows(db.pool, 'runs')).toBe(6);
    refusal = null;
    const pass = once(pruner, 'pass');
    clock.advance(INTERVAL);
    expect((await pass)[0]).toMatchObject({ deleted: 5 });
    expect(await countRows(db.pool, 'runs')).toBe(1);
  } finally {
    await pruner.stop();
  }
});

test('a pass starts where the last one ended; one from the oldest run every fullPassMs', async () => {
  await upsertJob(db.store, {
    tenantId: 't1',
    job: { jobId: 'j', schedule: '@every 1h', handler: 'h' },
    now: T0,
  });
  for (let i = 0; i < 5; i++) {
    const slot = T0 - 20 * DAY + i * 1000;
    await endedRun(db, { tenantId: 't1', jobId: 'j', slot, state: 'dead', finishedAt: slot });
  }
  for (let i = 0; i < 3; i++) {
    const slot = T0 - 8 * DAY + i * 1000;
    await endedRun(db, { tenantId: 't1', jobId: 'j', slot, state: 'succeeded', finishedAt: slot });
  }
  const clock = clockAt(T0);
  const pruner = new Pruner({
    store: db.store,
    clock,
    logger,
    owner: 'a',
    batchSize: 10,
    intervalMs: INTERVAL,
    fullPassMs: 2 * 3_600_000,
  });
  let scanned = 0;
  pruner.on('batch', (b) => {
    scanned += b.scanned;
  });
  const pass = passes(pruner, clock);
  const nextPass = async (advanceMs: number) => {
    scanned = 0;
    return { deleted: (await pass(advanceMs)).deleted, scanned };
  };
  try {
    const first = once<[{ deleted: number }]>(pruner, 'pass');
    pruner.start();
    expect((await first)[0].deleted).toBe(3);
    expect(scanned).toBe(8);
    // The dead runs (kept for 30 days) are not read again by the next pass.
    expect(await nextPass(INTERVAL)).toEqual({ deleted: 0, scanned: 0 });
    // 11 days on, they are 31 days old; the pass from the oldest run (due after 2 h) deletes them.
    expect(await nextPass(11 * DAY)).toEqual({ deleted: 5, scanned: 5 });
    expect(await countRows(db.pool, 'runs')).toBe(0);
  } finally {
    await pruner.stop();
  }
});

test('a run that ended after its slot is pruned by a later pass once it expires, not an hour later', async () => {
  await upsertJob(db.store, {
    tenantId: 't1',
    job: { jobId: 'j', schedule: '@every 1h', handler: 'h' },
    now: T0,
  });
  // Slots 8 days ago; the first ended then, the second (a long run, a late retry) 10 minutes
  // before a week ago: 10 minutes inside its retention at T0. Then one run on a later slot that
  // expired long ago: the pass reads past the second run.
  const early = T0 - 8 * DAY;
  await endedRun(db, { tenantId: 't1', jobId: 'j', slot: early, state: 'succeeded', finishedAt: early });
  const late = await endedRun(db, {
    tenantId: 't1',
    jobId: 'j',
    slot: early + 1000,
    state: 'succeeded',
    finishedAt: T0 - 7 * DAY + 10 * 60_000,
  });
  await endedRun(db, {
    tenantId: 't1',
    jobId: 'j',
    slot: early + 2000,
    state: 'succeeded',
    finishedAt: early + 2000,
  });
  const clock = clockAt(T0);
  const pruner = new Pruner({
    store: db.store,
    clock,
    logger,
    owner: 'a',
    intervalMs: INTERVAL,
    fullPassMs: 2 * 3_600_000,
  });
  try {
    const first = once<[{ deleted: number }]>(pruner, 'pass');
    pruner.start();
    expect((await first)[0].deleted).toBe(2);
    expect(await countRows(db.pool, 'runs', 'run_id = $1', [late])).toBe(1);
    // 11 minutes on, a pass that does not start from the oldest run still meets it.
    const pass = passes(pruner, clock);
    for (let i = 0; i < 11; i++) await pass(INTERVAL);
    expect(await countRows(db.pool, 'runs', 'run_id = $1', [late])).toBe(0);
  } finally {
    await pruner.stop();
  }
});
