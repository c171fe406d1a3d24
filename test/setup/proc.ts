/**
 * The real `tock` binary as a long-running child process whose JSON log lines can be awaited.
 * The one plain line a serving process prints (`tock listening on …`) arrives as `{ msg }`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

export const BIN = path.resolve(import.meta.dirname, '../../bin/tock.js');

export type Line = Record<string, unknown>;

export class TockProcess {
  readonly child: ChildProcess;
  readonly lines: Line[] = [];
  readonly exited: Promise<number | null>;
  stdout = '';
  stderr = '';
  private waiters: { test: (l: Line) => boolean; resolve: (l: Line) => void }[] = [];

  /**
   * `env` is laid over this process's environment; an `undefined` value removes a variable.
   * `detached` makes the child a process-group leader, as a shell makes a command it runs in a
   * terminal: `process.kill(-pid, 'SIGINT')` then signals the whole group, as Ctrl-C does.
   */
  constructor(
    args: string[],
    env: Record<string, string | undefined> = {},
    cwd?: string,
    options: { detached?: boolean } = {},
  ) {
    this.child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, ...env },
      detached: options.detached ?? false,
    });
    let buffer = '';
    this.child.stdout!.on('data', (d) => {
      this.stdout += d;
      buffer += d;
      const parts = buffer.split('\n');
      buffer = parts.pop() ?? '';
      for (const part of parts) {
        if (!part.trim()) continue;
        const line = (part.startsWith('tock listening on ') ? { msg: part } : JSON.parse(part)) as Line;
        this.lines.push(line);
        const matched = this.waiters.filter((w) => w.test(line));
        this.waiters = this.waiters.filter((w) => !matched.includes(w));
        for (const w of matched) w.resolve(line);
      }
    });
    this.child.stderr!.on('data', (d) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.child.on('close', resolve));
  }

  /** The first log line passing `test` (already seen or to come); rejects loudly after `timeoutMs`. */
  waitFor(test: (l: Line) => boolean, what: string, timeoutMs = 20_000): Promise<Line> {
    const seen = this.lines.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `timed out waiting for ${what}; stderr: ${this.stderr}; log: ${JSON.stringify(this.lines.slice(-5))}`,
            ),
          ),
        timeoutMs,
      );
      this.waiters.push({
        test,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
    });
  }
}

/** What a finished `tock` command printed, and its exit code (null: killed). */
export interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Children `runTock` started and has not seen exit: a test file's `afterAll` may kill them. */
export const running = new Set<ChildProcess>();

/**
 * Runs `tock <args>` to its end. `env` is laid over this process's environment. A command still
 * running after `timeoutMs` (default 60 s) is killed and its result says so (code null), so a test
 * of a command that hangs fails instead of leaving the process behind.
 */
export function runTock(
  args: string[],
  env: Record<string, string | undefined> = {},
  o: { cwd?: string; timeoutMs?: number } = {},
): Promise<Exited> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: o.cwd, env: { ...process.env, ...env } });
    running.add(child);
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}
