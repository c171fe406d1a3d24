import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SystemClock } from '../../src/core/index.js';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';
import { type Line, TockProcess } from '../setup/proc.js';

const TENANT = 'default';

let db: TestDatabase;
let dir: string;
let config: string;
let handlersModule: string;

beforeAll(async () => {
  db = await setupDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'tock-worker-e2e-'));
  config = path.join(dir, 'worker.yaml');
  await writeFile(
    config,
    [
      'handlers:',
      '  greet:',
      `    exec: { argv: [sh, -c, 'echo "hello $TOCK_JOB_ID, attempt $TOCK_ATTEMPT"'] }`,
      '  refuse:',
      `    exec: { argv: [sh, -c, 'echo "bad input" >&2; exit 3'], permanent_exit_codes: others }`,
      '  linger:',
      `    exec: { argv: [sh, -c, 'sleep 30 & echo $! > "$0"; wait', ${JSON.stringify(path.join(dir, 'linger.pid'))}] }`,
      '  stubborn:',
      `    exec: { argv: [sh, -c, 'trap "" TERM; sleep 30 & echo $! > "$0"; wait', ${JSON.stringify(path.join(dir, 'stubborn.pid'))}] }`,
      '',
    ].join('\n'),
  );
  handlersModule = path.join(dir, 'handlers.mjs');
  await writeFile(
    handlersModule,
    'export const handlers = { shout: ({ payload }) => ({ output: String(payload.word).toUpperCase() }) };\n',
  );
});

afterAll(async () => {
  await db.teardown();
  await rm(dir, { recursive: true, force: true });
});

/** `tock` with no server or database settings inherited from this process's environment. */
class Proc extends TockProcess {
  constructor(args: string[], env: Record<string, string | undefined> = {}, cwd?: string) {
    super(args, { DATABASE_URL: undefined, TOCK_URL: undefined, TOCK_KEY: undefined, ...env }, cwd);
  }
}

const about = (msg: string, runId: string) => (l: Line) => l.msg === msg && l.run_id === runId;

async function trigger(jobId: string, handler: string, payload: unknown = {}): Promise<string> {
  await upsertJob(db.store, {
    tenantId: TENANT,
    job: { jobId, schedule: '@yearly', handler, payload, maxAttempts: 3 },
    now: db.clock.nowMs(),
  });
  const run = await db.store.triggerRun({ tenantId: TENANT, jobId, now: db.clock.nowMs() });
  return run.runId;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/** Test guard: polls until `check` holds, failing loudly after `timeoutMs`. */
async function eventually(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Test guard: polls `get` until it gives a value, failing loudly after `timeoutMs`. */
async function until<T>(what: string, get: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await get();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('tock worker on the database', () => {
  test('runs module and config handlers, logs each run, keeps outputs, and drains on SIGTERM', async () => {
    const greet = await trigger('greeting', 'greet');
    const shout = await trigger('shouting', 'shout', { word: 'tock' });
    const refuse = await trigger('refusing', 'refuse');
    // Relative paths resolve against the working directory.
    const w = new Proc(
      [
        'worker',
        '--handlers',
        './handlers.mjs',
        '--config',
        'worker.yaml',
        '--poll',
        '100ms',
        '--grace',
        '500ms',
      ],
      { DATABASE_URL: db.url, TOCK_SCHEMA: db.schema, TOCK_LOG_FORMAT: 'json' },
      dir,
    );
    const running = await w.waitFor(
      (l) => l.msg === 'tock worker is running; SIGTERM or Ctrl-C drains it',
      'start',
    );
    expect(running.handlers).toEqual(['shout', 'greet', 'refuse', 'linger', 'stubborn']);
    expect(running.worker).toMatch(/^worker-.+-\d+-[0-9a-f]{8}$/);
    const started = await w.waitFor(about('run started', greet), 'greet to start');
    expect(started).toMatchObject({ job_id: 'greeting', handler: 'greet', attempt: 1 });
    await w.waitFor(about('run succeeded', greet), 'greet to succeed');
    await w.waitFor(about('run succeeded', shout), 'shout to succeed');
    const failed = await w.waitFor(about('run failed; dead-lettered', refuse), 'refuse to be dead-lettered');
    expect(failed.error).toBe('PermanentError: sh exited with code 3 (permanent)');

    const g = await db.store.getRun({ tenantId: TENANT, runId: greet });
    expect(g.state).toBe('succeeded');
    expect(g.attempts[0]!.output).toBe('hello greeting, attempt 1\n');
    expect((await db.store.getRun({ tenantId: TENANT, runId: shout })).attempts[0]!.output).toBe('TOCK');
    const r = await db.store.getRun({ tenantId: TENANT, runId: refuse });
    expect(r.state).toBe('dead');
    expect(r.attempts[0]!.error).toBe(
      'PermanentError: sh exited with code 3 (permanent)\n--- output ---\nbad input\n',
    );
    expect(r.attempts[0]!.output).toBe('bad input\n');

    // A command still running at SIGTERM: after the grace it is killed with its process group,
    // and its run is released (pending again, no attempt spent) for another worker.
    const linger = await trigger('lingering', 'linger');
    await w.waitFor(about('run started', linger), 'linger to start');
    const pidfile = path.join(dir, 'linger.pid');
    await eventually(
      'the command wrote its pid',
      () => existsSync(pidfile) && /^\d+\n$/.test(readFileSync(pidfile, 'utf8')),
    );
    const grandchild = Number(readFileSync(pidfile, 'utf8'));
    expect(alive(grandchild)).toBe(true);
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    expect(w.lines.some((l) => l.msg === 'stopped')).toBe(true);
    expect(w.stderr).toBe('');
    const l = await db.store.getRun({ tenantId: TENANT, runId: linger });
    expect(l.state).toBe('pending');
    await eventually(`process ${grandchild} is gone`, () => !alive(grandchild));
  });

  test('a command that ignores SIGTERM does not outlive a worker that exits before its SIGKILL', async () => {
    const w = new Proc(['worker', '--config', config, '--poll', '100ms', '--grace', '200ms'], {
      DATABASE_URL: db.url,
      TOCK_SCHEMA: db.schema,
      TOCK_LOG_FORMAT: 'json',
    });
    const runId = await trigger('stubborn', 'stubborn');
    await w.waitFor(about('run started', runId), 'the command to start');
    const pidfile = path.join(dir, 'stubborn.pid');
    await eventually(
      'the command wrote its pid',
      () => existsSync(pidfile) && /^\d+\n$/.test(readFileSync(pidfile, 'utf8')),
    );
    const grandchild = Number(readFileSync(pidfile, 'utf8'));
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    // SIGTERM was ignored and the 2 s SIGKILL timer died with the worker: the exit hook killed it.
    await eventually(`process ${grandchild} is gone`, () => !alive(grandchild));
    expect((await db.store.getRun({ tenantId: TENANT, runId })).state).toBe('pending');
  });
});

describe('tock worker --tenant', () => {
  test("claims only those tenants' runs, names the tenant in each run's log lines, and says so in the node list", async () => {
    // The other tenant's run is the oldest: an unrestricted worker would take it first.
    const at = db.clock.nowMs();
    const runOf = async (tenantId: string, jobId: string, scheduledFor: number) => {
      await upsertJob(db.store, { tenantId, job: { jobId, schedule: '@yearly', handler: 'greet' }, now: at });
      return (await db.store.triggerRun({ tenantId, jobId, scheduledFor, now: at })).runId;
    };
    const foreign = await runOf('beta', 'beta-greeting', at - 3000);
    const mine = await runOf('acme', 'acme-greeting', at - 2000);
    const w = new Proc(
      [
        'worker',
        '--config',
        config,
        '--poll',
        '100ms',
        '--grace',
        '500ms',
        '--tenant',
        'acme',
        '--tenant',
        'gamma',
      ],
      { DATABASE_URL: db.url, TOCK_SCHEMA: db.schema, TOCK_LOG_FORMAT: 'json' },
    );
    const running = await w.waitFor(
      (l) => l.msg === 'tock worker is running; SIGTERM or Ctrl-C drains it',
      'start',
    );
    expect(running.tenants).toEqual(['acme', 'gamma']);
    const started = await w.waitFor(about('run started', mine), "acme's run to start");
    expect(started).toMatchObject({ tenant_id: 'acme', job_id: 'acme-greeting' });
    const done = await w.waitFor(about('run succeeded', mine), "acme's run to succeed");
    expect(done.tenant_id).toBe('acme');
    // The node list says whose runs it claims and which handlers it runs.
    const me = await until('the worker is in the node list', async () =>
      (await db.store.listNodes({ tenantId: null, limit: 100 })).items.find(
        (n) => n.nodeId === running.worker,
      ),
    );
    expect(me.info).toMatchObject({
      tenants: ['acme', 'gamma'],
      handlers: ['greet', 'refuse', 'linger', 'stubborn'],
    });
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    // beta's run, older than acme's, was never claimed.
    expect(w.lines.some((l) => l.run_id === foreign)).toBe(false);
    expect((await db.store.getRun({ tenantId: 'beta', runId: foreign })).state).toBe('pending');
  });
});

describe('tock worker through a Tock server', () => {
  let api: Api;
  let url: string;

  beforeAll(async () => {
    // The server follows real time here: the worker compares lease expiries with its own clock.
    api = await startApi(db, { clock: new SystemClock(), auth: 'open' });
    url = api.base;
  });
  afterAll(async () => {
    await api.close();
  });

  test('claims, runs and completes over HTTP with no database settings', async () => {
    const runId = await trigger('remote-greeting', 'greet');
    const w = new Proc(['worker', '--config', config, '--url', url, '--log-format', 'json', '--grace', '1s']);
    const running = await w.waitFor(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('tock worker is running'),
      'start',
    );
    expect(running.via).toBe(url);
    await w.waitFor(about('run succeeded', runId), 'the run to succeed');
    const run = await db.store.getRun({ tenantId: TENANT, runId });
    expect(run.attempts[0]!.output).toBe('hello remote-greeting, attempt 1\n');
    // It reports itself (pool, handlers, runs held, clock offset) and is listed while it runs ...
    const row = async (): Promise<
      { clock_offset_ms: number | null; info: Record<string, unknown> } | undefined
    > =>
      (
        await db.pool.query('SELECT clock_offset_ms, info FROM nodes WHERE node_id = $1', [
          `${TENANT}/${running.worker}`,
        ])
      ).rows[0];
    const listed = await until('the worker reports itself', async () => {
      const r = await row();
      return r?.info.handlers && r.clock_offset_ms !== null ? r : undefined;
    });
    expect(listed.info).toMatchObject({ pool: 'default', concurrency: 10, in_flight: expect.any(Number) });
    expect(listed.info.handlers).toEqual(['greet', 'refuse', 'linger', 'stubborn']);
    expect(Math.abs(listed.clock_offset_ms as number)).toBeLessThan(1000);
    // ... and a clean stop takes it off the list.
    w.child.kill('SIGINT');
    expect(await w.exited).toBe(0);
    expect(await row()).toBeUndefined();
  });

  test('refuses --tenant: the key decides whose runs it works', async () => {
    const p = new Proc(['worker', '--config', config, '--url', url, '--tenant', 'acme']);
    expect(await p.exited).toBe(1);
    expect(p.stderr).toMatch(/^tock: --tenant is for a worker on the database/);
  });
});

describe('tock worker refuses to start', () => {
  const refused = async (args: string[], env: Record<string, string | undefined> = {}) => {
    const p = new Proc(['worker', ...args], env);
    expect(await p.exited).toBe(1);
    expect(p.stdout).toBe('');
    return p.stderr;
  };

  test('without handlers', async () => {
    expect(await refused(['--url', 'http://127.0.0.1:9'])).toBe(
      'tock: tock worker needs handlers: --handlers <module>, --config <file>, or both\n',
    );
  });

  test('with a config naming a URL outside its allow-list', async () => {
    const bad = path.join(dir, 'bad.yaml');
    await writeFile(
      bad,
      'allow: [https://api.example.com/]\nhandlers:\n  h: { http: { url: "https://evil.example/" } }\n',
    );
    expect(await refused(['--config', bad, '--url', 'http://127.0.0.1:9'])).toBe(
      `tock: worker config ${bad}: handler "h": http.url "https://evil.example/" is outside this worker's allow-list (https://api.example.com/)\n`,
    );
  });

  test('with a handler defined twice', async () => {
    const twice = path.join(dir, 'twice.mjs');
    await writeFile(twice, 'export default { greet: () => {} };\n');
    expect(await refused(['--config', config, '--handlers', twice, '--url', 'http://127.0.0.1:9'])).toBe(
      `tock: handler "greet" is defined twice: in ${twice} and in ${config}\n`,
    );
  });

  test('with both a server and a database', async () => {
    expect(
      await refused(['--config', config, '--url', 'http://127.0.0.1:9', '--database-url', db.url]),
    ).toMatch(/^tock: choose one connection/);
  });
});

describe('tock worker with a key the server refuses', () => {
  let api: Api;

  beforeAll(async () => {
    api = await startApi(db, { clock: new SystemClock(), auth: 'keys' });
  });
  afterAll(async () => {
    await api.close();
  });

  /** The worker's exit code and stderr; a worker still running after `ms` is killed and fails the test. */
  const exits = async (key: string, ms = 15_000) => {
    const p = new Proc([
      'worker',
      '--config',
      config,
      '--url',
      api.base,
      '--key',
      key,
      '--log-format',
      'json',
    ]);
    const timer = setTimeout(() => p.child.kill('SIGKILL'), ms);
    const code = await p.exited;
    clearTimeout(timer);
    return { code, stderr: p.stderr, errors: p.lines.filter((l) => Number(l.level) >= 50) };
  };

  test('an unknown key: exit 1 with one line, no retries', async () => {
    const out = await exits('tock_not-a-key-at-all');
    expect(out.code).toBe(1);
    expect(out.stderr).toBe(
      `tock: ${api.base} refused this worker: 401 unauthorized: the API key is unknown or revoked: check --key (TOCK_KEY): it needs the worker role in the tenant whose runs to work\n`,
    );
    expect(out.errors).toEqual([]);
  });

  test('a key without the worker role: exit 1 with one line', async () => {
    const { secret } = await db.store.createApiKey({
      tenantId: TENANT,
      role: 'reader',
      now: new SystemClock().nowMs(),
    });
    const out = await exits(secret);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(new RegExp(`^tock: ${api.base} refused this worker: 403 forbidden: .*\\n$`));
    expect(out.stderr.split('\n')).toHaveLength(2);
  });

  test('a key revoked while it works: the worker drains and exits 1, saying why once', async () => {
    const now = new SystemClock().nowMs();
    // A tenant of its own: the runs earlier tests left in TENANT (a handler that lingers past
    // SIGTERM) would be claimed and drained for up to the grace period.
    const tenantId = 'revoked-key';
    const { key, secret } = await db.store.createApiKey({ tenantId, role: 'worker', now });
    const p = new Proc([
      'worker',
      '--config',
      config,
      '--url',
      api.base,
      '--key',
      secret,
      '--log-format',
      'json',
    ]);
    await p.waitFor((l) => String(l.msg).startsWith('tock worker is running'), 'start');
    await db.store.revokeApiKey({ tenantId, keyId: key.keyId, now, by: 'database' });
    const revokedAt = Date.now();
    const timer = setTimeout(() => p.child.kill('SIGKILL'), 20_000);
    const code = await p.exited;
    clearTimeout(timer);
    expect(code).toBe(1);
    // Within a report (every 5 s), not after a claim's long poll (20 s) ends: CI saw that race.
    expect(Date.now() - revokedAt).toBeLessThan(12_000);
    const why = p.lines.filter((l) => String(l.msg).includes('refused this worker'));
    expect(why).toHaveLength(1);
    expect(why[0]!.msg).toContain('401 unauthorized');
  }, 30_000);
});
