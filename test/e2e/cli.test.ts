/**
 * The real `tock` binary (built `dist/`) as a child process: the demo's ten lines, `tock dev`
 * running jobs and stopping cleanly on SIGINT, a second start reusing the data, bad job files.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createPool, PostgresStore } from '../../src/store/index.js';
import { endedRun } from '../setup/factories.js';
import { BIN, runTock, TockProcess } from '../setup/proc.js';

const url = inject('databaseUrl');
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tock-e2e-'));
  // Left private (0700) on purpose: as root, `tock dev` must make it reachable for the postgres user.
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const run = (args: string[], env: Record<string, string | undefined> = {}) => runTock(args, env);

const msg = (m: string) => (l: Record<string, unknown>) => l.msg === m;

async function jobsFile(name: string, body: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, body);
  return file;
}

describe('tock demo', () => {
  test("prints the reference design's ten lines with the same outcomes", async () => {
    const out = await run(['demo'], { DATABASE_URL: url });
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const lines = out.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(10);
    const expected = [
      /^tick at t=1000: 3 jobs due\s+-> runs \['billing', 'metrics', 'report'\]$/,
      /^the same tick replayed\s+-> 0 new runs \(unique on job_id \+ slot\)$/,
      /^w-1 claims twice\s+-> executed \['report', 'billing'\] \(priority 9 before 5\)$/,
      /^w-2 claims metrics then dies\s+-> lease held until t=1030$/,
      /^31 s later, the reaper runs\s+-> requeued \['metrics'\], attempt 2$/,
      /^w-2 wakes up and completes late\s+-> rejected: w-2 no longer holds the lease on [0-9a-f]{8}$/,
      /^w-3 picks up the requeued run\s+-> executed metrics#2, states \{'succeeded': 3\}$/,
      /^flaky fails twice \(max_attempts 2\) -> dead letters \[\('flaky', 'upstream 500'\)\]$/,
      /^scheduler down 350 s, catch_up 3\s+-> report backfilled 3 slots at \['1100', '1200', '1300'\]$/,
      /^metrics uses fire_once\s+-> 1 run, not 35$/,
    ];
    for (const [i, line] of lines.entries()) expect(line).toMatch(expected[i]!);
  });
});

describe('tock dev', () => {
  test('runs the jobs of its file, logs each run, stops cleanly on SIGINT, and a second start reuses the data', async () => {
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    const file = await jobsFile(
      'every-second.yaml',
      'jobs:\n  - { job_id: tictoc, schedule: "@every 1s", handler: echo }\n',
    );
    const env = { DATABASE_URL: url, TOCK_SCHEMA: schema, TOCK_LOG_FORMAT: 'json', TOCK_JOBS: file };
    try {
      const first = new TockProcess(['dev', '--poll', '100ms', '--tick', '200ms', '--port', '0'], env);
      await first.waitFor((l) => l.msg === 'job created' && l.job_id === 'tictoc', 'the job registered');
      const started = await first.waitFor(msg('run started'), 'a run to start');
      const done = await first.waitFor(
        (l) => l.msg === 'run succeeded' && l.run_id === started.run_id,
        'that run to succeed',
      );
      expect(done.job_id).toBe('tictoc');
      expect(done.duration_ms).toEqual(expect.any(Number));
      // One line says where the API listens: Tock's own, not Fastify's as well.
      expect(first.lines.filter((l) => String(l.msg).startsWith('Server listening'))).toEqual([]);
      expect(first.lines.filter((l) => String(l.msg).startsWith('tock listening on'))).toHaveLength(1);
      first.child.kill('SIGINT');
      expect(await first.exited).toBe(0);
      expect(first.lines.some(msg('stopped'))).toBe(true);

      const pool = createPool(url, { schema, max: 1 });
      try {
        const { rows } = await pool.query(
          `SELECT count(*) FILTER (WHERE state = 'succeeded')::int AS n, count(*) FILTER (WHERE state = 'running')::int AS running FROM run_states WHERE job_id = 'tictoc'`,
        );
        expect(rows[0].n).toBeGreaterThanOrEqual(1);
        expect(rows[0].running).toBe(0);
      } finally {
        await pool.end();
      }

      const second = new TockProcess(['dev', '--poll', '100ms', '--tick', '200ms', '--port', '0'], env);
      const again = await second.waitFor(
        (l) => typeof l.msg === 'string' && l.msg.startsWith('job ') && l.job_id === 'tictoc',
        'the job',
      );
      expect(again.msg).toBe('job unchanged');
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    } finally {
      const pool = createPool(url, { max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });

  test('on the embedded database: starts it, runs jobs, and stops it with the process', async () => {
    const dataDir = path.join(dir, 'embedded');
    const file = await jobsFile(
      'embedded.yaml',
      'jobs:\n  - { job_id: local, schedule: "@every 1s", handler: echo }\n',
    );
    const env = { DATABASE_URL: undefined, TOCK_DATA_DIR: dataDir, TOCK_LOG_FORMAT: 'json', TOCK_JOBS: file };
    const dev = new TockProcess(['dev', '--poll', '100ms', '--tick', '200ms', '--port', '0'], env);
    await dev.waitFor(msg('embedded PostgreSQL is up'), 'the embedded database', 60_000);
    await dev.waitFor((l) => l.msg === 'run succeeded' && l.job_id === 'local', 'a run to succeed');
    expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(true);

    // Another command on the same data directory shares the running database and leaves it up.
    const key = await run(['keys', 'create', '--tenant', 'acme', '--role', 'admin'], env);
    expect(key.stderr).not.toContain('tock:');
    expect(key.code).toBe(0);
    expect(key.stdout.trimEnd().split('\n').pop()).toMatch(/^tock_[A-Za-z0-9_-]{43}$/);
    const before = dev.lines.filter(msg('run succeeded')).length;
    await dev.waitFor(
      () => dev.lines.filter(msg('run succeeded')).length > before,
      'dev to keep running jobs',
    );

    // A dev killed outright leaves its PostgreSQL behind; the next start takes it over.
    dev.child.kill('SIGKILL');
    await dev.exited;
    expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(true);
    const again = new TockProcess(['dev', '--poll', '100ms', '--tick', '200ms', '--port', '0'], env);
    await again.waitFor(msg('embedded PostgreSQL is up'), 'the embedded database again', 60_000);
    await again.waitFor((l) => l.msg === 'run succeeded' && l.job_id === 'local', 'a run to succeed again');
    again.child.kill('SIGINT');
    const code = await again.exited;
    expect(code, again.stderr).toBe(0);
    // PostgreSQL removes its pid file when it has shut down.
    expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  }, 120_000);

  test('a bad jobs file is refused with the entry named, and nothing is registered', async () => {
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    const file = await jobsFile(
      'bad.yaml',
      'jobs:\n  - { job_id: fine, schedule: "@every 1s", handler: echo }\n  - { job_id: broken, schedule: "61 * * * *", handler: echo }\n',
    );
    const out = await run(['dev'], { DATABASE_URL: url, TOCK_SCHEMA: schema, TOCK_JOBS: file });
    expect(out.code).toBe(1);
    expect(out.stderr).toContain('entry 2');
    expect(out.stderr).toMatch(/minute/i);
    const pool = createPool(url, { max: 1 });
    const { rows } = await pool.query('SELECT to_regnamespace($1) AS ns', [schema]);
    await pool.end();
    expect(rows[0].ns).toBeNull();
  });

  test("runs your handlers module and your config's executors beside the built-in handlers", async () => {
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    const file = await jobsFile(
      'own-handlers.yaml',
      [
        'jobs:',
        '  - { job_id: by-command, schedule: "@every 1s", handler: greet }',
        '  - { job_id: by-module, schedule: "@every 1s", handler: echo, payload: { message: hi } }',
        '',
      ].join('\n'),
    );
    const config = await jobsFile(
      'dev-worker.yaml',
      `handlers:\n  greet:\n    exec: { argv: [sh, -c, 'echo "hello $TOCK_JOB_ID"'] }\n`,
    );
    const mod = await jobsFile(
      'dev-handlers.mjs',
      "export default { echo: ({ payload }) => 'mine: ' + payload.message };\n",
    );
    const env = { DATABASE_URL: url, TOCK_SCHEMA: schema, TOCK_LOG_FORMAT: 'json', TOCK_JOBS: file };
    try {
      const dev = new TockProcess(
        ['dev', '--poll', '100ms', '--tick', '200ms', '--port', '0', '--config', config, '--handlers', mod],
        env,
      );
      const running = await dev.waitFor(msg('tock dev is running; Ctrl-C stops it'), 'dev to start');
      expect(running.handlers).toEqual(expect.arrayContaining(['greet', 'echo', 'sleep', 'flaky', 'poison']));
      expect(dev.lines.find((l) => l.msg === 'your handler replaces the built-in one')?.handler).toBe('echo');
      await dev.waitFor((l) => l.msg === 'run succeeded' && l.job_id === 'by-command', 'the command to run');
      await dev.waitFor((l) => l.msg === 'run succeeded' && l.job_id === 'by-module', 'the module to run');
      dev.child.kill('SIGINT');
      expect(await dev.exited).toBe(0);
      const pool = createPool(url, { schema, max: 1 });
      const store = new PostgresStore(pool);
      try {
        for (const [jobId, output] of [
          ['by-command', 'hello by-command\n'],
          ['by-module', 'mine: hi'],
        ] as const) {
          const page = await store.listRuns({ tenantId: 'default', jobId, state: 'succeeded', limit: 1 });
          const run = await store.getRun({ tenantId: 'default', runId: page.items[0]!.runId });
          expect(run.attempts[0]!.output).toBe(output);
        }
      } finally {
        await pool.end();
      }
    } finally {
      const pool = createPool(url, { max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });

  test('a bad worker config is refused before anything starts', async () => {
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    const config = await jobsFile('dev-bad-worker.yaml', 'handlers:\n  greet: { exec: { argv: [] } }\n');
    const out = await run(['dev', '--config', config], { DATABASE_URL: url, TOCK_SCHEMA: schema });
    expect(out.code).toBe(1);
    expect(out.stderr).toContain(`worker config ${config}`);
    const pool = createPool(url, { max: 1 });
    const { rows } = await pool.query('SELECT to_regnamespace($1) AS ns', [schema]);
    await pool.end();
    expect(rows[0].ns).toBeNull();
  });

  test('bad options are refused before anything starts', async () => {
    const out = await run(['dev', '--lease', 'soon'], { DATABASE_URL: url });
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain('--lease');
    const late = await run(['dev', '--misfire-threshold', '2d'], { DATABASE_URL: url });
    expect(late.code).not.toBe(0);
    expect(late.stderr).toContain('--misfire-threshold');
    expect(late.stderr).toContain('expected a duration from 0 to 24h');
    // The ageing step, on each command whose store writes sort keys, by flag or variable.
    for (const [args, env] of [
      [['dev', '--aging-step', '0'], {}],
      [['server', '--insecure', '--port', '0'], { TOCK_AGING_STEP: '0s' }],
      [['worker', '--aging-step', '2d'], {}],
    ] as const) {
      const out = await run([...args], { DATABASE_URL: url, ...env });
      expect(out.code, args.join(' ')).toBe(1);
      expect(out.stderr).toContain("error: option '--aging-step <duration>'");
      expect(out.stderr).toContain(
        'TOCK_AGING_STEP' in env ? "value '0s' from env 'TOCK_AGING_STEP'" : `argument '${args[2]}'`,
      );
      expect(out.stderr).toContain('is invalid. expected a duration from 1s to 1d');
    }
  });
});

describe('help', () => {
  test.each([
    [
      ['dev', '--lease', '5'],
      "error: option '--lease <duration>' argument '5' is invalid. duration \"5\" has no unit after 5; units are ms, s, m, h and d (lower case), e.g. 90s, 5m, 1h30m, 250ms",
      '(tock dev --help lists the options)',
    ],
    [
      ['jobs', 'list', '--bogus'],
      "error: unknown option '--bogus'",
      '(tock jobs list --help lists the options)',
    ],
    [['frob'], "error: unknown command 'frob'", '(tock --help lists the commands)'],
    [
      ['schedule'],
      "error: missing required argument 'expression'",
      '(tock schedule --help lists the options)',
    ],
  ])('a usage error of %j is one line and a --help hint, not the whole usage', async (args, error, hint) => {
    const out = await run(args);
    expect(out.code).toBe(1);
    expect(out.stdout).toBe('');
    expect(out.stderr).toBe(`${error}\n${hint}\n`);
  });

  test('an argument holding terminal escapes is echoed harmless in the error (usage and runtime errors)', async () => {
    const hostile = 'a\u001b[31mb\u0007';
    for (const args of [
      ['worker', '--tenant', hostile],
      ['schedule', '@daily', '--timezone', hostile],
    ]) {
      const out = await run(args);
      expect(out.code).toBe(1);
      expect(out.stderr).toContain('a\ufffd[31mb\ufffd');
      expect(out.stderr).not.toContain('\u001b');
      expect(out.stderr).not.toContain('\u0007');
    }
  });

  test('tock --version prints the version of the package', async () => {
    const pkg = JSON.parse(await readFile(path.join(path.dirname(BIN), '..', 'package.json'), 'utf8'));
    for (const flag of ['--version', '-V']) {
      const out = await run([flag]);
      expect([out.code, out.stdout, out.stderr]).toEqual([0, `${pkg.version}\n`, '']);
    }
  });

  test('every command documents its options', async () => {
    const top = await run(['--help']);
    expect(top.code).toBe(0);
    for (const cmd of ['dev', 'migrate', 'demo']) expect(top.stdout).toContain(cmd);
    const dev = await run(['dev', '--help']);
    for (const opt of [
      '--database-url',
      '--data-dir',
      '--schema',
      '--jobs',
      '--lease',
      '--tick',
      '--lookahead',
      '--concurrency',
      '--grace',
      '--handlers',
      '--config',
    ]) {
      expect(dev.stdout).toContain(opt);
    }
  });
});

describe('tock schedule', () => {
  test('prints the next slots, UTC first, local time with offset, and marks the DST transition', async () => {
    const out = await run([
      'schedule',
      '30 2 * * *',
      '--timezone',
      'America/New_York',
      '--from',
      '2026-03-06T12:00:00Z',
      '--count',
      '3',
    ]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(out.stdout.trimEnd().split('\n')).toEqual([
      '2026-03-07T07:30:00.000Z  2026-03-07T02:30:00-05:00',
      '2026-03-08T07:00:00.000Z  2026-03-08T03:00:00-04:00  # DST: clocks go forward -05:00 → -04:00 at 2026-03-08T07:00:00.000Z; the local time was skipped; fires at the transition',
      '2026-03-09T06:30:00.000Z  2026-03-09T02:30:00-04:00',
    ]);
  });

  test('--from is exclusive', async () => {
    const out = await run(['schedule', '@every 1m', '--from', '2026-01-01T00:00:00Z', '--count', '1']);
    expect(out.stdout).toBe('2026-01-01T00:01:00.000Z  2026-01-01T00:01:00+00:00\n');
  });

  test.each([
    [['schedule', '61 * * * *'], 'minute 61 is out of range 0-59'],
    [
      ['schedule', '0 3 * * *', '--timezone', 'Mars/Olympus'],
      'timezone "Mars/Olympus" is not an IANA timezone name',
    ],
    [['schedule', '0 3 * * *', '--from', 'yesterday'], '--from "yesterday" is not an ISO-8601 instant'],
    [['schedule', '0 3 * * *', '--count', '0'], 'expected a positive integer'],
  ])('refuses %j with a clear message', async (args, message) => {
    const out = await run(args);
    expect(out.code).not.toBe(0);
    expect(out.stdout).toBe('');
    expect(out.stderr).toContain(message);
  });
});

describe('tock server', () => {
  test('refuses to start without API keys unless --insecure', async () => {
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    try {
      const out = await run(['server', '--port', '0'], { DATABASE_URL: url, TOCK_SCHEMA: schema });
      expect(out.code).toBe(1);
      expect(out.stderr).toContain('no API keys exist');
      expect(out.stdout).not.toContain('tock listening on');
    } finally {
      const pool = createPool(url, { max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });

  test('a port in use: tock server and tock dev exit 1 at once, saying which port, instead of hanging', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = String((taken.address() as AddressInfo).port);
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    const env = { DATABASE_URL: url, TOCK_SCHEMA: schema };
    try {
      for (const args of [
        ['server', '--insecure', '--port', port],
        ['dev', '--port', port, '--jobs', await jobsFile('port.yaml', 'jobs: []\n')],
      ]) {
        const started = Date.now();
        const out = await run(args, env);
        expect(out.code, out.stderr).toBe(1);
        expect(out.stderr).toContain(`port ${port} on 127.0.0.1 is in use by another process`);
        expect(out.stderr).toContain('--port');
        expect(Date.now() - started).toBeLessThan(20_000);
      }
    } finally {
      await new Promise((resolve) => taken.close(resolve));
      const pool = createPool(url, { max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  }, 60_000);

  test('--prune-archive: runs the pruner deletes are in the archive first; a directory it cannot write is refused before anything starts', async () => {
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    const env = { DATABASE_URL: url, TOCK_SCHEMA: schema, TOCK_LOG_FORMAT: 'json' };
    const archive = path.join(dir, `archive-${schema}`);
    const aFile = path.join(dir, `file-${schema}`);
    await writeFile(aFile, '');
    const pool = createPool(url, { schema, max: 2 });
    try {
      const refused = await run(
        ['server', '--insecure', '--port', '0', '--prune-archive', path.join(aFile, 'x')],
        env,
      );
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`the archive directory ${path.join(aFile, 'x')} cannot be written to`);
      expect(refused.stdout).not.toContain('tock listening on');
      const schemas = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
      expect(schemas.rowCount).toBe(0);

      expect((await run(['migrate'], env)).code).toBe(0);
      const store = new PostgresStore(pool);
      const now = Date.now();
      await store.upsertJobs({
        tenantId: 'acme',
        jobs: [{ jobId: 'old', schedule: '0 0 1 1 *', handler: 'echo' }],
        now,
      });
      const slot = now - 10 * 86_400_000;
      const expired = await endedRun(
        { store, pool },
        { tenantId: 'acme', jobId: 'old', slot, state: 'succeeded', finishedAt: slot },
      );
      const young = await endedRun(
        { store, pool },
        { tenantId: 'acme', jobId: 'old', slot: now - 1000, state: 'succeeded', finishedAt: now },
      );

      const server = new TockProcess(
        ['server', '--insecure', '--port', '0', '--prune-interval', '1s', '--prune-archive', archive],
        env,
      );
      await server.waitFor((l) => l.msg === 'pruned runs', 'the pruner’s log line');
      const day = new Date(slot).toISOString().slice(0, 10);
      const lines = (await readFile(path.join(archive, `runs-${day}.jsonl`), 'utf8')).trimEnd().split('\n');
      expect(lines.map((l) => JSON.parse(l))).toEqual([
        expect.objectContaining({ run_id: expired, tenant_id: 'acme', job_id: 'old', state: 'succeeded' }),
      ]);
      const left = await pool.query('SELECT run_id FROM runs WHERE job_id = $1', ['old']);
      expect(left.rows.map((r) => r.run_id)).toEqual([young]);
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    } finally {
      await pool.end();
      const admin = createPool(url, { max: 1 });
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    }
  }, 60_000);

  test('with a key: announces its address, serves the API with keys only, and stops on SIGTERM', async () => {
    const schema = `e2e_${randomBytes(4).toString('hex')}`;
    const env = { DATABASE_URL: url, TOCK_SCHEMA: schema, TOCK_LOG_FORMAT: 'json' };
    try {
      // The first admin key is made against the database directly.
      const migrated = await run(['migrate'], env);
      expect(migrated.code).toBe(0);
      const pool = createPool(url, { schema, max: 1 });
      const store = new PostgresStore(pool);
      const { secret } = await store.createApiKey({ tenantId: 'acme', role: 'admin', now: Date.now() });
      await pool.end();

      const server = new TockProcess(
        ['server', '--port', '0', '--misfire-threshold', '5m', '--aging-step', '5s'],
        env,
      );
      const listening = await server.waitFor(
        (l) => String(l.msg).startsWith('tock listening on http://127.0.0.1:'),
        'the listening line',
      );
      const base = String(listening.msg).slice('tock listening on '.length);
      expect((await fetch(`${base}/v1/jobs`)).status).toBe(401);
      const put = await fetch(`${base}/v1/jobs/hello`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ schedule: '@every 1m', handler: 'echo', priority: 3 }),
      });
      expect(put.status).toBe(200);
      // A job that sets no threshold of its own takes the server's --misfire-threshold.
      expect(await put.json()).toMatchObject({
        change: 'created',
        misfire_threshold_seconds: null,
        misfire_after_seconds: 300,
      });
      const logged = await server.waitFor(
        (l) => l.msg === 'request' && l.route === '/v1/jobs/:job_id',
        'a request log line',
      );
      expect(logged).toMatchObject({ method: 'PUT', status: 200, tenant: 'acme' });
      expect(JSON.stringify(server.lines)).not.toContain(secret);
      // The server's store writes sort keys with its --aging-step: slot − priority × 5 s.
      const slot = '2030-01-01T00:00:00.000Z';
      const triggered = await fetch(`${base}/v1/jobs/hello/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ scheduled_for: slot }),
      });
      expect(triggered.status).toBe(201);
      const { run_id } = (await triggered.json()) as { run_id: string };
      const check = createPool(url, { schema, max: 1 });
      const key = await check.query('SELECT sort_key FROM runs WHERE run_id = $1', [run_id]);
      await check.end();
      expect(key.rows[0].sort_key).toEqual(new Date(Date.parse(slot) - 3 * 5000));
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    } finally {
      const pool = createPool(url, { max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });
});
