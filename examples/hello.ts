// A job in code: every 5 seconds, the job `hello` runs its handler on this process's worker.
// Run it with DATABASE_URL set (or TOCK_SCHEMA for a schema of its own); Ctrl-C stops it cleanly.
import pino from 'pino';
import { createTock, defineJob, Type } from 'tock';

// The job and its handler in one place: `ctx.payload` has the schema's type, and the schema is
// stored with the job, so a trigger whose payload does not match it is refused (HTTP 400).
const hello = defineJob({
  id: 'hello',
  schedule: '@every 5s',
  payload: Type.Object({ name: Type.String() }),
  defaultPayload: { name: 'world' },
  // At least once: a run may execute twice, so key side effects by job and slot.
  handler: async ({ payload, scheduledFor }) => `hello, ${payload.name} at ${scheduledFor.toISOString()}`,
});

// The scheduler (turns due slots into runs, retries runs whose worker died) and a worker, here.
const tock = createTock({
  database: {
    url: process.env.DATABASE_URL ?? 'postgres://localhost/postgres',
    schema: process.env.TOCK_SCHEMA,
  },
  logger: pino(), // a line as each run starts and ends
  jobs: [hello], // upserted at start: starting again with the same definitions changes nothing
});
await tock.start(); // creates or updates Tock's tables first; safe to run from many processes

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => tock.stop()); // running handlers get 10 s to finish
}
