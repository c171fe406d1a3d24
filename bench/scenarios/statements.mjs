// Where a run's database time goes (issue 7's profile): `EXPLAIN (ANALYZE, WAL)` of Tock's claim
// and completion statements, batch after batch, on one connection with nothing else running, on a
// backlog of ready runs. Since migration 0007 the claim deletes queue rows and writes one claim
// row, and the completion writes each run row once, as a HOT update when its page has room (runs
// is at fillfactor 40 for that). The variants price that room: at fillfactor 100 the completion's
// new row versions go to other pages and get entries in every index of runs.
import { createPool, migrate } from '../../dist/store/index.js';
import { runClaim } from '../../dist/store/queries/claims.js';
import { runCompleteMany } from '../../dist/store/queries/runs.js';
import { fmt, markdownTable, median, recreateDatabase, seedBacklog } from '../lib.mjs';

const DATABASE = 'bench_statements';
const WORKER = 'bench-explain';

/** The schema as migrated, then without the room that lets the completion be a HOT update. */
const VARIANTS = [
  { name: 'as migrated (runs fillfactor 40)', ddl: [] },
  { name: 'runs fillfactor 100', ddl: ['ALTER TABLE runs SET (fillfactor = 100)'] },
  {
    name: 'runs fillfactor 100, without the unique (tenant, job, slot) index',
    ddl: [
      'ALTER TABLE runs SET (fillfactor = 100)',
      'ALTER TABLE runs DROP CONSTRAINT runs_tenant_id_job_id_scheduled_for_key',
    ],
  },
];

/** A plan's nodes that read `runs`, in order: how the statement found its rows. */
function shape(node, out = []) {
  if (node['Relation Name'] === 'runs') {
    out.push(node['Index Name'] ? `${node['Node Type']} (${node['Index Name']})` : node['Node Type']);
  }
  for (const child of node.Plans ?? []) shape(child, out);
  return out.filter((n) => n !== 'ModifyTable').join(', ');
}

/** The most frequent value of `xs`. */
function mode(xs) {
  const counts = new Map();
  for (const x of xs) counts.set(x, (counts.get(x) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1])[0]?.[0];
}

/** `EXPLAIN (ANALYZE, WAL, FORMAT JSON)` of `sql` with `values`: execution ms, planning ms, WAL bytes. */
async function explain(client, sql, values) {
  const { rows } = await client.query(`EXPLAIN (ANALYZE, WAL, FORMAT JSON) ${sql}`, values);
  const [out] = rows[0]['QUERY PLAN'];
  return {
    plan: shape(out.Plan),
    executionMs: out['Execution Time'],
    planningMs: out['Planning Time'],
    walBytes: out.Plan['WAL Bytes'] ?? 0,
    rows: out.Plan['Actual Rows'],
  };
}

/** `batches` claims of `batch` runs, each followed by the completion of those runs. */
async function measureVariant({ url, batches, batch }) {
  const pool = createPool(url, { max: 1, applicationName: 'tock-bench-statements' });
  const client = await pool.connect();
  try {
    await seedBacklog(client, batches * batch);
    await client.query('CHECKPOINT');
    const claims = [];
    const completions = [];
    for (let i = 0; i < batches; i++) {
      const now = new Date();
      const claim = await explain(client, runClaim, [
        'default',
        now,
        batch,
        WORKER,
        30_000,
        null,
        null,
        0,
        null,
        null,
      ]);
      const { rows } = await client.query(
        `SELECT run_id, lease_token FROM run_states WHERE state = 'running' AND lease_owner = $1`,
        [WORKER],
      );
      if (rows.length !== batch) throw new Error(`claimed ${rows.length} runs, expected ${batch}`);
      const completion = await explain(client, runCompleteMany, [
        rows.map((r) => r.run_id),
        rows.map((r) => r.lease_token),
        new Date(now.getTime() + 1),
        null,
        rows.map(() => null), // outputs
        rows.map(() => null), // handler starts: unreported
        null, // reports: none
      ]);
      // The completion answers the runs it did not complete: none.
      if (completion.rows !== 0) throw new Error(`${completion.rows} of ${batch} runs not completed`);
      claims.push(claim);
      completions.push(completion);
    }
    const perRun = (xs, key, scale) => median(xs.map((x) => (x[key] * scale) / batch));
    return {
      claimUs: perRun(claims, 'executionMs', 1000),
      completeUs: perRun(completions, 'executionMs', 1000),
      claimPlanningMs: median(claims.map((x) => x.planningMs)),
      completePlanningMs: median(completions.map((x) => x.planningMs)),
      claimWalBytes: perRun(claims, 'walBytes', 1),
      completeWalBytes: perRun(completions, 'walBytes', 1),
      completePlan: mode(completions.map((x) => x.plan)),
    };
  } finally {
    client.release();
    await pool.end();
  }
}

export default {
  name: 'statements',
  description: 'EXPLAIN ANALYZE of the claim and the completion, and what a HOT completion saves',
  async run(ctx) {
    const batch = 100;
    const batches = ctx.smoke ? 3 : 60;
    const systems = [];
    for (const v of VARIANTS) {
      const rounds = [];
      for (let r = 1; r <= ctx.rounds; r++) {
        const url = await recreateDatabase(ctx.databaseUrl, DATABASE);
        const admin = createPool(url, { max: 1, applicationName: 'tock-bench-admin' });
        try {
          await migrate(admin);
          for (const ddl of v.ddl) await admin.query(ddl);
        } finally {
          await admin.end();
        }
        const f = await measureVariant({ url, batches, batch });
        rounds.push(f);
        ctx.log(
          `round ${r}/${ctx.rounds} ${v.name}: claim ${fmt(f.claimUs, 1)} µs/run, completion ` +
            `${fmt(f.completeUs, 1)} µs/run; WAL ${fmt(f.claimWalBytes)} + ${fmt(f.completeWalBytes)} B/run`,
        );
      }
      const over = (key) => median(rounds.map((f) => f[key]));
      systems.push({
        name: v.name,
        ddl: v.ddl,
        rounds,
        claimUs: over('claimUs'),
        completeUs: over('completeUs'),
        claimPlanningMs: over('claimPlanningMs'),
        completePlanningMs: over('completePlanningMs'),
        claimWalBytes: over('claimWalBytes'),
        completeWalBytes: over('completeWalBytes'),
        completePlan: mode(rounds.map((f) => f.completePlan)),
      });
    }
    const base = systems[0];
    const table = markdownTable(
      [
        `schema (${batches} batches of ${batch})`,
        'claim µs/run',
        'completion µs/run',
        'both, µs/run',
        'saved vs as migrated',
        'WAL bytes/run (claim + completion)',
        'how the completion reads runs',
      ],
      systems.map((s) => [
        s.name,
        fmt(s.claimUs, 1),
        fmt(s.completeUs, 1),
        fmt(s.claimUs + s.completeUs, 1),
        s === base ? '' : `${fmt(base.claimUs + base.completeUs - s.claimUs - s.completeUs, 1)} µs`,
        `${fmt(s.claimWalBytes)} + ${fmt(s.completeWalBytes)}`,
        s.completePlan ?? '',
      ]),
    );
    return {
      settings: { batch, batches, rounds: ctx.rounds, variants: VARIANTS },
      systems,
      table,
      notes: [
        'Execution time from EXPLAIN (ANALYZE, WAL) on one connection with nothing else running, divided by the batch; median over the batches, then over rounds. Planning adds about ' +
          `${fmt(base.claimPlanningMs, 2)} ms per claim and ${fmt(base.completePlanningMs, 2)} ms per completion statement.`,
        'The claim writes no run row; the completion writes each run row once. At fillfactor 40 that write finds room on its page and is a HOT update (no index entry); at fillfactor 100 it is an ordinary update, with an entry in the primary key, the unique (tenant, job, slot) index (with a uniqueness check) and runs_by_tenant.',
        'The backlog is fresh and checkpointed before the first batch, so the first change to each page after the checkpoint writes a full-page image to WAL, as in the throughput scenario.',
        'Under load (the throughput scenario) PostgreSQL spends more per run than this: parse and plan, commits, the protocol, and two backends contending for the same index pages.',
      ],
    };
  },
};
