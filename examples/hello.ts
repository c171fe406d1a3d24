// A job in code: every 5 seconds, the handler `hello` runs on this process's worker.
// Run it with DATABASE_URL set (or TOCK_SCHEMA for a schema of its own); Ctrl-C stops it cleanly.
import pino from 'pino';
import { createTock } from 'tock';

// The scheduler (turns due slots into runs, retries runs whose worker died) and a worker, here.
const tock = createTock({
  database: {
    url: process.env.DATABASE_URL ?? 'postgres://localhost/postgres',
    schema: process.env.TOCK_SCHEMA,
  },
  logger: pino(), // a line as each run starts and ends
  handlers: {
    // At least once: a run may execute twice, so key side effects by job and slot.
    hello: async ({ payload, scheduledFor }) =>
      `hello, ${(payload as { name: string }).name} at ${scheduledFor.toISOString()}`,
  },
});
await tock.start(); // creates or updates Tock's tables first; safe to run from many processes

// An upsert: registering the same definition again changes nothing.
await tock.upsertJobs([
  { jobId: 'hello', schedule: '@every 5s', handler: 'hello', payload: { name: 'world' } },
]);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => tock.stop()); // running handlers get 10 s to finish
}
