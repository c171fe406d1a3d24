/**
 * Crash and fault tests with real processes: `tock worker` and `tock server` children of the built
 * binary on the run's PostgreSQL, each test in a fresh schema. Workers are killed (`SIGKILL`),
 * frozen (`SIGSTOP` past their lease, then `SIGCONT`) or drained (`SIGTERM` with runs in flight).
 *
 * The handlers record every execution in a history file (one JSON line per event, appended by
 * whichever worker ran it), and each returns an output naming its worker, so the stored attempts
 * say who finished. The tests check invariants on that history and on the stored attempts
 * afterwards: no run lost, every run succeeded once, no result accepted under a stale lease, and
 * no run executed twice while its lease was live.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { Attempt } from '../../src/store/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';
import { type Line, TockProcess } from '../setup/proc.js';

const TENANT = 'default';
/** The longest a holding handler waits for its signal before it returns on its own. */
const HOLD_CAP_MS = 60_000;
/** A generous bound for anything that involves a process starting or a lease expiring. */
const SLOW = 25_000;

/**
 * One handler, `work`. It appends `started` when called and `aborted` (with the reason) when its
 * signal fires; then `finished` when it returns with its signal intact, `late` when it returns
 * after the abort. On a worker started with `TOCK_TEST_HOLD=1` it holds: until its signal is
 * aborted, or, when the payload has `stubbornMs`, for that long whatever the signal says. Elsewhere
 * it sleeps `quickMs` (default 0) and returns.
 */
const HANDLERS = `
import { appendFileSync } from 'node:fs';

const worker = process.env.TOCK_TEST_NAME;
const history = process.env.TOCK_TEST_LOG;
const hold = process.env.TOCK_TEST_HOLD === '1';

function record(ctx, event, extra = {}) {
  const line = { worker, run: ctx.runId, attempt: ctx.attempt, event, at: Date.now(), ...extra };
  appendFileSync(history, JSON.stringify(line) + '\\n');
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

export default {
  work: async (ctx) => {
    record(ctx, 'started');
    ctx.signal.addEventListener(
      'abort',
      () => record(ctx, 'aborted', { reason: String(ctx.signal.reason?.message ?? ctx.signal.reason) }),
      { once: true },
    );
    const { stubbornMs = 0, quickMs = 0 } = ctx.payload ?? {};
    if (hold && stubbornMs > 0) await sleep(stubbornMs);
    else if (hold) await sleep(${HOLD_CAP_MS}, ctx.signal);
    else if (quickMs > 0) await sleep(quickMs);
    record(ctx, ctx.signal.aborted ? 'late' : 'finished');
    return { output: 'done by ' + worker };
  },
};
`;

interface Execution {
  worker: string;
  run: string;
  attempt: number;
  event: 'started' | 'aborted' | 'finished' | 'late';
  at: number;
  reason?: string;
}

let db: TestDatabase;
let dir: string;
let handlersModule: string;
let historyFile: string;
const children: TockProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tock-crash-e2e-'));
  handlersModule = path.join(dir, 'handlers.mjs');
  await writeFile(handlersModule, HANDLERS);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

beforeEach(async (ctx) => {
  db = await setupDatabase();
  historyFile = path.join(dir, `${ctx.task.id}.jsonl`);
  await writeFile(historyFile, '');
});

afterEach(async () => {
  // Nothing outlives its test: a stopped child is continued first so that it can die.
  const left = children.splice(0);
  for (const p of left) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
    p.child.kill('SIGCONT');
    p.child.kill('SIGKILL');
  }
  await Promise.all(left.map((p) => p.exited));
  await db.teardown();
});

/** `tock` with no server or database settings inherited from this process's environment. */
class Proc extends TockProcess {
  constructor(args: string[], env: Record<string, string | undefined> = {}) {
    super(args, { DATABASE_URL: undefined, TOCK_URL: undefined, TOCK_KEY: undefined, ...env });
    children.push(this);
  }
}

const about = (msg: string, runId: string) => (l: Line) => l.msg === msg && l.run_id === runId;
const aboutRun = (prefix: string, runId: string) => (l: Line) =>
  typeof l.msg === 'string' && l.msg.startsWith(prefix) && l.run_id === runId;

const onDatabase = () => ({ DATABASE_URL: db.url, TOCK_SCHEMA: db.schema });

/** `tock server` on the test's schema (API, tick and the reaper, every second); resolves to its URL. */
async function startServer(): Promise<{ proc: Proc; url: string }> {
  const proc = new Proc(['server', '--insecure', '--port', '0', '--lease', '2s'], {
    ...onDatabase(),
    TOCK_LOG_FORMAT: 'json',
  });
  const line = await proc.waitFor(
    (l) => typeof l.msg === 'string' && l.msg.startsWith('tock listening on '),
    'the server to listen',
    SLOW,
  );
  return { proc, url: String(line.msg).slice('tock listening on '.length) };
}

interface WorkerOptions {
  /** Hold every run (see HANDLERS). */
  hold?: boolean;
  lease?: string;
  grace?: string;
  concurrency?: number;
  /** Work through this server instead of the database. */
  url?: string;
}

/** `tock worker --worker-id <name>`, running the handlers module; resolves once it is running. */
async function startWorker(name: string, o: WorkerOptions = {}): Promise<Proc> {
  const args = ['worker', '--handlers', handlersModule, '--poll', '100ms', '--worker-id', name];
  args.push('--grace', o.grace ?? '1s', '--concurrency', String(o.concurrency ?? 10));
  if (o.url) args.push('--url', o.url);
  else args.push('--lease', o.lease ?? '30s');
  const proc = new Proc(args, {
    ...(o.url ? {} : onDatabase()),
    TOCK_LOG_FORMAT: 'json',
    TOCK_TEST_NAME: name,
    TOCK_TEST_LOG: historyFile,
    TOCK_TEST_HOLD: o.hold ? '1' : undefined,
  });
  await proc.waitFor(
    (l) => l.msg === 'tock worker is running; SIGTERM or Ctrl-C drains it',
    `worker ${name} to start`,
    SLOW,
  );
  return proc;
}

/**
 * A job that never fires on its own (the tick leaves it alone) and retries soon after a lost
 * lease (backoff at most 1 s), then `count` runs of it, each for its own slot.
 */
async function triggerRuns(jobId: string, count: number, payload: unknown = {}): Promise<string[]> {
  await upsertJob(db.store, {
    tenantId: TENANT,
    job: {
      jobId,
      schedule: '@at 2099-01-01T00:00:00Z',
      handler: 'work',
      payload,
      maxAttempts: 3,
      backoffBaseSeconds: 1.1,
      backoffCapSeconds: 1,
    },
    now: db.clock.nowMs(),
  });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const run = await db.store.triggerRun({
      tenantId: TENANT,
      jobId,
      scheduledFor: T0 + i * 1000,
      now: db.clock.nowMs(),
    });
    ids.push(run.runId);
  }
  return ids;
}

function history(): Execution[] {
  return readFileSync(historyFile, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Execution);
}

/** Test guard: polls until `check` holds, failing loudly after `timeoutMs`. */
async function eventually(what: string, check: () => boolean, timeoutMs = SLOW): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The stored attempts of a run, as the facts the tests compare. */
async function attemptsOf(runId: string) {
  const run = await db.store.getRun({ tenantId: TENANT, runId });
  return {
    state: run.state,
    attempt: run.attempt,
    attempts: run.attempts.map((a: Attempt) => ({
      attempt: a.attempt,
      workerId: a.workerId,
      outcome: a.outcome,
      error: a.error,
      output: a.output,
    })),
  };
}

describe('tock worker under crashes', () => {
  test('a worker killed mid-run: the reaper requeues the run after its lease and another worker completes it', async () => {
    const [runId] = (await triggerRuns('killed', 1)) as [string];
    const [{ proc: server }, a] = await Promise.all([
      startServer(),
      startWorker('worker-a', { hold: true, lease: '1500ms' }),
    ]);
    await a.waitFor(about('run started', runId), 'worker-a to start the run', SLOW);
    await eventually('worker-a has called the handler', () => history().some((e) => e.event === 'started'));
    a.child.kill('SIGKILL');
    await a.exited;
    expect(a.child.signalCode).toBe('SIGKILL');
    // worker-b starts only now, so the run can reach it only through the reaper.
    const b = await startWorker('worker-b', { lease: '1500ms' });

    await server.waitFor(about('lease expired; run requeued', runId), 'the reaper to requeue the run', SLOW);
    const started = await b.waitFor(about('run started', runId), 'worker-b to claim the run', SLOW);
    expect(started.attempt).toBe(2);
    await b.waitFor(about('run succeeded', runId), 'worker-b to complete the run', SLOW);

    expect(await attemptsOf(runId)).toEqual({
      state: 'succeeded',
      attempt: 2,
      attempts: [
        {
          attempt: 1,
          workerId: 'worker-a',
          outcome: 'lease_expired',
          error: 'lease expired',
          output: null,
        },
        { attempt: 2, workerId: 'worker-b', outcome: 'succeeded', error: null, output: 'done by worker-b' },
      ],
    });
    // worker-a died inside the handler: it never finished; worker-b ran attempt 2 once.
    expect(history().map((e) => [e.worker, e.attempt, e.event])).toEqual([
      ['worker-a', 1, 'started'],
      ['worker-b', 2, 'started'],
      ['worker-b', 2, 'finished'],
    ]);
  }, 60_000);

  test('a worker frozen past its lease: once thawed, its handlers are aborted and its late results are dropped', async () => {
    // `patient` waits for its signal; `stubborn` ignores it and returns on its own timer, which
    // runs out while the worker is frozen: on SIGCONT it returns at once and races the heartbeat
    // that would tell it the lease is gone. Either way its result must not be stored.
    const stubbornMs = 5000;
    const [patient] = (await triggerRuns('patient', 1)) as [string];
    const [stubborn] = (await triggerRuns('stubborn', 1, { stubbornMs })) as [string];
    const [{ proc: server }, a] = await Promise.all([
      startServer(),
      startWorker('worker-a', { hold: true, lease: '1500ms' }),
    ]);
    await a.waitFor(about('run started', patient), 'worker-a to start the patient run', SLOW);
    await a.waitFor(about('run started', stubborn), 'worker-a to start the stubborn run', SLOW);
    await eventually(
      'worker-a has called both handlers',
      () => history().filter((e) => e.event === 'started').length === 2,
    );
    const stubbornStarted = history().find((e) => e.run === stubborn)!.at;
    a.child.kill('SIGSTOP');
    try {
      // Frozen in time: the stubborn handler is still waiting on its timer.
      expect(Date.now()).toBeLessThan(stubbornStarted + stubbornMs);
      // worker-b starts only now, so the runs can reach it only through the reaper.
      const b = await startWorker('worker-b', { lease: '1500ms' });
      for (const runId of [patient, stubborn]) {
        await server.waitFor(about('lease expired; run requeued', runId), 'the reaper to requeue', SLOW);
        await b.waitFor(about('run succeeded', runId), 'worker-b to complete the run', SLOW);
      }
      // The stubborn handler's timer must have run out while worker-a was frozen.
      await eventually(
        'the stubborn timer has run out',
        () => Date.now() > stubbornStarted + stubbornMs + 200,
      );
      const bothByB = {
        state: 'succeeded',
        attempt: 2,
        attempts: [
          {
            attempt: 1,
            workerId: 'worker-a',
            outcome: 'lease_expired',
            error: 'lease expired',
            output: null,
          },
          {
            attempt: 2,
            workerId: 'worker-b',
            outcome: 'succeeded',
            error: null,
            output: 'done by worker-b',
          },
        ],
      };
      expect(await attemptsOf(patient)).toEqual(bothByB);
      expect(await attemptsOf(stubborn)).toEqual(bothByB);
    } finally {
      a.child.kill('SIGCONT');
    }

    // Thawed: the heartbeat finds the patient run's lease gone and aborts its handler, whose late
    // result is dropped; the stubborn result is dropped by the worker or refused by the store.
    const lost = await a.waitFor(
      (l) => l.run_id === patient && / handler aborted, result will be dropped$/.test(String(l.msg)),
      'worker-a to find its lease lost',
      SLOW,
    );
    expect(lost.msg).toMatch(/^lease (lost|expired before renewal); /);
    await a.waitFor(aboutRun('run dropped: lease ', patient), 'worker-a to drop the patient run', SLOW);
    await a.waitFor(aboutRun('run dropped: lease ', stubborn), 'worker-a to drop the stubborn run', SLOW);
    await eventually('the patient handler has returned', () =>
      history().some((e) => e.run === patient && e.worker === 'worker-a' && e.event === 'late'),
    );

    const byA = history().filter((e) => e.worker === 'worker-a');
    const patientByA = byA.filter((e) => e.run === patient);
    expect(patientByA.map((e) => e.event)).toEqual(['started', 'aborted', 'late']);
    expect(patientByA[1]!.reason).toMatch(/^lease (lost|expired before renewal) on run /);
    expect(byA.filter((e) => e.run === stubborn && e.event === 'started')).toHaveLength(1);
    expect(byA.some((e) => e.run === stubborn && (e.event === 'finished' || e.event === 'late'))).toBe(true);
    expect(a.lines.some((l) => l.msg === 'run succeeded')).toBe(false);

    // worker-a's results never landed: the runs are still worker-b's.
    for (const runId of [patient, stubborn]) {
      const after = await attemptsOf(runId);
      expect(after.state).toBe('succeeded');
      expect(after.attempts.map((x) => [x.workerId, x.outcome, x.output])).toEqual([
        ['worker-a', 'lease_expired', null],
        ['worker-b', 'succeeded', 'done by worker-b'],
      ]);
    }
    // And the thawed worker still drains and exits cleanly.
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
  }, 60_000);

  test('SIGTERM with runs in flight past the grace: they are released at once and another worker completes them', async () => {
    const runIds = await triggerRuns('drained', 4);
    // A 60 s lease: waiting for its expiry would be obvious.
    const a = await startWorker('worker-a', { hold: true, lease: '60s', grace: '500ms', concurrency: 4 });
    for (const runId of runIds) await a.waitFor(about('run started', runId), 'worker-a to start a run', SLOW);
    const b = await startWorker('worker-b', { lease: '60s', concurrency: 4 });

    const termAt = Date.now();
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    const released = await a.waitFor(
      (l) => l.msg === 'released unfinished runs for another worker',
      'worker-a to release its runs',
    );
    expect(released.released).toBe(4);
    for (const runId of runIds) {
      expect(a.lines.some(about('run dropped: worker shutdown', runId))).toBe(true);
      await b.waitFor(about('run succeeded', runId), 'worker-b to complete a released run', SLOW);
    }
    const tookMs = Date.now() - termAt;
    expect(tookMs).toBeLessThan(15_000);

    for (const runId of runIds) {
      // Released, not expired: the attempt was not spent.
      expect(await attemptsOf(runId)).toEqual({
        state: 'succeeded',
        attempt: 1,
        attempts: [
          { attempt: 1, workerId: 'worker-a', outcome: 'released', error: 'worker shutdown', output: null },
          { attempt: 1, workerId: 'worker-b', outcome: 'succeeded', error: null, output: 'done by worker-b' },
        ],
      });
    }
    const log = history();
    for (const runId of runIds) {
      const events = log.filter((e) => e.run === runId).map((e) => [e.worker, e.event, e.reason]);
      expect(events).toEqual([
        ['worker-a', 'started', undefined],
        ['worker-a', 'aborted', 'worker shutdown'],
        ['worker-a', 'late', undefined],
        ['worker-b', 'started', undefined],
        ['worker-b', 'finished', undefined],
      ]);
    }
    // None lost, none twice: one success per run.
    const successes = log.filter((e) => e.event === 'finished').map((e) => e.run);
    expect(successes.sort()).toEqual([...runIds].sort());
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  }, 60_000);

  test('a worker over HTTP and a worker on the database share one pool: every run once', async () => {
    const { url } = await startServer();
    const [remote, direct] = await Promise.all([
      startWorker('worker-http', { url }),
      startWorker('worker-db', { lease: '30s' }),
    ]);
    const total = 200;
    const runIds = await triggerRuns('shared', total, { quickMs: 100 });
    const wanted = new Set(runIds);

    await eventually(
      `all ${total} runs have finished`,
      () =>
        new Set(
          history()
            .filter((e) => e.event === 'finished')
            .map((e) => e.run),
        ).size === total,
      40_000,
    );
    const log = history();
    const executions = new Map<string, Execution[]>();
    for (const e of log) {
      if (e.event !== 'started') continue;
      expect(wanted.has(e.run)).toBe(true);
      executions.set(e.run, [...(executions.get(e.run) ?? []), e]);
    }
    const twice = [...executions].filter(([, es]) => es.length !== 1);
    expect(twice).toEqual([]);
    expect(executions.size).toBe(total);
    expect(log.filter((e) => e.event === 'aborted' || e.event === 'late')).toEqual([]);

    const by = (w: string) => log.filter((e) => e.event === 'finished' && e.worker === w).length;
    expect(by('worker-http')).toBeGreaterThan(0);
    expect(by('worker-db')).toBeGreaterThan(0);
    expect(by('worker-http') + by('worker-db')).toBe(total);

    // Every run is stored as succeeded once, with the output of the worker that ran it.
    for (const runId of runIds) {
      const ran = executions.get(runId)![0]!.worker;
      await eventually(`run ${runId} is recorded`, () =>
        [remote, direct].some((p) => p.lines.some(about('run succeeded', runId))),
      );
      expect(await attemptsOf(runId)).toEqual({
        state: 'succeeded',
        attempt: 1,
        attempts: [
          { attempt: 1, workerId: ran, outcome: 'succeeded', error: null, output: `done by ${ran}` },
        ],
      });
    }
    remote.child.kill('SIGTERM');
    direct.child.kill('SIGTERM');
    expect(await remote.exited).toBe(0);
    expect(await direct.exited).toBe(0);
  }, 60_000);
});
