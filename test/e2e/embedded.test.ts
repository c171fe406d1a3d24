/**
 * The real `tock` binary on its embedded PostgreSQL (a data directory of this file's own, whatever
 * DATABASE_URL the run uses): Ctrl-C in a terminal, which signals the whole foreground process
 * group, drains Tock before the database stops; a second long-running command on the same data
 * directory is refused; `tock keys create --tenant` says where it wrote and refuses to invent a
 * database.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPool, startEmbedded } from '../../src/store/index.js';
import { type Line, running, runTock, TockProcess } from '../setup/proc.js';

let dir: string;
let dataDir: string;
let jobs: string;

const JOBS = 8;
const HANDLER_MS = 400;
const GRACE_MS = 5000;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tock-embedded-e2e-'));
  dataDir = path.join(dir, 'data');
  jobs = path.join(dir, 'jobs.yaml');
  const entries = Array.from(
    { length: JOBS },
    (_, i) =>
      `  - { job_id: slow-${i}, schedule: "@every 1s", handler: sleep, payload: { ms: ${HANDLER_MS} } }`,
  );
  await writeFile(jobs, `jobs:\n${entries.join('\n')}\n`);
});

// Whatever a failed test leaves running: the tock processes, then the database they left behind.
const started: ChildProcess[] = [];
afterAll(async () => {
  for (const child of [...started, ...running])
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  const pidFile = path.join(dataDir, 'pg', 'postmaster.pid');
  try {
    process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 'SIGQUIT');
  } catch {
    // Stopped cleanly: no pid file, or no such process.
  }
  await rm(dir, { recursive: true, force: true });
});

/** `tock` on the embedded database under `dataDir`, as a terminal runs it: leader of its own process group. */
function dev(extra: Record<string, string | undefined> = {}): TockProcess {
  const proc = new TockProcess(
    ['dev', '--port', '0', '--poll', '100ms', '--tick', '200ms', '--grace', `${GRACE_MS / 1000}s`],
    {
      DATABASE_URL: undefined,
      TOCK_SCHEMA: undefined,
      TOCK_DATA_DIR: dataDir,
      TOCK_LOG_FORMAT: 'json',
      TOCK_JOBS: jobs,
      ...extra,
    },
    undefined,
    { detached: true },
  );
  started.push(proc.child);
  return proc;
}

const run = (args: string[], env: Record<string, string | undefined>, cwd?: string) =>
  runTock(args, env, { cwd });

const msg = (m: string) => (l: Line) => l.msg === m;
const ids = (lines: Line[], m: string) => lines.filter(msg(m)).map((l) => String(l.run_id));

/** Ctrl-C as a terminal sends it: SIGINT to every process of the foreground group. */
function ctrlC(proc: TockProcess): void {
  process.kill(-proc.child.pid!, 'SIGINT');
}

/** Runs `fn` on the stopped data directory's database, started for the occasion in this process. */
async function onDatabase<T>(fn: (pool: ReturnType<typeof createPool>) => Promise<T>): Promise<T> {
  const db = await startEmbedded({ dataDir });
  const pool = createPool(db.url, { max: 1 });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
    await db.stop();
  }
}

describe('tock dev on the embedded database', () => {
  test('Ctrl-C to the process group drains within the grace; each finished run recorded once, none re-run', async () => {
    const first = dev();
    await first.waitFor((l) => String(l.msg).startsWith('tock listening on'), 'tock dev to start', 60_000);
    // Enough work done, then Ctrl-C while a handler is still running.
    await first.waitFor(() => first.lines.filter(msg('run succeeded')).length >= JOBS, 'a round of runs');
    const inFlight = await first.waitFor(
      (l) => l.msg === 'run started' && !ids(first.lines, 'run succeeded').includes(String(l.run_id)),
      'a run in flight',
    );
    const signalledAt = Date.now();
    ctrlC(first);
    const code = await first.exited;
    const tookMs = Date.now() - signalledAt;
    expect(code, first.stderr).toBe(0);
    expect(tookMs).toBeLessThan(GRACE_MS);
    expect(
      first.lines.filter((l) => Number(l.level) >= 50),
      'no errors logged',
    ).toEqual([]);
    expect(
      first.lines.some((l) => l.err !== undefined),
      'no stack traces',
    ).toBe(false);
    expect(ids(first.lines, 'run succeeded')).toContain(String(inFlight.run_id));
    expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid')), 'the database stopped').toBe(false);

    const succeeded = ids(first.lines, 'run succeeded');
    const recorded = await onDatabase(async (pool) => {
      // A run that succeeded at its first try has attempt 1 and no row in `attempts` (which keeps
      // the attempts that failed, were released or lost their lease).
      const { rows } = await pool.query<{ run_id: string; state: string; attempt: number; earlier: number }>(
        `SELECT r.run_id, r.state, r.attempt,
                (SELECT count(*)::int FROM attempts a WHERE a.run_id = r.run_id) AS earlier
           FROM runs r WHERE r.run_id = ANY($1::uuid[])`,
        [succeeded],
      );
      return rows;
    });
    expect(recorded).toHaveLength(succeeded.length);
    for (const r of recorded)
      expect(r, 'one succeeded attempt').toMatchObject({ state: 'succeeded', attempt: 1, earlier: 0 });

    // The next start runs new slots only.
    const second = dev();
    await second.waitFor(
      () => second.lines.filter(msg('run succeeded')).length >= JOBS,
      'runs after a restart',
    );
    ctrlC(second);
    expect(await second.exited, second.stderr).toBe(0);
    const again = ids(second.lines, 'run started').filter((id) => succeeded.includes(id));
    expect(again, 'runs that had succeeded ran again').toEqual([]);
  }, 120_000);

  test('a second dev, server or worker on the data directory is refused; a short command shares it and says so', async () => {
    const env = {
      DATABASE_URL: undefined,
      TOCK_SCHEMA: undefined,
      TOCK_DATA_DIR: dataDir,
      TOCK_LOG_FORMAT: 'json',
    };
    const handlers = path.join(dir, 'handlers.mjs');
    await writeFile(handlers, 'export default { noop: () => {} };\n');
    const first = dev();
    await first.waitFor((l) => String(l.msg).startsWith('tock listening on'), 'tock dev to start', 60_000);
    const inUse = `tock: data directory ${dataDir} in use by pid ${first.child.pid}`;
    for (const args of [
      ['dev', '--port', '0', '--jobs', jobs],
      ['server', '--port', '0', '--insecure'],
      ['worker', '--handlers', handlers],
    ]) {
      const second = await run(args, env);
      expect(second.code, `tock ${args[0]}`).toBe(1);
      expect(second.stderr.startsWith(`${inUse}:`), second.stderr).toBe(true);
    }

    const key = await run(['keys', 'create', '--tenant', 'acme', '--role', 'admin'], env);
    expect(key.code, key.stderr).toBe(0);
    expect(key.stderr).toContain(
      `key created in embedded PostgreSQL in ${dataDir} (run by tock process ${first.child.pid})`,
    );
    expect(key.stdout.trimEnd().split('\n').pop()).toMatch(/^tock_/);

    // The first keeps running on its database.
    const before = first.lines.filter(msg('run succeeded')).length;
    await first.waitFor(
      () => first.lines.filter(msg('run succeeded')).length > before,
      'dev to keep running jobs',
    );
    ctrlC(first);
    expect(await first.exited, first.stderr).toBe(0);
  }, 120_000);
});

describe('tock keys create --tenant', () => {
  test('without DATABASE_URL and without an existing data directory: refused, nothing created', async () => {
    const cwd = await mkdtemp(path.join(dir, 'empty-'));
    const env = { DATABASE_URL: undefined, TOCK_SCHEMA: undefined, TOCK_DATA_DIR: undefined };
    const out = await run(['keys', 'create', '--tenant', 'acme', '--role', 'admin'], env, cwd);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain(
      `tock: no database to write the key to: ${path.join(cwd, '.tock')} holds no embedded database`,
    );
    expect(out.stdout).toBe('');
    expect(existsSync(path.join(cwd, '.tock'))).toBe(false);

    const elsewhere = await run(['keys', 'create', '--tenant', 'acme', '--role', 'admin'], {
      ...env,
      TOCK_DATA_DIR: path.join(dir, 'nowhere'),
    });
    expect(elsewhere.code).toBe(1);
    expect(existsSync(path.join(dir, 'nowhere'))).toBe(false);
  });

  test('on a stopped data directory: starts its database, writes there and says so', async () => {
    const env = { DATABASE_URL: undefined, TOCK_SCHEMA: undefined, TOCK_DATA_DIR: dataDir };
    const out = await run(['keys', 'create', '--tenant', 'acme', '--role', 'reader'], env);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toContain(`key created in embedded PostgreSQL in ${dataDir}\n`);
  }, 60_000);
});
