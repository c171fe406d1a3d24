#!/usr/bin/env node
// Claim + complete throughput on PostgreSQL (DATABASE_URL, default the machine's server, or
// --embedded), in a throwaway schema. Two loops over the same backlog:
//   store-loop: one loop of claimRuns(max) → completeRuns(batch) until the backlog is empty;
//   worker:     the Worker class with a no-op handler (batched claims, completions, heartbeats).
// Each is run --repeat times; the median runs/s is reported. Usage:
//   node bench/claim-complete.mjs [--runs 20000] [--batch 100] [--repeat 3] [--embedded] [--smoke]
// (also `npm run bench -- claim-complete`, which runs it through bench/run.mjs)
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { SystemClock } from '../dist/core/index.js';
import { createPool, migrate, PostgresStore, startEmbedded } from '../dist/store/index.js';
import { Worker } from '../dist/worker/index.js';
import { median, seedBacklog } from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '20000' },
    batch: { type: 'string', default: '100' },
    repeat: { type: 'string', default: '3' },
    embedded: { type: 'boolean', default: false },
    smoke: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    'node bench/claim-complete.mjs [--runs 20000] [--batch 100] [--repeat 3] [--embedded] [--smoke]\n  Claim + complete throughput of Tock alone: one claimRuns → completeRuns loop, then the Worker.\n  DATABASE_URL: the server (default the machine’s); --embedded: embedded PostgreSQL instead.\n',
  );
  process.exit(0);
}
const RUNS = args.smoke ? 500 : Number(args.runs);
const BATCH = Number(args.batch);
const REPEAT = args.smoke ? 1 : Number(args.repeat);
const clock = new SystemClock();
const logger = pino({ level: 'silent' });

async function seed(pool, n) {
  await pool.query('TRUNCATE jobs, job_successes');
  const store = new PostgresStore(pool);
  await store.upsertJobs({
    tenantId: 'bench',
    jobs: [{ jobId: 'noop', schedule: '@every 1h', handler: 'noop' }],
    now: clock.nowMs(),
  });
  await seedBacklog(pool, n);
}

async function storeLoop(pool) {
  const store = new PostgresStore(pool);
  const t0 = performance.now();
  let done = 0;
  for (;;) {
    const claimed = await store.claimRuns({
      workerId: 'bench-1',
      pool: 'default',
      max: BATCH,
      now: clock.nowMs(),
    });
    if (claimed.length === 0) break;
    const { completed } = await store.completeRuns({ leases: claimed, now: clock.nowMs() });
    done += completed.length;
  }
  return { done, seconds: (performance.now() - t0) / 1000 };
}

async function workerLoop(pool) {
  const store = new PostgresStore(pool);
  let done = 0;
  const worker = new Worker({
    store,
    clock,
    logger,
    handlers: { noop: () => {} },
    concurrency: BATCH,
    pollIntervalMs: 50,
  });
  const t0 = performance.now();
  const finished = new Promise((resolve) => {
    worker.on('run:succeeded', () => {
      done += 1;
      if (done === RUNS) resolve();
    });
  });
  worker.start();
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  await worker.stop(1000);
  return { done, seconds };
}

async function main() {
  let url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  let embedded = null;
  let dataDir = null;
  if (args.embedded) {
    dataDir = await mkdtemp(path.join(tmpdir(), 'tock-bench-'));
    embedded = await startEmbedded({ dataDir });
    url = embedded.url;
  }
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = createPool(url, { max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  const pool = createPool(url, { schema, max: 10 });
  try {
    await migrate(pool);
    const where = args.embedded ? 'embedded PostgreSQL' : url.replace(/\/\/[^@]*@/, '//');
    console.log(`claim+complete, ${RUNS} runs, batch ${BATCH}, ${REPEAT} repeats, on ${where}`);
    for (const [name, fn] of [
      ['store-loop', storeLoop],
      ['worker', workerLoop],
    ]) {
      const rates = [];
      for (let i = 0; i < REPEAT; i++) {
        await seed(pool, RUNS);
        const { done, seconds } = await fn(pool);
        if (done !== RUNS) throw new Error(`${name}: completed ${done} of ${RUNS}`);
        rates.push(done / seconds);
        console.log(`  ${name} run ${i + 1}: ${Math.round(done / seconds)} runs/s (${seconds.toFixed(2)} s)`);
      }
      console.log(`${name}: median ${Math.round(median(rates))} runs/s`);
    }
  } finally {
    await pool.end();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
    if (embedded) await embedded.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
