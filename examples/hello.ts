// A job in code: every 5 seconds, the handler `hello` runs on this process's worker.
// Run it with DATABASE_URL set (or TOCK_SCHEMA for a schema of its own); Ctrl-C stops it cleanly.
import pino from 'pino';
import { createPool, migrate, PostgresStore, Reaper, SystemClock, TickLoop, Worker } from 'tock';

const pool = createPool(process.env.DATABASE_URL ?? 'postgres://localhost/postgres', {
  schema: process.env.TOCK_SCHEMA,
});
await migrate(pool); // creates or updates Tock's tables; safe to run from many processes
const store = new PostgresStore(pool);
const clock = new SystemClock();
const logger = pino();

// An upsert: registering the same definition again changes nothing.
await store.upsertJobs({
  tenantId: 'default',
  jobs: [{ jobId: 'hello', schedule: '@every 5s', handler: 'hello', payload: { name: 'world' } }],
  now: clock.nowMs(),
});

const scheduler = new TickLoop({ store, clock, logger }); // turns due slots into runs
const reaper = new Reaper({ store, clock, logger }); // retries runs whose worker died
const worker = new Worker({
  store,
  clock,
  logger,
  handlers: {
    // At least once: a run may execute twice, so key side effects by job and slot.
    hello: async ({ payload, scheduledFor }) =>
      `hello, ${(payload as { name: string }).name} at ${scheduledFor.toISOString()}`,
  },
});
worker.on('run:succeeded', (run) => logger.info({ run_id: run.runId }, 'run succeeded'));
scheduler.start();
reaper.start();
worker.start();

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, async () => {
    await worker.stop(10_000); // running handlers get 10 s to finish
    await Promise.all([scheduler.stop(), reaper.stop()]);
    await pool.end();
  });
}
