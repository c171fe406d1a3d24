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
