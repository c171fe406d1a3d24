/**
 * What the tests of the example workers in other languages (examples/workers/) share: a real
 * `tock server` child with API keys on the test's schema, restartable on the same port; keys made
 * on the database as `tock keys create --tenant` makes them; a small HTTP client for the operator's
 * side (jobs, triggers, runs, keys); and the worker under test as a child process whose output
 * lines can be awaited. Every wait is bounded and fails loudly.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { Role } from '../../src/core/index.js';
import { createKeyOnDatabase } from '../../src/runtime/keys.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { TockProcess } from '../setup/proc.js';

export const EXAMPLES = path.resolve(import.meta.dirname, '../../examples/workers');
/** A generous bound for anything that involves a process starting. */
export const SLOW = 25_000;

/**
 * `tock server` with keys (no `--insecure`: it refuses to start before a key exists, so make them
 * first) on the test's schema; `restart` keeps its port.
 */
export class Server {
  proc!: TockProcess;
  url = '';
  private constructor(
    private readonly db: TestDatabase,
    private readonly lease: string,
  ) {}

  static async start(db: TestDatabase, lease = '6s'): Promise<Server> {
    const s = new Server(db, lease);
    await s.listen('0');
    return s;
  }

  get port(): string {
    return new URL(this.url).port;
  }

  private async listen(port: string): Promise<void> {
    this.proc = new TockProcess(['server', '--port', port, '--lease', this.lease, '--tick', '200ms'], {
      DATABASE_URL: this.db.url,
      TOCK_SCHEMA: this.db.schema,
      TOCK_LOG_FORMAT: 'json',
      TOCK_URL: undefined,
      TOCK_KEY: undefined,
    });
    const proc = this.proc;
    const line = await Promise.race([
      proc.waitFor(
        (l) => typeof l.msg === 'string' && l.msg.startsWith('tock listening on '),
        'the server to listen',
        SLOW,
      ),
      proc.exited.then((code) => {
        throw new Error(`tock server exited (${code}) before listening; stderr: ${proc.stderr}`);
      }),
    ]);
    this.url = String(line.msg).slice('tock listening on '.length);
  }

  /** Kills the server at once (no drain: connections reset), resolves once it is gone. */
  async kill(): Promise<void> {
    this.proc.child.kill('SIGKILL');
    await this.proc.exited;
  }

  /** A new server process on the same port. */
  async restart(): Promise<void> {
    await this.listen(this.port);
  }

  async stop(): Promise<void> {
    if (this.proc.child.exitCode !== null || this.proc.child.signalCode !== null) return;
    this.proc.child.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.child.kill('SIGKILL'), 10_000);
    await this.proc.exited;
    clearTimeout(timer);
  }
}

/** A key of `role` in tenant `default`, written to the database; its secret and id. */
export async function createKey(db: TestDatabase, role: Role): Promise<{ secret: string; keyId: string }> {
  const made = await createKeyOnDatabase({
    tenantId: 'default',
    role,
    name: `examples-${role}`,
    databaseUrl: db.url,
    schema: db.schema,
    logger: pino({ level: 'silent' }),
  });
  return { secret: made.secret, keyId: made.key.keyId };
}

export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: a JSON answer the tests read field by field
  body: any;
}

/** The operator's side of the API, with an admin key. */
export class Operator {
  constructor(
    private readonly server: Server,
    private readonly key: string,
  ) {}

  async call(method: string, path: string, body?: unknown): Promise<Answer> {
    const res = await fetch(`${this.server.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  async ok(method: string, path: string, body?: unknown): Promise<Answer['body']> {
    const a = await this.call(method, path, body);
    if (a.status >= 300) throw new Error(`${method} ${path}: ${a.status} ${JSON.stringify(a.body)}`);
    return a.body;
  }

  /** Puts a job that runs only when triggered (its schedule is a year away), then triggers a run. */
  async trigger(jobId: string, handler: string, payload: unknown = {}, job: object = {}): Promise<string> {
    await this.ok('PUT', `/v1/jobs/${jobId}`, { schedule: '@yearly', handler, payload, ...job });
    const run = await this.ok('POST', `/v1/jobs/${jobId}/runs`, {});
    return run.run_id as string;
  }

  /** Polls the run until `test` holds, failing loudly after `timeoutMs`. */
  async runUntil(
    runId: string,
    test: (run: Answer['body']) => boolean,
    what: string,
    timeoutMs = 20_000,
  ): Promise<Answer['body']> {
    const deadline = Date.now() + timeoutMs;
    let run: Answer['body'];
    for (;;) {
      run = await this.ok('GET', `/v1/runs/${runId}`);
      if (test(run)) return run;
      if (Date.now() > deadline)
        throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}; run: ${JSON.stringify(run)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The run once it is in `state`. */
  runIn(runId: string, state: string, timeoutMs?: number): Promise<Answer['body']> {
    return this.runUntil(runId, (r) => r.state === state, `run ${runId} is ${state}`, timeoutMs);
  }
}

/** A worker under test: a child process whose stdout and stderr lines are kept and awaitable. */
export class WorkerProcess {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<number | null>;
  private waiters: { test: (l: string) => boolean; resolve: () => void }[] = [];

  constructor(command: string, args: string[], env: Record<string, string | undefined>) {
    // A process group of its own: cleanup kills what it started too (a shell worker's curl).
    this.child = spawn(command, args, {
      env: { ...process.env, TOCK_URL: undefined, TOCK_KEY: undefined, ...env },
      detached: true,
    });
    const take = (stream: NodeJS.ReadableStream) => {
      let buffer = '';
      stream.on('data', (d) => {
        buffer += d;
        const parts = buffer.split('\n');
        buffer = parts.pop() ?? '';
        for (const line of parts) {
          this.lines.push(line);
          const matched = this.waiters.filter((w) => w.test(line));
          this.waiters = this.waiters.filter((w) => !matched.includes(w));
          for (const w of matched) w.resolve();
        }
      });
    };
    take(this.child.stdout!);
    take(this.child.stderr!);
    this.exited = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
  }

  get output(): string {
    return this.lines.join('\n');
  }

  /** Resolves once a line containing `text` was printed (or already was). */
  waitFor(text: string, timeoutMs = SLOW): Promise<void> {
    const test = (l: string) => l.includes(text);
    if (this.lines.some(test)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`timed out waiting for a line with ${JSON.stringify(text)}; output:\n${this.output}`),
          ),
        timeoutMs,
      );
      this.waiters.push({
        test,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  /** The exit code, failing loudly if the process has not exited within `timeoutMs`. */
  async exitCode(timeoutMs: number): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the worker did not exit within ${timeoutMs} ms; output:\n${this.output}`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Tests' cleanup: SIGTERM (a drain, so that nothing it claimed is left under a lease), then after
   * `graceMs` SIGKILL to its process group (what it started too, such as a shell worker's curl).
   */
  async kill(graceMs = 5_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      await this.exitCode(graceMs).catch(() => {});
    }
    const pid = this.child.pid;
    if (pid !== undefined) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
    if (this.child.exitCode === null && this.child.signalCode === null) await this.exited;
  }
}

/** What a test file of an example worker shares: set by `exampleSetup`'s hooks. */
export interface ExampleSetup {
  db: TestDatabase;
  server: Server;
  /** An admin's requests to the server. */
  op: Operator;
  /** A key of role `worker`. */
  workerKey: string;
  /** The workers a test starts: killed after it (a failed test prints what they said). */
  workers: WorkerProcess[];
}

/**
 * Registers the hooks of an example worker's test file: a database, a `tock server` on it, an admin
 * and a worker key before all tests; the test's workers killed after each; the rest after all.
 */
export function exampleSetup(): ExampleSetup {
  const s = { workers: [] as WorkerProcess[] } as ExampleSetup;
  beforeAll(async () => {
    s.db = await setupDatabase();
    const admin = (await createKey(s.db, 'admin')).secret;
    s.workerKey = (await createKey(s.db, 'worker')).secret;
    s.server = await Server.start(s.db);
    s.op = new Operator(s.server, admin);
  });
  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail') for (const w of s.workers) console.log(w.output);
    await Promise.all(s.workers.splice(0).map((w) => w.kill()));
  });
  afterAll(async () => {
    await s.server?.stop();
    await s.db?.teardown();
  });
  return s;
}
