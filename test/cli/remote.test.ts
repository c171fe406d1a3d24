/**
 * The operator commands of the real `tock` binary (built `dist/`) against a real API: the app is
 * built in this process on the test database's store and FakeClock and listens on loopback; every
 * command runs as a child process with TOCK_URL and TOCK_KEY, as an operator would run it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { SystemClock } from '../../src/core/index.js';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { countRows, endedRun, insertDelayRuns } from '../setup/factories.js';
import { type Exited, runTock } from '../setup/proc.js';

const TENANT = 'acme';

let db: TestDatabase;
let api: Api;
let url: string;
let adminKey: string;
let dir: string;

/** Runs `tock <args>` against the test API as the tenant's admin unless `env` says otherwise. */
const tock = (args: string[], env: Record<string, string | undefined> = {}): Promise<Exited> =>
  runTock(args, {
    DATABASE_URL: undefined,
    TOCK_SCHEMA: undefined,
    TOCK_URL: url,
    TOCK_KEY: adminKey,
    ...env,
  });

/** Runs a command that must succeed and returns its stdout. */
async function ok(args: string[], env: Record<string, string | undefined> = {}): Promise<string> {
  const out = await tock(args, env);
  expect(out.stderr, `tock ${args.join(' ')}`).toBe('');
  expect(out.code, `tock ${args.join(' ')}`).toBe(0);
  return out.stdout;
}

// biome-ignore lint/suspicious/noExplicitAny: a JSON answer of any shape; tests assert on it field by field
async function okJson(args: string[], env: Record<string, string | undefined> = {}): Promise<any> {
  return JSON.parse(await ok([...args, '--json'], env));
}

/** Runs a command that must fail and returns its stderr. */
async function fails(args: string[], env: Record<string, string | undefined> = {}): Promise<string> {
  const out = await tock(args, env);
  expect(out.code, `tock ${args.join(' ')} should fail; stdout: ${out.stdout}`).toBe(1);
  expect(out.stdout).toBe('');
  return out.stderr;
}

/** A loopback port nothing listens on (it was free a moment ago). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const lastLine = (text: string) => text.trimEnd().split('\n').at(-1) ?? '';

async function jobExists(jobId: string): Promise<boolean> {
  return db.store.getJob({ tenantId: TENANT, jobId }).then(
    () => true,
    () => false,
  );
}

beforeAll(async () => {
  db = await setupDatabase();
  // The FakeClock does not move, so the quota's bucket would never refill.
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  url = api.base;
  adminKey = (
    await db.store.createApiKey({ tenantId: TENANT, role: 'admin', name: 'test', now: db.clock.nowMs() })
  ).secret;
  dir = await mkdtemp(path.join(tmpdir(), 'tock-cli-'));
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('tock jobs put', () => {
  test('from flags: created, then unchanged, then updated; durations become whole seconds', async () => {
    const args = [
      'jobs',
      'put',
      'nightly',
      '--schedule',
      '0 3 * * *',
      '--handler',
      'report',
      '--timezone',
      'Europe/Berlin',
      '--payload',
      '{"region":"eu","n":[1,2]}',
      '--priority',
      '5',
      '--max-attempts',
      '4',
      '--misfire',
      'catch_up',
      '--catch-up-limit',
      '2',
      '--pool',
      'reports',
      '--lease',
      '2m',
      '--jitter',
      '30s',
      '--backoff-base',
      '1.5',
      '--backoff-cap',
      '10m',
    ];
    const first = await ok(args);
    expect(first).toMatch(
      /^JOB\s+CHANGE\s+NEXT RUN\nnightly\s+created\s+2026-01-0\dT\S+Z\n1 job: 1 created, 0 updated, 0 unchanged\n$/,
    );

    const job = await okJson(['jobs', 'get', 'nightly']);
    expect(job).toMatchObject({
      job_id: 'nightly',
      schedule: '0 3 * * *',
      timezone: 'Europe/Berlin',
      handler: 'report',
      payload: { region: 'eu', n: [1, 2] },
      priority: 5,
      max_attempts: 4,
      misfire: 'catch_up',
      catch_up_limit: 2,
      pool: 'reports',
      lease_seconds: 120,
      jitter_seconds: 30,
      backoff_base_seconds: 1.5,
      backoff_cap_seconds: 600,
      enabled: true,
    });

    expect(await ok(args)).toContain('1 job: 0 created, 0 updated, 1 unchanged');
    const changed = await okJson([...args.slice(0, -2), '--backoff-cap', '20m']);
    expect(changed.change).toBe('updated');
    expect(changed.backoff_cap_seconds).toBe(1200);
  });

  test('--payload-schema sets payload_schema; get shows it; a trigger whose payload fails it is refused', async () => {
    const schema = { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } };
    const base = ['jobs', 'put', 'typed', '--schedule', '@every 1h', '--handler', 'h'];
    await ok([...base, '--payload', '{"n":1}', '--payload-schema', JSON.stringify(schema)]);
    expect((await okJson(['jobs', 'get', 'typed'])).payload_schema).toEqual(schema);
    expect(await ok(['jobs', 'get', 'typed'])).toContain(`payload_schema  ${JSON.stringify(schema)}\n`);
    expect(await fails(['jobs', 'trigger', 'typed', '--payload', '{"n":"one"}'])).toMatch(
      /payload\.n does not match the job's payload_schema: must be integer/,
    );
    expect(await fails([...base, '--payload-schema', JSON.stringify(schema)])).toMatch(
      /payload\.n does not match the job's payload_schema/,
    );
    await ok(base);
    expect(await ok(['jobs', 'get', 'typed'])).toMatch(/^payload_schema\s+none$/m);
  });

  test('--run-timeout and --misfire-threshold set timeout_seconds and misfire_threshold_seconds; get shows both', async () => {
    const base = ['jobs', 'put', 'limits', '--schedule', '@every 1h', '--handler', 'report'];
    await ok([...base, '--run-timeout', '90s', '--misfire-threshold', '5m']);
    const job = await okJson(['jobs', 'get', 'limits']);
    expect([job.timeout_seconds, job.misfire_threshold_seconds, job.misfire_after_seconds]).toEqual([
      90, 300, 300,
    ]);
    const text = await ok(['jobs', 'get', 'limits']);
    expect(text).toMatch(/^timeout\s+90s$/m);
    expect(text).toMatch(/^misfire\s+fire_once, applies once a slot is over 300s late$/m);
    // Unset again: no timeout, the scheduler's threshold.
    await ok(base);
    const plain = await ok(['jobs', 'get', 'limits']);
    expect(plain).toMatch(/^timeout\s+none$/m);
    expect(plain).toMatch(
      /^misfire\s+fire_once, applies once a slot is over 60s late \(the scheduler's threshold\)$/m,
    );
    expect(await fails([...base, '--run-timeout', '1.5s'])).toMatch(/whole number of seconds/);
    // Zero where the help says 0 is allowed, written as a duration too (a review finding: "0s" was
    // refused as "must be positive"); never where it is not.
    await ok([...base, '--misfire-threshold', '0s', '--jitter', '0s']);
    expect((await okJson(['jobs', 'get', 'limits'])).misfire_threshold_seconds).toBe(0);
    expect(await fails([...base, '--run-timeout', '0s'])).toMatch(/must be positive/);
  });

  test('from a file: every job applied, a summary line; re-applying is unchanged', async () => {
    const file = path.join(dir, 'jobs.yaml');
    const yaml = (rollupPriority: number) =>
      [
        'jobs:',
        '  - { job_id: f-heartbeat, schedule: "@every 10s", handler: echo, payload: { message: hi } }',
        `  - { job_id: f-rollup, schedule: "* * * * *", handler: sleep, priority: ${rollupPriority} }`,
        '  - { job_id: f-billing, schedule: "0 2 * * *", timezone: Europe/Berlin, handler: echo, jitter_seconds: 60 }',
        '',
      ].join('\n');
    await writeFile(file, yaml(5));
    const first = await ok(['jobs', 'put', '-f', file]);
    expect(first).toMatch(/f-heartbeat\s+created/);
    expect(first).toMatch(/f-billing\s+created/);
    expect(lastLine(first)).toBe('3 jobs: 3 created, 0 updated, 0 unchanged');

    expect(lastLine(await ok(['jobs', 'put', '--file', file]))).toBe(
      '3 jobs: 0 created, 0 updated, 3 unchanged',
    );

    await writeFile(file, yaml(7));
    const answer = await okJson(['jobs', 'put', '--file', file]);
    expect(answer.jobs.map((j: { job_id: string; change: string }) => [j.job_id, j.change])).toEqual([
      ['f-heartbeat', 'unchanged'],
      ['f-rollup', 'updated'],
      ['f-billing', 'unchanged'],
    ]);
    expect((await okJson(['jobs', 'get', 'f-billing'])).jitter_seconds).toBe(60);
  });

  test('a file with a bad entry is refused whole, naming the entry, before any request', async () => {
    const file = path.join(dir, 'bad.yaml');
    await writeFile(
      file,
      'jobs:\n  - { job_id: bad-1, schedule: "@every 1m", handler: echo }\n  - { job_id: bad-2, schedule: "61 * * * *", handler: echo }\n',
    );
    const stderr = await fails(['jobs', 'put', '-f', file]);
    expect(stderr).toMatch(/^tock: .*entry 2.*minute/m);
    expect(await jobExists('bad-1')).toBe(false);
  });

  test('the server validates what the flags cannot: its error is printed with status and code', async () => {
    const stderr = await fails(['jobs', 'put', 'bad-cron', '--schedule', '61 * * * *', '--handler', 'echo']);
    expect(stderr).toMatch(/^tock: 400 validation_error: .*minute 61/);
  });

  test('--file with a job_id or flags, and a job_id without --schedule, are refused', async () => {
    expect(await fails(['jobs', 'put', 'x', '-f', 'jobs.yaml'])).toContain('not both');
    expect(await fails(['jobs', 'put', 'x', '--handler', 'echo'])).toContain('--schedule is required');
  });
});

describe('tock jobs get, list, pause, resume, delete', () => {
  beforeAll(async () => {
    for (const id of ['l-a', 'l-b', 'l-c']) {
      await ok(['jobs', 'put', id, '--schedule', '@every 1m', '--handler', 'echo']);
    }
  });

  test('get prints the definition for people and the API object with --json', async () => {
    const text = await ok(['jobs', 'get', 'l-a']);
    expect(text).toMatch(/^job_id\s+l-a$/m);
    expect(text).toMatch(/^schedule\s+@every 1m$/m);
    expect(text).toMatch(/^state\s+active$/m);
    expect(text).toMatch(/^next_run_at\s+2026-01-01T00:00:00.000Z$/m);
    const job = await okJson(['jobs', 'get', 'l-a']);
    expect(job.job_id).toBe('l-a');
    expect(job.next_run_at).toBe('2026-01-01T00:00:00.000Z');
  });

  test('list: a table, pages with --limit, every page with --all', async () => {
    const table = await ok(['jobs', 'list']);
    const lines = table.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^JOB\s+SCHEDULE\s+TIMEZONE\s+HANDLER\s+POOL\s+PRIORITY\s+STATE\s+NEXT RUN$/);
    expect(lines.some((l) => /^l-b\s+@every 1m\s+UTC\s+echo\s+default\s+0\s+active\s+2026-/.test(l))).toBe(
      true,
    );

    const all = (await okJson(['jobs', 'list', '--limit', '500'])).jobs.map(
      (j: { job_id: string }) => j.job_id,
    );
    expect(all.length).toBeGreaterThanOrEqual(3);

    const first = await okJson(['jobs', 'list', '--limit', '2']);
    expect(first.jobs).toHaveLength(2);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await okJson(['jobs', 'list', '--limit', '2', '--cursor', first.next_cursor]);
    expect(second.jobs[0].job_id).toBe(all[2]);

    const paged = await okJson(['jobs', 'list', '--limit', '2', '--all']);
    expect(paged.jobs.map((j: { job_id: string }) => j.job_id)).toEqual(all);
    expect(paged.next_cursor).toBeNull();

    const hinted = await tock(['jobs', 'list', '--limit', '1']);
    expect(hinted.code).toBe(0);
    expect(hinted.stderr).toMatch(/^more: tock jobs list --cursor \S+ \(or --all\)$/m);
  });

  test('pause, resume and delete', async () => {
    expect(await ok(['jobs', 'pause', 'l-c'])).toBe('paused job l-c\n');
    expect((await okJson(['jobs', 'get', 'l-c'])).enabled).toBe(false);
    expect(await ok(['jobs', 'list'])).toMatch(/^l-c\s.*\spaused\s+-$/m);
    // A paused job shows no next run (its stored one is stale: resuming computes a new one).
    expect(await ok(['jobs', 'get', 'l-c'])).toMatch(/^next_run_at\s+-?$/m);
    const resumed = await okJson(['jobs', 'resume', 'l-c']);
    expect(resumed.enabled).toBe(true);
    expect(await ok(['jobs', 'delete', 'l-c'])).toBe('deleted job l-c\n');
    expect(await fails(['jobs', 'get', 'l-c'])).toBe('tock: 404 not_found: job "l-c" does not exist\n');
  });
});

describe('tock jobs trigger and tock runs', () => {
  beforeAll(async () => {
    await ok(['jobs', 'put', 't-job', '--schedule', '@daily', '--handler', 'echo']);
  });

  test('the same --idempotency-key returns the same run; the same slot without one is a 409 naming it', async () => {
    const args = ['jobs', 'trigger', 't-job', '--idempotency-key', 'deploy-42'];
    const first = await okJson(args);
    expect(first).toMatchObject({
      job_id: 't-job',
      state: 'pending',
      scheduled_for: '2026-01-01T00:00:00.000Z',
    });
    const again = await okJson(args);
    expect(again.run_id).toBe(first.run_id);
    const text = await ok(args);
    expect(text).toMatch(new RegExp(`^run_id\\s+${first.run_id}$`, 'm'));

    const stderr = await fails(['jobs', 'trigger', 't-job']);
    expect(stderr).toMatch(/^tock: 409 conflict: /);
    expect(stderr).toContain(first.run_id);
  });

  test('--at sets the slot; a bad instant is refused before any request', async () => {
    const run = await okJson(['jobs', 'trigger', 't-job', '--at', '2026-01-02T12:00:00+01:00']);
    expect(run.scheduled_for).toBe('2026-01-02T11:00:00.000Z');
    const out = await tock(['jobs', 'trigger', 't-job', '--at', 'tomorrow']);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain("option '--at <instant>' argument 'tomorrow' is invalid");
  });

  test('--payload gives the run its own payload; bad JSON is refused before any request', async () => {
    const run = await okJson([
      'jobs',
      'trigger',
      't-job',
      '--at',
      '2025-12-30T00:00:00Z',
      '--payload',
      '{"n":[1,2]}',
    ]);
    expect(run.payload).toEqual({ n: [1, 2] });
    expect((await db.store.getRun({ tenantId: TENANT, runId: run.run_id })).payload).toEqual({ n: [1, 2] });
    const out = await tock(['jobs', 'trigger', 't-job', '--payload', '{n:1}']);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain("option '--payload <json>' argument '{n:1}' is invalid. not JSON");
    // Valid JSON the API refuses (over 64 KiB): its message.
    const big = await fails(['jobs', 'trigger', 't-job', '--payload', JSON.stringify('x'.repeat(70_000))]);
    expect(big).toBe('tock: 400 validation_error: payload is larger than 65536 bytes\n');
  });

  test('runs list filters by job and state; runs show prints the run and its attempts', async () => {
    const list = await okJson(['runs', 'list', '--job', 't-job']);
    expect(list.runs.length).toBeGreaterThanOrEqual(2);
    expect(list.runs.every((r: { job_id: string }) => r.job_id === 't-job')).toBe(true);
    // Newest slot first.
    expect(list.runs[0].scheduled_for).toBe('2026-01-02T11:00:00.000Z');
    const pending = await okJson(['runs', 'list', '--state', 'pending', '--job', 't-job']);
    expect(pending.runs).toHaveLength(list.runs.length);
    expect((await okJson(['runs', 'list', '--state', 'dead', '--job', 't-job'])).runs).toEqual([]);

    const table = await ok(['runs', 'list', '--job', 't-job']);
    expect(table.split('\n')[0]).toMatch(
      /^RUN\s+JOB\s+SCHEDULED FOR\s+STATE\s+ATTEMPT\s+FINISHED\s+LAST ERROR$/,
    );
    expect(table).toMatch(
      new RegExp(`^${list.runs[0].run_id}\\s+t-job\\s+2026-01-02T11:00:00.000Z\\s+pending\\s+1/3`, 'm'),
    );

    const show = await ok(['runs', 'show', list.runs[0].run_id]);
    expect(show).toMatch(/^state\s+pending$/m);
    expect(show).toMatch(/^attempts:\nno attempts yet$/m);
    expect(await fails(['runs', 'show', '00000000-0000-4000-8000-000000000000'])).toMatch(
      /^tock: 404 not_found: run 00000000-0000-4000-8000-000000000000 does not exist/,
    );
    expect((await tock(['runs', 'list', '--state', 'sleeping'])).stderr).toContain('Allowed choices are');
  });
});

describe('tock runs cancel', () => {
  beforeAll(async () => {
    await ok(['jobs', 'put', 'c-job', '--schedule', '@daily', '--handler', 'cancelled', '--pool', 'c-pool']);
  });

  test('a queued run: one line; a running one: the line names the revoked lease; again: a 409 naming the state', async () => {
    const queued = (await okJson(['jobs', 'trigger', 'c-job', '--at', '2026-01-03T00:00:00Z'])).run_id;
    const text = await ok(['runs', 'cancel', queued]);
    expect(text).toBe(`cancelled run ${queued} of job c-job\n`);

    const running = (await okJson(['jobs', 'trigger', 'c-job', '--at', '2025-12-31T00:00:00Z'])).run_id;
    const [claimed] = await db.store.claimRuns({
      workerId: 'w-c',
      pool: 'c-pool',
      max: 1,
      now: db.clock.nowMs(),
    });
    expect(claimed?.runId).toBe(running);
    expect(await ok(['runs', 'cancel', running])).toBe(
      `cancelled run ${running} of job c-job; attempt 1's lease revoked from w-c\n`,
    );
    expect((await okJson(['runs', 'show', running])).state).toBe('cancelled');

    expect(await fails(['runs', 'cancel', queued])).toMatch(/^tock: 409 conflict: run \S+ is cancelled/);
    const json = await okJson(['runs', 'cancel', (await okJson(['jobs', 'trigger', 'c-job'])).run_id]);
    expect(json).toMatchObject({ job_id: 'c-job', state: 'cancelled', attempts: [] });
  });
});

describe('tock jobs backfill', () => {
  beforeAll(async () => {
    await ok(['jobs', 'put', 'b-job', '--schedule', '@every 1m', '--handler', 'echo']);
  });

  test('prints what it created and what existed; --json prints the answer; a repeat creates nothing', async () => {
    await ok(['jobs', 'trigger', 'b-job', '--at', '2025-12-31T00:10:00Z']);
    const args = [
      'jobs',
      'backfill',
      'b-job',
      '--from',
      '2025-12-31T00:00:00Z',
      '--to',
      '2025-12-31T16:40:00+00:00',
    ];
    expect(await ok(args)).toBe(
      'created 999, existing 1 (2025-12-31T00:00:00.000Z … 2025-12-31T16:39:00.000Z)\n',
    );
    expect(await okJson(args)).toEqual({
      created: 0,
      existing: 1000,
      first_slot: '2025-12-31T00:00:00.000Z',
      last_slot: '2025-12-31T16:39:00.000Z',
    });
    const empty = [
      'jobs',
      'backfill',
      'b-job',
      '--from',
      '2025-12-31T00:00:30Z',
      '--to',
      '2025-12-31T00:01:00Z',
    ];
    expect(await ok(empty)).toBe('created 0, existing 0 (no slot in the range)\n');
  });

  test('a reversed or too large range is the API 400; a missing or bad instant is refused before any request', async () => {
    const before = await db.pool.query('SELECT count(*)::int AS n FROM runs');
    expect(
      await fails([
        'jobs',
        'backfill',
        'b-job',
        '--from',
        '2026-01-02T00:00:00Z',
        '--to',
        '2026-01-01T00:00:00Z',
      ]),
    ).toBe(
      'tock: 400 validation_error: from 2026-01-02T00:00:00.000Z is after to 2026-01-01T00:00:00.000Z\n',
    );
    expect(
      await fails([
        'jobs',
        'backfill',
        'b-job',
        '--from',
        '2026-01-01T00:00:00Z',
        '--to',
        '2026-02-01T00:00:00Z',
      ]),
    ).toMatch(/^tock: 400 validation_error: .* holds more than 10000 slots of "@every 1m"/);
    expect((await tock(['jobs', 'backfill', 'b-job', '--from', '2026-01-01T00:00:00Z'])).stderr).toContain(
      "required option '--to <instant>' not specified",
    );
    expect(
      (await tock(['jobs', 'backfill', 'b-job', '--from', 'yesterday', '--to', '2026-01-01T00:00:00Z']))
        .stderr,
    ).toContain("option '--from <instant>' argument 'yesterday' is invalid");
    expect(
      await fails([
        'jobs',
        'backfill',
        'nope',
        '--from',
        '2026-01-01T00:00:00Z',
        '--to',
        '2026-01-02T00:00:00Z',
      ]),
    ).toBe('tock: 404 not_found: job "nope" does not exist\n');
    expect((await db.pool.query('SELECT count(*)::int AS n FROM runs')).rows[0].n).toBe(before.rows[0].n);
  });
});

describe('tock dlq', () => {
  let runId: string;

  beforeAll(async () => {
    await ok(['jobs', 'put', 'd-job', '--schedule', '@daily', '--handler', 'doomed']);
    runId = (await okJson(['jobs', 'trigger', 'd-job'])).run_id;
    const [claimed] = await db.store.claimRuns({
      workerId: 'w-1',
      pool: 'default',
      max: 1,
      handlers: ['doomed'],
      tenantId: TENANT,
      now: db.clock.nowMs(),
    });
    expect(claimed?.runId).toBe(runId);
    await db.store.failRun({
      runId,
      leaseToken: claimed!.leaseToken,
      error: 'upstream 500',
      errorStack: 'Error: upstream 500\n    at fetch (handler.ts:3)\n    at run (worker.ts:9)',
      output: 'GET /api\n\u001b[31mgot 500\u001b[0m',
      permanent: true,
      now: db.clock.nowMs(),
    });
  });

  test('list shows the dead run with its error; runs show has the attempt and its error', async () => {
    const dead = await okJson(['dlq', 'list']);
    expect(dead.runs.map((r: { run_id: string }) => r.run_id)).toContain(runId);
    expect(dead.runs.every((r: { state: string }) => r.state === 'dead')).toBe(true);
    // Tables show the message, not the stack.
    const table = await ok(['dlq', 'list', '--job', 'd-job']);
    expect(table).toMatch(
      new RegExp(`^${runId}\\s+d-job\\s+\\S+\\s+dead\\s+1/3\\s+\\S+\\s+upstream 500$`, 'm'),
    );

    // runs show: the message in the table and the fields; the stack and the output below, line by
    // line (the output's escape sequences made harmless).
    const show = await ok(['runs', 'show', runId]);
    expect(show).toMatch(/^last_error\s+upstream 500$/m);
    expect(show).toMatch(/^ATTEMPT\s+WORKER\s+STARTED\s+FINISHED\s+OUTCOME\s+ERROR$/m);
    expect(show).toMatch(/^1\s+w-1\s+\S+\s+\S+\s+failed\s+upstream 500$/m);
    expect(show).toContain(
      [
        '',
        'attempt 1 (failed):',
        'STACK',
        '  Error: upstream 500',
        '      at fetch (handler.ts:3)',
        '      at run (worker.ts:9)',
        'OUTPUT',
        '  GET /api',
        '  \ufffd[31mgot 500\ufffd[0m',
        '',
      ].join('\n'),
    );
    expect(show).not.toContain('\u001b');
  });

  test('replay requeues a dead run; replaying it again is a 409', async () => {
    const text = await ok(['dlq', 'replay', runId]);
    expect(text).toMatch(new RegExp(`^replayed run ${runId} of job d-job: pending, claimable from 2026-`));
    expect((await okJson(['dlq', 'list', '--job', 'd-job'])).runs).toEqual([]);
    // Its attempts go on from the last: the replay's first is attempt 2 (of a fresh budget of 3).
    expect(await ok(['runs', 'show', runId])).toMatch(/^attempt\s+2 of 4$/m);
    expect(await fails(['dlq', 'replay', runId])).toMatch(/^tock: 409 conflict: run \S+ is pending/);
  });
});

describe('tock runs show: progress and logs', () => {
  test('a running run shows its progress; its attempt the message, the log lines and how many were dropped', async () => {
    await ok(['jobs', 'put', 'p-job', '--schedule', '@daily', '--handler', 'reporting']);
    const runId = (await okJson(['jobs', 'trigger', 'p-job'])).run_id;
    const [claimed] = await db.store.claimRuns({
      workerId: 'w-p',
      pool: 'default',
      max: 1,
      handlers: ['reporting'],
      tenantId: TENANT,
      now: db.clock.nowMs(),
    });
    expect(claimed?.runId).toBe(runId);
    const lines = Array.from({ length: 102 }, (_, i) => `copied batch ${i}`);
    lines[101] = 'last \u001b[31mred\u001b[0m';
    const { renewed } = await db.store.heartbeatRuns({
      leases: [{ ...claimed!, progress: { value: 42.5, message: 'rows 425 of 1000' }, logs: lines }],
      now: db.clock.nowMs(),
    });
    expect(renewed).toHaveLength(1);

    const show = await ok(['runs', 'show', runId]);
    expect(show).toMatch(/^state\s+running$/m);
    expect(show).toMatch(/^progress\s+42\.5 {2}rows 425 of 1000$/m);
    expect(show).toContain(
      [
        'attempt 1 (running):',
        'PROGRESS',
        '  42.5  rows 425 of 1000',
        'LOG (last 100 lines; 2 earlier dropped)',
        '  copied batch 2',
        '  copied batch 3',
      ].join('\n'),
    );
    // The last line, its escape sequences made harmless.
    expect(show).toContain('  copied batch 100\n  last \ufffd[31mred\ufffd[0m\n');
    expect(show).not.toContain('copied batch 1\n');
    expect(show).not.toContain('\u001b');
    const json = await okJson(['runs', 'show', runId]);
    expect(json).toMatchObject({ progress: 42.5, progress_message: 'rows 425 of 1000' });
    expect(json.attempts[0]).toMatchObject({ logs_dropped: 2 });
    expect(json.attempts[0].logs).toHaveLength(100);
  });
});

describe('tock keys', () => {
  test('create through the API prints the key alone on the last line; list; revoke shuts it out', async () => {
    const out = await tock(['keys', 'create', '--role', 'operator', '--name', 'ci']);
    expect(out.code).toBe(0);
    expect(out.stderr).toContain('shown once');
    const secret = lastLine(out.stdout);
    expect(secret).toMatch(/^tock_[A-Za-z0-9_-]{43}$/);
    const keyId = /^key_id\s+(\S+)$/m.exec(out.stdout)?.[1];
    expect(keyId).toMatch(/^key_/);
    expect(out.stdout).toMatch(/^role\s+operator$/m);

    // The new key works, with the operator's rights only.
    expect(await ok(['jobs', 'list'], { TOCK_KEY: secret })).toContain('JOB');
    expect(await fails(['keys', 'list'], { TOCK_KEY: secret })).toMatch(/^tock: 403 forbidden: /);

    const listed = await ok(['keys', 'list']);
    expect(listed).toMatch(new RegExp(`^${keyId}\\s+operator\\s+ci\\s+2026-\\S+\\s+-$`, 'm'));

    expect(await ok(['keys', 'revoke', keyId!])).toBe(`revoked key ${keyId} (operator, ci)\n`);
    expect(await fails(['jobs', 'list'], { TOCK_KEY: secret })).toBe(
      'tock: 401 unauthorized: the API key is unknown or revoked\n',
    );
    const keys = await okJson(['keys', 'list']);
    expect(keys.keys.find((k: { key_id: string }) => k.key_id === keyId).revoked_at).toEqual(
      expect.any(String),
    );
  });

  test('create --tenant writes to the database directly and makes a working first key of a new tenant', async () => {
    const env = {
      DATABASE_URL: inject('databaseUrl'),
      TOCK_SCHEMA: db.schema,
      TOCK_KEY: undefined,
      TOCK_URL: undefined,
    };
    const out = await tock(['keys', 'create', '--tenant', 'beta', '--role', 'admin', '--name', 'first'], env);
    expect(out.code, out.stderr).toBe(0);
    const secret = lastLine(out.stdout);
    expect(secret).toMatch(/^tock_/);
    expect(out.stdout).toMatch(/^tenant_id\s+beta$/m);
    // Which database, without the password.
    const where = new URL(inject('databaseUrl'));
    expect(out.stderr).toContain(
      `key created in ${where.hostname}:${where.port || '5432'}${where.pathname} (schema ${db.schema})\n`,
    );
    expect(out.stderr).not.toContain(where.password || 'no password');

    // A key of tenant beta: it sees beta's (empty) job list, not acme's.
    expect(await okJson(['jobs', 'list'], { TOCK_KEY: secret })).toEqual({ jobs: [], next_cursor: null });
    const keys = await okJson(['keys', 'list'], { TOCK_KEY: secret });
    expect(keys.keys).toHaveLength(1);
    expect(keys.keys[0]).toMatchObject({ tenant_id: 'beta', role: 'admin', name: 'first' });

    const asJson = await okJson(['keys', 'create', '--tenant', 'beta', '--role', 'reader'], env);
    expect(asJson).toMatchObject({
      tenant_id: 'beta',
      role: 'reader',
      key: expect.stringMatching(/^tock_/),
      database: `${where.hostname}:${where.port || '5432'}${where.pathname} (schema ${db.schema})`,
    });

    expect(await fails(['keys', 'create', '--tenant', 'no spaces', '--role', 'admin'], env)).toContain(
      'tenant_id',
    );
  });

  test('--role is required and checked', async () => {
    expect((await tock(['keys', 'create'])).stderr).toContain(
      "required option '--role <role>' not specified",
    );
    expect((await tock(['keys', 'create', '--role', 'root'])).stderr).toContain(
      'Allowed choices are cluster-admin, admin',
    );
    // A cluster-admin key is made on the database only (--tenant); the server refuses to make one.
    expect(await fails(['keys', 'create', '--role', 'cluster-admin'])).toMatch(
      /^tock: 400 validation_error: /,
    );
  });
});

describe('tock limits', () => {
  test('put creates then replaces; get; list as a table and JSON; delete', async () => {
    const created = await ok(['limits', 'put', 'payments-api', '--rate', '50', '--burst', '100']);
    expect(created).toMatch(/^created limit payments-api\n/);
    expect(created).toMatch(/^rate\s+50\/s, burst 100$/m);
    expect(created).toMatch(/^tokens\s+100$/m);
    expect(created).toMatch(/^max_concurrency\s+none$/m);

    // A flag not given is unset: the limit is replaced, not merged.
    const replaced = await okJson(['limits', 'put', 'payments-api', '--max-concurrency', '4']);
    expect(replaced).toMatchObject({
      key: 'payments-api',
      rate: null,
      burst: null,
      max_concurrency: 4,
      in_use: 0,
    });
    expect(await ok(['limits', 'put', 'payments-api', '--max-concurrency', '5'])).toMatch(
      /^replaced limit payments-api\n/,
    );

    const got = await ok(['limits', 'get', 'payments-api']);
    expect(got).toMatch(/^max_concurrency\s+5$/m);
    expect(got).toMatch(/^held\s+0$/m);
    await ok(['limits', 'put', 'other-api', '--rate', '0.5', '--burst', '2', '--max-concurrency', '1']);
    const table = (await ok(['limits', 'list'])).split('\n');
    expect(table[0]).toMatch(/^KEY\s+RATE\s+BURST\s+TOKENS\s+MAX_CONCURRENCY\s+IN_USE\s+HELD\s+UPDATED$/);
    expect(table[1]).toMatch(/^other-api\s+0\.5\s+2\s+2\s+1\s+0\s+0\s+2026-/);
    expect(table[2]).toMatch(/^payments-api\s+-\s+-\s+-\s+5\s+0\s+0\s+2026-/);
    const page = await okJson(['limits', 'list', '--limit', '1']);
    expect(page.limits.map((l: { key: string }) => l.key)).toEqual(['other-api']);
    expect(page.next_cursor).toEqual(expect.any(String));
    const all = await okJson(['limits', 'list', '--limit', '1', '--all']);
    expect(all.limits.map((l: { key: string }) => l.key)).toEqual(['other-api', 'payments-api']);

    expect(await ok(['limits', 'delete', 'other-api'])).toBe('deleted limit other-api\n');
    expect(await fails(['limits', 'get', 'other-api'])).toBe(
      'tock: 404 not_found: limit "other-api" does not exist\n',
    );
  });

  test("the tenant's own limit needs an admin key; bad input is refused", async () => {
    const operator = (
      await db.store.createApiKey({ tenantId: TENANT, role: 'operator', name: 'op', now: db.clock.nowMs() })
    ).secret;
    expect(
      await fails(['limits', 'put', `tenant:${TENANT}`, '--max-concurrency', '9'], { TOCK_KEY: operator }),
    ).toMatch(/^tock: 403 forbidden: .*admin key/);
    expect(await ok(['limits', 'put', `tenant:${TENANT}`, '--max-concurrency', '9'])).toMatch(
      /^created limit tenant:acme\n/,
    );
    expect(await fails(['limits', 'put', 'x', '--burst', '3'])).toMatch(
      /^tock: 400 validation_error: burst needs a rate/,
    );
    expect(await fails(['limits', 'put', 'x', '--max-concurrency', '0'])).toMatch(/max-concurrency/);
    expect(await fails(['limits', 'get', 'a b'])).toMatch(/key must be/);
    expect(await ok(['limits', 'delete', `tenant:${TENANT}`])).toBe(`deleted limit tenant:${TENANT}\n`);
  });
});

describe('failures', () => {
  test('an unknown job: exit 1 and the status, code and message', async () => {
    expect(await fails(['jobs', 'get', 'nope'])).toBe('tock: 404 not_found: job "nope" does not exist\n');
    expect(await fails(['jobs', 'pause', 'nope'])).toMatch(/^tock: 404 not_found: /);
    expect(await fails(['jobs', 'trigger', 'nope'])).toMatch(/^tock: 404 not_found: /);
  });

  test('no key: the 401 and a hint', async () => {
    expect(await fails(['jobs', 'list'], { TOCK_KEY: undefined })).toBe(
      'tock: 401 unauthorized: an API key is required: Authorization: Bearer <key> (no key given: pass --key or set TOCK_KEY)\n',
    );
    // --key on the command line works as TOCK_KEY does.
    expect(await ok(['jobs', 'list', '--key', adminKey], { TOCK_KEY: undefined })).toContain('JOB');
  });

  test.each([
    [['--priority', 'abc'], "option '--priority <n>' argument 'abc' is invalid. expected an integer"],
    [['--jitter', '500ms'], '"500ms" is not a whole number of seconds'],
    [['--lease', 'soon'], "option '--lease <duration>' argument 'soon' is invalid"],
    [['--payload', '{nope'], 'not JSON'],
    [['--misfire', 'sometimes'], 'Allowed choices are skip, fire_once, catch_up'],
    [['--backoff-base', 'two'], 'expected a number'],
  ])('bad flags %j are refused before any request', async (flags, message) => {
    const out = await tock(['jobs', 'put', 'never', '--schedule', '@daily', '--handler', 'echo', ...flags]);
    expect(out.code).toBe(1);
    expect(out.stdout).toBe('');
    expect(out.stderr).toContain(message);
    expect(await jobExists('never')).toBe(false);
  });

  test('an unreachable server names the URL', async () => {
    const port = await closedPort();
    const stderr = await fails(['jobs', 'list'], { TOCK_URL: `http://127.0.0.1:${port}` });
    expect(stderr).toBe(
      `tock: cannot reach http://127.0.0.1:${port}/v1/jobs?limit=50: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });

  test('a URL that is not one is refused', async () => {
    expect(await fails(['jobs', 'list', '--url', 'localhost:8080'])).toContain('must start with http://');
  });
});

describe('tock retention and tock runs prune', () => {
  test('get shows the defaults; set replaces them, canonical; a bad value is refused before any request', async () => {
    const before = await ok(['retention', 'get']);
    expect(before).toMatch(/^succeeded\s+7d\s+\(default\)$/m);
    expect(before).toMatch(/^dead\s+30d\s+\(default\)$/m);
    const set = await ok(['retention', 'set', '--succeeded', '48h', '--dead', 'forever']);
    expect(set).toMatch(/^retention replaced$/m);
    expect(set).toMatch(/^succeeded\s+2d\s+\(set\)$/m);
    expect(set).toMatch(/^dead\s+forever\s+\(set\)$/m);
    expect(set).toMatch(/^skipped\s+7d\s+\(default\)$/m);
    expect((await okJson(['retention', 'get'])).set).toEqual({ succeeded: '2d', dead: 'forever' });
    expect(await fails(['retention', 'set', '--succeeded', '2 days'])).toContain(
      "option '--succeeded <duration>'",
    );
    expect(await db.store.getTenantRetention({ tenantId: TENANT })).toEqual({
      succeeded: '2d',
      dead: 'forever',
    });
  });

  test('--dry-run counts the expired runs; without it they are deleted with their attempts', async () => {
    const now = db.clock.nowMs();
    await db.store.putTenantRetention({ tenantId: TENANT, retention: { succeeded: '1d' }, now });
    await ok(['jobs', 'put', 'pruned', '--schedule', '@every 1h', '--handler', 'echo']);
    for (let i = 0; i < 3; i++) {
      const slot = now - 3 * 86_400_000 + i * 1000;
      await endedRun(db, { tenantId: TENANT, jobId: 'pruned', slot, state: 'succeeded', finishedAt: slot });
    }
    const count = () => countRows(db.pool, 'runs', "tenant_id = $1 AND job_id = 'pruned'", [TENANT]);
    expect(await ok(['runs', 'prune', '--dry-run'])).toMatch(
      /^would delete 3 runs \(succeeded 3, dead 0, cancelled 0, skipped 0\) of \d+ scheduled before 2025-12-31T00:00:00.000Z$/m,
    );
    expect(await count()).toBe(3);
    expect(await okJson(['runs', 'prune'])).toMatchObject({ dry_run: false, runs: { succeeded: 3 } });
    expect(await count()).toBe(0);
    expect(await countRows(db.pool, 'attempts', 'run_id NOT IN (SELECT run_id FROM runs)')).toBe(0);
  });
});

describe('tock delay', () => {
  test("a line per step of the last --since, from run history; --job narrows it; a bad step is the server's 400", async () => {
    // The command ends its range at this machine's now, not the test API's FakeClock.
    const now = new SystemClock().nowMs();
    await insertDelayRuns(db.pool, [
      ...[1000, 2000, 3000].map((delayMs, i) => ({
        tenantId: TENANT,
        jobId: 'late',
        slot: now - 600_000 + i,
        delayMs,
      })),
      { tenantId: TENANT, jobId: 'prompt', slot: now - 600_000, delayMs: 5 },
      { tenantId: 'beta', jobId: 'late', slot: now - 600_000, delayMs: 90_000 },
    ]);
    const all = await ok(['delay', '--since', '1h', '--step', '30m']);
    const lines = all.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^4 ended runs with a slot from \S+ to \S+$/);
    expect(lines[1]).toMatch(/^start\s+runs\s+p50\s+p99\s+max$/);
    expect(lines[2]).toMatch(/^\S+\s+0\s+-\s+-\s+-$/);
    expect(lines[3]).toMatch(/^\S+\s+4\s+1s\s+3s\s+3s$/);
    expect(lines).toHaveLength(4);
    const job = await okJson(['delay', '--since', '1h', '--step', '1h', '--job', 'late']);
    expect(job.job_id).toBe('late');
    expect(job.buckets).toEqual([{ start: expect.any(String), runs: 3, p50: 2, p99: 3, max: 3 }]);
    expect(await fails(['delay', '--since', '2d', '--step', '1s'])).toContain('at most 1440');
  });
});

describe('help', () => {
  test('every command and every option has a description', () => {
    const walk = (cmd: Command, name: string): string[] => {
      const problems: string[] = [];
      if (name !== 'tock' && !cmd.description()) problems.push(`${name} has no description`);
      for (const opt of cmd.options) {
        if (!opt.description) problems.push(`${name} ${opt.flags} has no description`);
      }
      for (const arg of cmd.registeredArguments) {
        if (!arg.description) problems.push(`${name} <${arg.name()}> has no description`);
      }
      for (const sub of cmd.commands) problems.push(...walk(sub, `${name} ${sub.name()}`));
      return problems;
    };
    expect(walk(buildProgram(), 'tock')).toEqual([]);
  });

  test('--help of a remote command lists its options', async () => {
    const out = await ok(['jobs', 'put', '--help']);
    for (const opt of [
      '--file',
      '--schedule',
      '--handler',
      '--timezone',
      '--payload',
      '--priority',
      '--max-attempts',
      '--misfire',
      '--catch-up-limit',
      '--pool',
      '--lease',
      '--jitter',
      '--backoff-base',
      '--backoff-cap',
      '--url',
      '--key',
      '--json',
    ]) {
      expect(out).toContain(opt);
    }
    const top = await ok(['--help']);
    for (const cmd of ['jobs', 'runs', 'dlq', 'keys']) expect(top).toMatch(new RegExp(`^  ${cmd}\\b`, 'm'));
  });
});
