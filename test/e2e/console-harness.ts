/**
 * What the console's browser tests share (test/e2e/console*.test.ts): a database schema, `tock`
 * children on it (a `tock server` with keys, a `tock worker --url` with handlers written to a file),
 * keys made on the database, calls of the HTTP API with a key, a headless Chromium, and a tab signed
 * in with a key. One `ConsoleHarness` per file: `start()` in `beforeAll`, `close()` in `afterAll`
 * (it kills the children, closes the browser and drops the schema).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { Page } from 'playwright-core';
import type { Role } from '../../src/core/index.js';
import { createKeyOnDatabase } from '../../src/runtime/keys.js';
import { type Browser, launchBrowser } from '../setup/browser.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { TockProcess } from '../setup/proc.js';

/** Bound for a process to start, a run to finish, the console to show a change. */
export const SLOW = 25_000;

/**
 * The page's window, in functions run in the browser (`page.evaluate`, which sends the function's
 * text, so it may use no variable of the test's file): the tests' tsconfig has no DOM library, so
 * these few members are declared here.
 */
export interface TabWindow {
  sessionStorage: { getItem(key: string): string | null };
  localStorage: { length: number };
  location: { href: string };
}

/** A call's answer: its status and JSON. */
export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: a JSON answer the tests read field by field
  json: any;
  text: string;
}

/** Polls until `check` holds, failing loudly with the last value after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  read: () => Promise<T>,
  check: (v: T) => boolean,
  timeoutMs = SLOW,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (check(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export class ConsoleHarness {
  db!: TestDatabase;
  dir = '';
  browser!: Browser;
  /** The first server's address (`server()`), which `call` and `signIn` use. */
  url = '';
  private readonly children: TockProcess[] = [];

  /** A schema of its own, a temporary folder for handler files, and the browser. */
  async start(): Promise<void> {
    this.db = await setupDatabase();
    this.dir = await mkdtemp(path.join(tmpdir(), 'tock-console-e2e-'));
    this.browser = await launchBrowser();
  }

  async close(): Promise<void> {
    await this.browser?.close();
    for (const p of this.children) p.child.kill('SIGKILL');
    await Promise.all(this.children.map((p) => p.exited));
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
    await this.db?.teardown();
  }

  /** A `tock` child with JSON logs, none of the caller's database, API URL or key. */
  tock(args: string[], env: Record<string, string> = {}): TockProcess {
    const p = new TockProcess(args, {
      DATABASE_URL: undefined,
      TOCK_URL: undefined,
      TOCK_KEY: undefined,
      TOCK_LOG_FORMAT: 'json',
      ...env,
    });
    this.children.push(p);
    return p;
  }

  /**
   * A `tock server` on the harness's schema with `args` (`--port 0` is added), once it listens:
   * the process and its address. The first one's address is `url`.
   */
  async server(
    args: string[],
    what = 'the server to listen',
  ): Promise<{ process: TockProcess; url: string }> {
    const p = this.tock(['server', '--port', '0', ...args], {
      DATABASE_URL: this.db.url,
      TOCK_SCHEMA: this.db.schema,
    });
    const line = await p.waitFor(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('tock listening on '),
      what,
      SLOW,
    );
    const url = String(line.msg).slice('tock listening on '.length);
    if (!this.url) this.url = url;
    return { process: p, url };
  }

  /**
   * A `tock worker --url` child of `url` with `key`, running the handlers of the module text
   * `handlers` (written to a file), once it runs.
   */
  async worker(key: string, handlers: string, workerId: string): Promise<TockProcess> {
    const file = path.join(this.dir, `${workerId}.mjs`);
    await writeFile(file, handlers);
    const worker = this.tock([
      'worker',
      '--url',
      this.url,
      '--key',
      key,
      '--handlers',
      file,
      '--poll',
      '100ms',
      '--grace',
      '1s',
      '--worker-id',
      workerId,
    ]);
    await worker.waitFor(
      (l) => l.msg === 'tock worker is running; SIGTERM or Ctrl-C drains it',
      'the worker',
      SLOW,
    );
    return worker;
  }

  async makeKey(tenantId: string, role: Role): Promise<string> {
    const made = await createKeyOnDatabase({
      tenantId,
      role,
      name: `console-${tenantId}-${role}`,
      databaseUrl: this.db.url,
      schema: this.db.schema,
      logger: pino({ level: 'silent' }),
    });
    return made.secret;
  }

  /** A call of the HTTP API (`url`) with `key`. */
  async call(key: string, method: string, p: string, body?: unknown): Promise<Answer> {
    const res = await fetch(`${this.url}${p}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null; // /metrics answers text
    }
    return { status: res.status, json, text };
  }

  /** A new tab signed in with `key`, on the jobs page. */
  async signIn(key: string): Promise<Page> {
    const page = await this.browser.tab();
    await page.goto(this.url);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Jobs' }).waitFor({ timeout: SLOW });
    return page;
  }
}
