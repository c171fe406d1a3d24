/**
 * The executor without a database: one handler run with its context, over a real `Completer` whose
 * source records what it is asked to write. What a value and a throw become (output, message,
 * stack, permanent, retry-after), the job's timeout, and a result dropped because the run stopped
 * being ours while its handler ran.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  type ClaimedRun,
  type Completion,
  type FailRunParams,
  FakeClock,
  PermanentError,
  RetryLaterError,
} from '../../src/core/index.js';
import { type ActiveRun, ActiveRuns, heldRun, type WorkerEvents } from '../../src/worker/active-run.js';
import { Completer } from '../../src/worker/completer.js';
import { Executor, errorParts, type Handler, outputOf } from '../../src/worker/executor.js';

const T0 = Date.UTC(2026, 0, 1);
const logger = pino({ level: 'silent' });

function claimed(runId: string, timeoutMs: number | null = null): ClaimedRun {
  return {
    runId,
    tenantId: 't',
    jobId: `job-${runId}`,
    handler: runId,
    payload: { n: 1 },
    pool: 'default',
    scheduledFor: new Date(T0),
    attempt: 2,
    maxAttempts: 3,
    leaseToken: `token-${runId}`,
    leaseExpiresAt: new Date(T0 + 30_000),
    availableAt: new Date(T0),
    timeoutMs,
  };
}

function setup(handlers: Record<string, Handler>) {
  const clock = new FakeClock(T0);
  const runs = new ActiveRuns();
  const completed: Completion[] = [];
  const failed: FailRunParams[] = [];
  const events: [keyof WorkerEvents, unknown[]][] = [];
  const steps: string[] = [];
  const completer = new Completer({
    store: {
      completeRuns: async (p) => {
        completed.push(...p.leases);
        return { completed: p.leases.map((l) => l.runId), lost: [] };
      },
      failRun: async (p) => {
        failed.push(p);
        return { state: p.permanent ? 'dead' : 'pending', attempt: 2, availableAt: null };
      },
    },
    clock,
    logger,
  });
  const executor = new Executor({
    handlers,
    clock,
    logger,
    completer,
    emit: (event, ...args) => void events.push([event, args]),
    extendLease: async () => new Date(T0 + 60_000),
    onFinished: (a) => {
      steps.push(`finished ${a.run.runId}`);
      runs.finished(a);
    },
    onEnded: (a) => {
      steps.push(`ended ${a.run.runId}`);
      runs.ended(a);
    },
  });
  /** Starts `runId`'s handler (the handler of the same name), held and claimed at T0. */
  const begin = (runId: string, timeoutMs: number | null = null): ActiveRun => {
    const a = heldRun(claimed(runId, timeoutMs), T0);
    runs.add(a);
    executor.begin(a);
    return a;
  };
  const names = () => events.map(([e, args]) => `${e} ${(args[0] as ClaimedRun).runId}`);
  return { clock, runs, completed, failed, events, steps, begin, names };
}

describe('Executor', () => {
  it("gives the handler its run's context and completes its output, started when it was called", async () => {
    const seen: unknown[] = [];
    const { clock, completed, steps, begin, names, runs } = setup({
      ok: async (ctx) => {
        seen.push([ctx.runId, ctx.jobId, ctx.attempt, ctx.payload, ctx.signal.aborted]);
        seen.push(await ctx.extendLease());
        return { output: 'done' };
      },
    });
    clock.advance(250);
    const a = begin('ok');
    expect(a).toMatchObject({ started: true, startedAt: T0 + 250 });
    await a.done;
    expect(seen).toEqual([['ok', 'job-ok', 2, { n: 1 }, false], new Date(T0 + 60_000)]);
    expect(completed).toEqual([{ runId: 'ok', leaseToken: 'token-ok', output: 'done', startedAt: T0 + 250 }]);
    expect(names()).toEqual(['run:started ok', 'run:succeeded ok']);
    expect(steps).toEqual(['finished ok', 'ended ok']);
    expect(runs.size).toBe(0);
  });

  it('a destructured context works: its methods and its signal and logger, each made once per run', async () => {
    const seen: unknown[] = [];
    const { completed, begin } = setup({
      parts: async (ctx) => {
        const { runId, progress, log, extendLease, signal, logger } = ctx;
        progress(40, 'part way');
        log('a line');
        seen.push(runId, await extendLease(), signal.aborted, signal === ctx.signal, logger === ctx.logger);
        seen.push(typeof logger.info, Object.keys(ctx).sort());
      },
    });
    await begin('parts').done;
    expect(seen).toEqual([
      'parts',
      new Date(T0 + 60_000),
      false,
      true,
      true,
      'function',
      ['attempt', 'extendLease', 'jobId', 'log', 'payload', 'progress', 'runId', 'scheduledFor', 'tenantId'],
    ]);
    // What it reported went with its result.
    expect(completed[0]).toMatchObject({ progress: { value: 40, message: 'part way' }, logs: ['a line'] });
  });

  it('fails a throw with its message and stack; PermanentError is permanent, RetryLaterError sets the retry', async () => {
    const { failed, begin, events } = setup({
      boom: () => {
        throw Object.assign(new TypeError('x is not a function'), { output: 'printed\u0000' });
      },
      perm: () => {
        throw new PermanentError('bad input');
      },
      later: () => {
        throw new RetryLaterError('busy', 1500);
      },
      text: () => Promise.reject('plain words'),
    });
    await Promise.all(['boom', 'perm', 'later', 'text'].map((id) => begin(id).done));
    const byRun = new Map(failed.map((f) => [f.runId, f]));
    expect(byRun.get('boom')).toMatchObject({
      error: 'TypeError: x is not a function',
      permanent: false,
      retryAfterMs: undefined,
      output: 'printed\uFFFD',
      startedAt: T0,
    });
    expect(byRun.get('boom')!.errorStack).toMatch(/^TypeError: x is not a function\n {4}at /);
    expect(byRun.get('perm')).toMatchObject({ error: 'PermanentError: bad input', permanent: true });
    expect(byRun.get('later')).toMatchObject({ error: 'RetryLaterError: busy', retryAfterMs: 1500 });
    // A thrown string is its message and, like a returned one, its output.
    expect(byRun.get('text')).toMatchObject({
      error: 'plain words',
      errorStack: null,
      output: 'plain words',
    });
    expect(events.filter(([e]) => e === 'run:failed').map(([, args]) => args[1])).toContainEqual({
      state: 'dead',
      error: 'PermanentError: bad input',
    });
  });

  it("aborts a handler that outlives the job's timeout and fails the attempt", async () => {
    let signal: AbortSignal | undefined;
    const { clock, failed, begin } = setup({
      slow: (ctx) => {
        signal = ctx.signal;
        return new Promise(() => {});
      },
    });
    const a = begin('slow', 2000);
    clock.advance(1999);
    await new Promise((r) => setImmediate(r));
    expect(signal!.aborted).toBe(false);
    clock.advance(1);
    await a.done;
    expect(signal!.aborted).toBe(true);
    expect(failed).toMatchObject([{ runId: 'slow', error: 'timed out after 2s', permanent: false }]);
  });

  it('drops the result of a run that stopped being ours while its handler ran: nothing is written', async () => {
    let finish!: () => void;
    const { completed, failed, begin, names, events } = setup({
      h: () => new Promise<void>((r) => (finish = r)),
    });
    const a = begin('h');
    a.dropped = 'lease lost';
    finish();
    await a.done;
    expect(completed).toEqual([]);
    expect(failed).toEqual([]);
    expect(names()).toEqual(['run:started h', 'run:dropped h']);
    expect(events.at(-1)![1][1]).toBe('lease lost');
  });

  it('records a handler that throws before returning a promise as a failure, and a plain value as a success', async () => {
    const { completed, failed, begin } = setup({
      sync: () => {
        throw new Error('thrown at once');
      },
      plain: () => 'done',
    });
    await begin('sync').done;
    await begin('plain').done;
    expect(failed).toMatchObject([{ runId: 'sync', error: 'thrown at once' }]);
    expect(completed.map((c) => c.runId)).toEqual(['plain']);
  });

  it('fails a run whose handler this worker does not have', async () => {
    const { failed, begin } = setup({});
    await begin('missing').done;
    expect(failed).toMatchObject([{ runId: 'missing', error: 'no handler named "missing" in this worker' }]);
  });
});

describe('outputOf and errorParts', () => {
  it('keep a string or an output property, and name an error by its class', () => {
    expect(outputOf('text')).toBe('text');
    expect(outputOf({ output: 'o' })).toBe('o');
    expect(outputOf({ output: 1 })).toBeNull();
    expect(outputOf(undefined)).toBeNull();
    expect(errorParts(new Error('plain')).message).toBe('plain');
    expect(errorParts(new Error('')).message).toBe('Error');
    expect(errorParts(new RangeError('')).message).toBe('RangeError');
    expect(errorParts({ code: 7 })).toEqual({ message: '{"code":7}', stack: null });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(errorParts(cyclic)).toEqual({ message: '[object Object]', stack: null });
  });
});
