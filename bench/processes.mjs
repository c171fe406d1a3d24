// Child processes of the real `tock` binary for a scenario: each started in a process group of
// its own, its output kept (the last 64 KiB of each stream) for the error that names it, and every
// one stopped at the end: SIGTERM to the group, SIGKILL after a bounded wait. Should the harness
// itself be interrupted (SIGINT, SIGTERM) or exit while some still run, they are killed with it.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The built binary of this tree. */
export const TOCK_BIN = path.join(here, '..', 'bin', 'tock.js');
const TAIL_BYTES = 64 * 1024;

/** The environment without the variables that would configure a child behind our back. */
function cleanEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('TOCK_') || k === 'DATABASE_URL') continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

/** Runs `node bin/tock.js …args` to its end (at most `timeoutMs`); returns its stdout's last line, or throws with its stderr. */
export function runTockSync(args, env = {}, timeoutMs = 60_000) {
  const r = spawnSync(process.execPath, [TOCK_BIN, ...args], {
    env: cleanEnv(env),
    encoding: 'utf8',
    timeout: timeoutMs,
    killSignal: 'SIGKILL',
  });
  if (r.status !== 0) throw new Error(`tock ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr}`);
  return r.stdout.trim().split('\n').at(-1);
}

/** A free TCP port on 127.0.0.1 (free when asked; a child given it binds it soon after). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** CPU time (user + system, ms) process `pid` has used so far; null when it cannot be read. */
export function processCpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/** The `tock` processes of one scenario. `close()` (in a `finally`) stops those still running. */
export class TockProcesses {
  constructor() {
    this.running = new Set();
    this.killAll = () => {
      for (const child of this.running) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    };
    this.onSignal = (signal) => {
      this.killAll();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    };
    process.on('exit', this.killAll);
    process.once('SIGINT', this.onSignal);
    process.once('SIGTERM', this.onSignal);
  }

  /**
   * Starts `node bin/tock.js …args` with only `env` of Tock's variables (none inherited).
   * `name` names it in errors. The child has `out` and `err` (output tails) and `exited` (a promise).
   */
  start(name, args, env = {}) {
    return this.startScript(name, TOCK_BIN, args, env);
  }

  /** As `start`, for another Node script (a bench child such as bench/soak/worker.mjs). */
  startScript(name, script, args, env = {}) {
    const child = spawn(process.execPath, [script, ...args], {
      env: cleanEnv(env),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.label = name;
    child.out = '';
    child.err = '';
    child.head = ''; // the first TAIL_BYTES of both streams: where a failure starts
    const keep = (key) => (chunk) => {
      if (child.head.length < TAIL_BYTES) child.head += chunk;
      child[key] += chunk;
      if (child[key].length > TAIL_BYTES) child[key] = child[key].slice(-TAIL_BYTES);
    };
    child.stdout.on('data', keep('out'));
    child.stderr.on('data', keep('err'));
    child.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.running.delete(child);
        resolve({ code, signal });
      });
      child.once('error', (err) => {
        this.running.delete(child);
        child.err += String(err);
        resolve({ code: null, signal: null, error: err });
      });
    });
    this.running.add(child);
    return child;
  }

  /** Throws, with its output (its first error line, then its last lines), if `child` has exited. */
  check(child) {
    if (child.exitCode === null && child.signalCode === null && this.running.has(child)) return;
    const log = `${child.head}\n${child.out}\n${child.err}`;
    const firstError = log.split('\n').find((l) => /"level":(40|50|60)|^tock: /.test(l));
    throw new Error(
      `${child.label} exited (${child.exitCode ?? child.signalCode})` +
        `${firstError ? `; first warning or error: ${firstError.slice(0, 2000)}` : ''}; last output: ${child.err.trim().slice(-1500) || child.out.trim().slice(-1500)}`,
    );
  }

  /** Waits until `pattern` appears on `child`'s stdout; returns its match. Throws on exit or after `timeoutMs`. */
  async waitForOutput(child, pattern, timeoutMs = 30_000) {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const m = pattern.exec(child.out);
      if (m) return m;
      this.check(child);
      if (performance.now() > deadline)
        throw new Error(
          `${child.label}: no ${pattern} after ${timeoutMs / 1000} s: ${child.err.slice(-2000)}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** SIGTERM to `child`'s group, SIGKILL after `graceMs`; resolves when it has exited (at most ~2 s more). */
  async stop(child, graceMs = 10_000) {
    if (!this.running.has(child)) return;
    const signal = (s) => {
      try {
        process.kill(-child.pid, s);
      } catch {
        // already gone
      }
    };
    signal('SIGTERM');
    const timer = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());
    if ((await Promise.race([child.exited, timer(graceMs).then(() => 'late')])) !== 'late') return;
    signal('SIGKILL');
    await Promise.race([child.exited, timer(2000)]);
  }

  /** Stops every child still running, then forgets the signal handlers. */
  async close() {
    try {
      await Promise.all([...this.running].map((c) => this.stop(c)));
    } finally {
      this.killAll();
      process.off('exit', this.killAll);
      process.off('SIGINT', this.onSignal);
      process.off('SIGTERM', this.onSignal);
    }
  }
}
