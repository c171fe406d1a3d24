#!/usr/bin/env node
// node-postgres (pg) against postgres.js on Tock's hot loop: the same claim and complete
// statements (src/store/queries/runs.ts), one loop of claim-100 → complete-100 over a backlog of
// ready runs, in a throwaway schema on DATABASE_URL (default the machine's server).
// The parameter lists follow the statements in src/store/queries/runs.ts: keep them in step.
// Usage: node bench/drivers.mjs [--runs 20000] [--repeat 3]
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { createPool, migrate } from '../dist/store/index.js';
import { runClaim } from '../dist/store/queries/claims.js';
import { runCompleteMany } from '../dist/store/queries/runs.js';
import { median, seedBacklog } from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '20000' },
    repeat: { type: 'string', default: '3' },
    smoke: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    'node bench/drivers.mjs [--runs 20000] [--repeat 3] [--smoke]\n  The same claim + complete SQL through node-postgres and through postgres.js, median runs/s.\n  DATABASE_URL: the server (default postgres://postgres@127.0.0.1:5432/test).\n',
  );
  process.exit(0);
}
const RUNS = args.smoke ? 500 : Number(args.runs);
const REPEAT = args.smoke ? 1 : Number(args.repeat);
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function withPg(pool) {
  let done = 0;
  for (;;) {
    const now = new Date();
    const { rows } = await pool.query(runClaim, [
      'default',
      now,
      100,
      'bench',
      30000,
      null,
      null,
      0,
      null,
      null,
    ]);
    if (rows.length === 0) return done;
    const r = await pool.query(runCompleteMany, [
      rows.map((x) => x.run_id),
      rows.map((x) => x.lease_token),
      new Date(),
      null,
      rows.map(() => null), // outputs
      rows.map(() => null), // handler starts: unreported
      null, // reports: none
    ]);
    // The completion answers the runs it did not complete.
    done += rows.length - r.rows.length;
  }
}

async function withPostgresJs(sql) {
  let done = 0;
  for (;;) {
    const rows = await sql.unsafe(
      runClaim,
      ['default', new Date(), 100, 'bench', 30000, null, null, 0, null, null],
      {
        prepare: true,
      },
    );
    if (rows.length === 0) return done;
    const r = await sql.unsafe(
      runCompleteMany,
      [
        rows.map((x) => x.run_id),
        rows.map((x) => x.lease_token),
        new Date(),
        null,
        rows.map(() => null),
        rows.map(() => null),
        null,
      ],
      { prepare: true },
    );
    done += rows.length - r.length;
  }
}

const schema = `drivers_${randomBytes(4).toString('hex')}`;
const admin = createPool(url, { max: 1 });
await admin.query(`CREATE SCHEMA ${schema}`);
const pool = createPool(url, { schema, max: 4 });
const sql = postgres(url, { max: 4, connection: { search_path: schema }, onnotice: () => {} });
try {
  await migrate(pool);
  console.log(`drivers: claim-100 + complete-100 loop, ${RUNS} runs, ${REPEAT} repeats`);
  for (const [name, fn] of [
    ['pg', () => withPg(pool)],
    ['postgres.js', () => withPostgresJs(sql)],
  ]) {
    const rates = [];
    for (let i = 0; i < REPEAT; i++) {
      await seedBacklog(pool, RUNS);
      const t0 = performance.now();
      const done = await fn();
      const s = (performance.now() - t0) / 1000;
      if (done !== RUNS) throw new Error(`${name}: completed ${done} of ${RUNS}`);
      rates.push(done / s);
    }
    console.log(`${name}: median ${Math.round(median(rates))} runs/s (${rates.map(Math.round).join(', ')})`);
  }
} finally {
  await sql.end();
  await pool.end();
  await admin.query(`DROP SCHEMA ${schema} CASCADE`);
  await admin.end();
}
