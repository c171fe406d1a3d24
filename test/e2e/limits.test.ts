/**
 * Backlog control (issue 18) across processes: three `tock server` processes on one schema, and one
 * `tock worker --url` per server, so that claims, completions and failures of one tenant's runs go
 * through three processes at once. The jobs: one with `max_concurrency` 2, one with overlap
 * `queue`, three naming a limit `api` of concurrency 3, and one free job, all under the tenant's
 * own limit of concurrency 7 (above the other caps together, so the free job makes it bind).
 * Runs are triggered through the three servers' APIs; handlers sleep 200–500 ms and some first
 * attempts fail (retried after the backoff).
 *
 * The history is read afterwards from the database: each succeeded run's start and finish on its
 * row, each failed attempt's on its `attempts` row. Every interval lies inside the time its run
 * held its slots (the handler starts after the claim and ends before the completion gives them
 * back; the reported start is never earlier than the real one), and all processes share one clock,
 * so no instant may see more intervals of a gate than its cap. At the end every slot is given
 * back: `limits.in_use` is 0 everywhere and no claim records a slot.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TockClient } from '../../src/client/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { slotsHeld } from '../setup/factories.js';
import { TockProcess } from '../setup/proc.js';

const TENANT = 'acme';
/** Generous bound for a process to start, and for the whole backlog to drain. */
const SLOW = 20_000;

/**
 * Sleeps 200–500 ms, by the run's slot (its second modulo 4); the first attempt of a slot whose
 * second is a multiple of 4 then fails (retried after the backoff).
 */
const HANDLERS = `
export default {
  nap: async ({ scheduledFor, attempt }) => {
    const s = Math.floor(scheduledFor.getTime() / 1000);
    await new Promise((resolve) => setTimeout(resolve, 200 + (s % 4) * 100));
    if (s % 4 === 0 && attempt === 1) throw new Error('first attempt fails on purpose');
  },
};
`;

/** The gates of the test and their caps; `jobs`: whose runs hold a slot of the gate. */
const TENANT_CAP = 7;
const GATES = [
  { gate: 'job:capped', cap: 2, jobs: ['capped'] },
  { gate: 'job:queued', cap: 1, jobs: ['queued'] },
  { gate: 'api', cap: 3, jobs: ['api-a', 'api-b', 'api-c'] },
  {
    gate: `tenant:${TENANT}`,
    cap: TENANT_CAP,
    jobs: ['capped', 'queued', 'api-a', 'api-b', 'api-c', 'free'],
  },
] as const;

/** The jobs: body of `PUT /v1/jobs/{id}` beyond the handler, and how many runs each gets. */
const JOBS: { id: string; runs: number; body: Record<string, unknown> }[] = [
  { id: 'capped', runs: 10, body: { max_concurrency: 2 } },
  { id: 'queued', runs: 6, body: { overlap: 'queue' } },
  { id: 'api-a', runs: 6, body: { limits: ['api'] } },
  { id: 'api-b', runs: 6, body: { limits: ['api'] } },
  { id: 'api-c', runs: 6, body: { limits: ['api'] } },
  { id: 'free', runs: 20, body: {} },
];
const TOTAL_RUNS = JOBS.reduce((n, j) => n + j.runs, 0);

let db: TestDatabase;
let dir: string;
let handlersModule: string;
const children: TockProcess[] = [];

const running = (p: TockProcess) => p.child.exitCode === null && p.child.signalCode === null;

/** `tock` on the test's schema, with no server settings inherited from this process's environment. */
function tock(args: string[], env: Record<string, string> = {}): TockProcess {
  const p = new TockProcess(args, {
    DATABASE_URL: undefined,
    TOCK_URL: undefined,
    TOCK_KEY: undefined,
    TOCK_LOG_FORMAT: 'json',
    ...env,
  });
  children.push(p);
  return p;
}

async function startServer(): Promise<string> {
  const p = tock(['server', '--port', '0', '--lease', '10s'], {
    DATABASE_URL: db.url,
    TOCK_SCHEMA: db.schema,
  });
  const line = await p.waitFor(
    (l) => typeof l.msg === 'string' && l.msg.startsWith('tock listening on '),
    'a server to listen',
    SLOW,
  );
  return String(line.msg).slice('tock listening on '.length);
}

async function startWorker(url: string, key: string, name: string): Promise<void> {
  const p = tock([
    'worker',
    '--url',
    url,
    '--key',
    key,
    '--handlers',
    handlersModule,
    '--concurrency',
    '6',
    '--poll',
    '100ms',
    '--grace',
    '1s',
    '--worker-id',
    name,
  ]);
  await p.waitFor(
    (l) => l.msg === 'tock worker is running; SIGTERM or Ctrl-C drains it',
    `worker ${name} to start`,
    SLOW,
  );
}

/** Defines a limit of concurrency only with SQL (as test/store/backlog.test.ts does). */
async function defineLimit(key: string, cap: number): Promise<void> {
  const now = new Date();
  await db.pool.query(
    `INSERT INTO limits (tenant_id, key, rate, burst, tokens, refilled_at, max_concurrency, created_at, updated_at)
     VALUES ($1, $2, NULL, NULL, 0, $3, $4, $3, $3)`,
    [TENANT, key, now, cap],
  );
}

/** Test guard: polls until `check` holds, failing loudly (with the last value) after `timeoutMs`. */
async function eventually<T>(
  what: string,
  read: () => Promise<T>,
  check: (v: T) => boolean,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const p of children) {
      if (!running(p)) throw new Error(`tock ${p.child.spawnargs[2]} exited: ${p.stderr.slice(0, 2000)}`);
    }
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting until ${what}; last: ${JSON.stringify(value)}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Interval {
  job: string;
  run: string;
  worker: string;
  outcome: string;
  start: number;
  end: number;
}

/** Every attempt that ended: succeeded ones from `runs`, the others from `attempts`. */
async function history(): Promise<Interval[]> {
  const { rows } = await db.pool.query(
    `SELECT r.job_id, r.run_id, r.lease_owner AS worker, 'succeeded' AS outcome, r.started_at, r.finished_at
     FROM runs r WHERE r.tenant_id = $1 AND r.state = 'succeeded'
     UNION ALL
     SELECT r.job_id, r.run_id, a.worker_id, a.outcome, a.started_at, a.finished_at
     FROM attempts a JOIN runs r ON r.run_id = a.run_id WHERE r.tenant_id = $1`,
    [TENANT],
  );
  return rows.map((r) => ({
    job: r.job_id as string,
    run: r.run_id as string,
    worker: r.worker as string,
    outcome: r.outcome as string,
    start: (r.started_at as Date).getTime(),
    end: (r.finished_at as Date).getTime(),
  }));
}

/**
 * The most intervals that hold at one instant, and when. An interval ending at the instant another
 * starts does not overlap it (ends are counted first).
 */
function peak(intervals: readonly Interval[]): { peak: number; at: string | null } {
  const events = intervals.flatMap((i) => [
    { t: i.start, d: 1 },
    { t: i.end, d: -1 },
  ]);
  events.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let best = { peak: 0, at: null as string | null };
  for (const e of events) {
    now += e.d;
    if (now > best.peak) best = { peak: now, at: new Date(e.t).toISOString() };
  }
  return best;
}

beforeAll(async () => {
  db = await setupDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'tock-limits-e2e-'));
  handlersModule = path.join(dir, 'handlers.mjs');
  await writeFile(handlersModule, HANDLERS);
});

afterAll(async () => {
  // Every child goes, whatever happened, before the schema is dropped under it.
  for (const p of children) if (running(p)) p.child.kill('SIGKILL');
  await Promise.all(children.map((p) => p.exited));
  await db?.teardown();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('backlog control across processes', () => {
  test('limits and caps hold across three `tock server` processes and HTTP workers', async (ctx) => {
    ctx.onTestFailed(() => {
      for (const p of children) {
        const notable = p.lines.filter((l) => Number(l.level) >= 40).slice(-10);
        console.log(
          `tock ${p.child.spawnargs[2]} pid ${p.child.pid}: ${JSON.stringify(notable)}\n${p.stderr.slice(0, 2000)}`,
        );
      }
    });
    const now = Date.now();
    const admin = await db.store.createApiKey({ tenantId: TENANT, role: 'admin', now });
    const work = await db.store.createApiKey({ tenantId: TENANT, role: 'worker', now });
    await defineLimit('api', 3);
    await defineLimit(`tenant:${TENANT}`, TENANT_CAP);

    // Each worker starts as soon as its server listens (a loaded machine starts processes slowly).
    const t0 = Date.now();
    const urls = await Promise.all(
      ['w1', 'w2', 'w3'].map(async (name) => {
        const url = await startServer();
        await startWorker(url, work.secret, name);
        return url;
      }),
    );
    const clients = urls.map((url) => new TockClient({ url, key: admin.secret }));
    for (const j of JOBS) {
      await clients[0]!.putJob(j.id, {
        schedule: '@yearly',
        handler: 'nap',
        max_attempts: 3,
        backoff_base_seconds: 1.1,
        backoff_cap_seconds: 1,
        ...j.body,
      });
    }
    const started = Date.now();

    // Every run through one of the three servers in turn, each at its own past slot.
    const base = Math.floor(Date.now() / 1000) * 1000 - 600_000;
    let k = 0;
    const triggers: Promise<unknown>[] = [];
    for (const j of JOBS) {
      for (let i = 0; i < j.runs; i++, k++) {
        const client = clients[k % clients.length]!;
        triggers.push(client.triggerRun(j.id, { scheduledFor: new Date(base + i * 1000) }));
      }
    }
    await Promise.all(triggers);

    const done = await eventually(
      'every run has succeeded',
      async () =>
        (
          await db.pool.query(
            `SELECT count(*) FILTER (WHERE state = 'succeeded')::int AS succeeded, count(*)::int AS runs
             FROM runs WHERE tenant_id = $1`,
            [TENANT],
          )
        ).rows[0] as { succeeded: number; runs: number },
      (v) => v.succeeded === TOTAL_RUNS,
      SLOW,
    );
    expect(done).toEqual({ succeeded: TOTAL_RUNS, runs: TOTAL_RUNS });

    const h = await history();
    // Each run once succeeded; the failed first attempts are in the history too.
    const failedFirst = JOBS.reduce(
      (n, j) =>
        n + Array.from({ length: j.runs }, (_, i) => (base / 1000 + i) % 4 === 0).filter(Boolean).length,
      0,
    );
    expect(h.filter((i) => i.outcome === 'succeeded')).toHaveLength(TOTAL_RUNS);
    expect(h.filter((i) => i.outcome === 'failed')).toHaveLength(failedFirst);
    expect(h.filter((i) => !['succeeded', 'failed'].includes(i.outcome))).toEqual([]);
    expect(h.every((i) => Number.isFinite(i.start) && i.end >= i.start)).toBe(true);
    // The three workers, each behind its own server, all took part.
    expect(new Set(h.map((i) => i.worker))).toEqual(new Set(['w1', 'w2', 'w3']));

    // No instant saw more of a gate's runs than its cap.
    const peaks = GATES.map((g) => ({
      gate: g.gate,
      cap: g.cap,
      ...peak(h.filter((i) => (g.jobs as readonly string[]).includes(i.job))),
    }));
    console.log(
      `limits e2e: ${h.length} attempts; processes up in ${started - t0} ms, drained in ${Date.now() - started} ms; ` +
        `peaks ${peaks.map((p) => `${p.gate} ${p.peak}/${p.cap}`).join(', ')}`,
    );
    expect(peaks.filter((p) => p.peak > p.cap)).toEqual([]);
    // And the gates were pressed: runs of each gate of more than one slot ran side by side, and
    // the tenant ran more at once than any one of its other gates allows (the workers' 18 slots
    // were never the bottleneck). Intervals are the handlers' own, a little shorter than the
    // slots' holds, so a cap itself is usually but not always seen.
    for (const p of peaks) if (p.cap > 1) expect(p.peak, p.gate).toBeGreaterThan(1);
    expect(peaks.find((p) => p.gate === `tenant:${TENANT}`)!.peak).toBeGreaterThan(3);

    // Every slot given back, by completions and failures through three servers.
    const { rows: limits } = await db.pool.query(
      'SELECT key, in_use FROM limit_states WHERE tenant_id = $1 ORDER BY key',
      [TENANT],
    );
    expect(limits).toEqual([...GATES.map((g) => g.gate)].sort().map((key) => ({ key, in_use: 0 })));
    expect(await slotsHeld(db.pool)).toBe(0);
  }, 60_000);
});
