/**
 * A backfill paced by a named limit (issue 18): 1,000 ready runs of a job naming a limit of 50 per
 * second with a burst of 50, drained by real in-process workers on the system clock, their handlers
 * returning at once. Recorded: when each run's claim took its token (the claim's instant, as the run
 * row keeps it) and when its handler was called; checked afterwards: the bucket (no span takes more
 * than burst + rate × its length), the burst, then no one-second window with more than 50 claims
 * (exactly: the limit's window; handler calls lag their claims by the machine's load, see below),
 * the whole backfill within 10 % of the ideal 20 s (and not much faster: the pacing is real), and
 * workers that wait for room instead of polling for it.
 */
import pino from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { SystemClock } from '../../src/core/index.js';
import type { PostgresStore } from '../../src/store/index.js';
import { Worker } from '../../src/worker/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { job, uniqueId, upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });
const RUNS = 1000;
const RATE = 50;
const BURST = 50;
/** The ideal: the burst at once, the other 950 at 50 per second: 19 s; the issue rounds it to 20 s. */
const IDEAL_MS = 20_000;
const WORKERS = 2;
const CONCURRENCY = 50;

let db: TestDatabase;
beforeAll(async () => {
  // Its own database: other files' NOTIFY wake-ups (on the shared one) would send these workers
  // claims that the busy-polling check below counts against them.
  db = await setupDatabase({}, { ownDatabase: true });
});
afterAll(() => db.teardown());

/** The most of the sorted instants `at` inside any window [at[i], at[i] + ms). */
function mostInWindow(at: number[], ms: number): { most: number; from: number } {
  let most = 0;
  let from = 0;
  let j = 0;
  for (let i = 0; i < at.length; i++) {
    while (j < at.length && at[j]! < at[i]! + ms) j++;
    if (j - i > most) {
      most = j - i;
      from = at[i]!;
    }
  }
  return { most, from };
}

/** The most of the sorted instants `at` in a window of a second opening a second or more after `first`. */
const afterBurst = (at: number[], first: number) =>
  mostInWindow(
    at.filter((t) => t >= first + 1000),
    1000,
  );

/** Claims counted per worker, and how many of them came back empty. */
function counted(store: PostgresStore) {
  const stats = { claims: 0, empty: 0 };
  const claim = store.claimRuns.bind(store);
  store.claimRuns = async (p) => {
    stats.claims += 1;
    const runs = await claim(p);
    if (runs.length === 0) stats.empty += 1;
    return runs;
  };
  return stats;
}

test('a backfill of 1,000 runs on a key limited to 50/s, burst 50: after the burst no 1-second window starts more than 50, and it takes 20 s ± 10 %', async () => {
  const clock = new SystemClock();
  const tenantId = uniqueId('t-backfill');
  const pool = uniqueId('pool-backfill');
  const def = job({ pool, handler: 'call-api', limits: ['payments-api'] });
  // The limit (defined with SQL: its API is tested with its routes), full at the start.
  await db.pool.query(
    `INSERT INTO limits (tenant_id, key, rate, burst, tokens, refilled_at, created_at, updated_at)
       VALUES ($1, 'payments-api', $2, $3, $3::int, $4, $4, $4)`,
    [tenantId, RATE, BURST, new Date(clock.nowMs())],
  );
  await upsertJob(db.store, { tenantId, job: def, now: clock.nowMs() });
  // The backfill: one run per past slot, every one ready (runs and queue rows in one statement,
  // as a backfill writes them: the job's gates on each).
  await db.pool.query(
    `WITH made AS (
         INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
           backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at, gates)
         SELECT $1, $2, s.t, 3, 'call-api', '{}', $3, 0, 2, 3600, s.t, s.t, $5, ARRAY[$1 || '/payments-api']
         FROM generate_series(1, $4::int) AS i,
           LATERAL (SELECT $5::timestamptz - interval '1 day' + i * interval '1 minute' AS t) s
         RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates
       )
       INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates)
       SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates FROM made`,
    [tenantId, def.jobId, pool, RUNS, new Date(clock.nowMs())],
  );

  const called: number[] = [];
  let finished!: () => void;
  const allDone = new Promise<void>((resolve) => {
    finished = resolve;
  });
  let succeeded = 0;
  const stats: { claims: number; empty: number }[] = [];
  const workers: Worker[] = [];
  for (let i = 0; i < WORKERS; i++) {
    const store = db.newStore();
    stats.push(counted(store));
    const worker = new Worker({
      store,
      clock,
      logger,
      pool,
      concurrency: CONCURRENCY,
      workerId: `w-pacing-${i}`,
      handlers: {
        'call-api': async () => {
          called.push(clock.nowMs());
        },
      },
    });
    worker.on('run:succeeded', () => {
      succeeded += 1;
      if (succeeded === RUNS) finished();
    });
    workers.push(worker);
  }
  const began = clock.nowMs();
  for (const w of workers) w.start();
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`only ${succeeded} of ${RUNS} runs succeeded in 40 s`)), 40_000),
  );
  try {
    await Promise.race([allDone, timeout]);
  } finally {
    await Promise.all(workers.map((w) => w.stop(5000)));
  }
  const ended = clock.nowMs();

  const { rows } = await db.pool.query(
    `SELECT extract(epoch FROM claimed_at) * 1000 AS claimed, extract(epoch FROM finished_at) * 1000 AS finished
       FROM runs WHERE tenant_id = $1 AND state = 'succeeded' ORDER BY claimed_at`,
    [tenantId],
  );
  expect(rows).toHaveLength(RUNS);
  expect(called).toHaveLength(RUNS);
  // When each run took its token (the claim's instant), and when its handler was called.
  const claimed = rows.map((r) => Number(r.claimed));
  const starts = [...called].sort((a, b) => a - b);
  const first = Math.min(claimed[0]!, starts[0]!);

  // The limiter itself, exactly: between any two claims, no more tokens taken than the burst and
  // what the rate refilled in between (from the claims' instants, which its arithmetic uses).
  let overdrawn = '';
  for (let i = 0; i < claimed.length && !overdrawn; i++) {
    for (let j = i; j < claimed.length; j++) {
      const allowed = BURST + (RATE * (claimed[j]! - claimed[i]!)) / 1000 + 1e-6;
      if (j - i + 1 > allowed) {
        overdrawn = `${j - i + 1} claims in [+${claimed[i]! - claimed[0]!}, +${claimed[j]! - claimed[0]!}] ms`;
        break;
      }
    }
  }
  expect(overdrawn).toBe('');
  // The burst: the first 50 at once (well within the first second).
  expect(claimed[BURST - 1]! - claimed[0]!).toBeLessThan(1000);
  // Paced after the burst (windows opening a second or more after the first start): no window of
  // one second holds more than 50 claims, exactly (the limit's window counts the claims' instants:
  // a claim is when a run takes its place in the limit). Before the window existed, a bucket alone
  // let a second take up to the burst on top of the rate: 55 to 60 here.
  const paced = afterBurst(claimed, first);
  expect(
    paced.most,
    `claims in [+${paced.from - first}, +${paced.from - first + 1000}) ms`,
  ).toBeLessThanOrEqual(RATE);
  // Not checked: windows of handler calls. The limit admits a run at its claim's instant (the `now`
  // the claim was sent with, which the run row keeps); the handler is called after the claim
  // statement has run and the worker's event loop has handed the run out, delays that the
  // machine's load decides. On an idle machine they hold 50 too; with a dozen test files running
  // beside this one, a batch whose handlers ran late shared a second of calls with the next batch
  // (100 calls), while every window of claims still held 50.

  // The whole backfill within 10 % of the ideal 20 s, and paced: at least 18 s. In theory 19 s to
  // 19.95 s: a batch of 50 each time the window frees, 1 s to 1 s + one 50 ms grain after the last.
  const last = Math.max(...rows.map((r) => Number(r.finished)), starts[starts.length - 1]!);
  expect(last - first).toBeLessThanOrEqual(IDEAL_MS * 1.1);
  expect(last - first).toBeGreaterThanOrEqual(18_000);

  // No busy polling. A worker claims when the limit has room (here when its window frees, about
  // once a second, the batch going to one worker); a claim that takes nothing is one another worker
  // beat to it, or a worker's next claim as its runs end. Polling would show many empty claims.
  const seconds = (ended - began) / 1000;
  const claims = stats.reduce((n, s) => n + s.claims, 0);
  const empty = stats.reduce((n, s) => n + s.empty, 0);
  const what = `${claims} claims (${empty} empty) in ${seconds} s`;
  expect(empty / seconds / WORKERS, what).toBeLessThan(10);
  expect(claims / seconds / WORKERS, what).toBeLessThan(RATE / WORKERS + 10);
}, 60_000);
