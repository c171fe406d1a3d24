/**
 * Runs one handler for one run: builds its context, calls it, enforces the job's timeout, and hands
 * its result (value or thrown error, with its output) to the completer; then says how the result
 * ended up. The invariant: a run that stopped being ours while its handler ran (`dropped`: lease
 * lost, worker shutdown) has its result dropped, never written.
 */
import type { Logger } from 'pino';
import { type ClaimedRun, type Clock, RetryLaterError, resultText } from '../core/index.js';
import { type ActiveRun, abortRun, type EmitEvent, FINISHED } from './active-run.js';
import type { Completer, ResultOutcome } from './completer.js';
import { ReportBuffer } from './run-report.js';

/**
 * What a handler receives: the run's identity (key idempotent writes by `jobId` + `scheduledFor`).
 * `signal` and `logger` are made when first read (getters), so a spread copy (`{ ...ctx }`) has
 * neither: pass `ctx` itself, or read them from it. Destructuring (`const { signal, log } = ctx`)
 * works.
 */
export interface RunContext {
  runId: string;
  tenantId: string;
  jobId: string;
  /** The slot this run is for: its identity and its logical date. */
  scheduledFor: Date;
  /** 1 on the first try; grows with each retry. */
  attempt: number;
  payload: unknown;
  /** Aborted when the lease is lost or the worker shuts down: stop work, the result will be dropped. */
  signal: AbortSignal;
  logger: Logger;
  /**
   * Renews this worker's leases now (one statement for all of them) before a known-long step;
   * resolves to this run's new expiry. Rejects with `LeaseLostError` when the lease is gone.
   */
  extendLease(): Promise<Date>;
  /**
   * Reports how far the run has got: any finite number (a percentage by convention, or items done)
   * and an optional message (its first 200 characters are kept). The latest report wins. Sent with
   * the worker's next heartbeat (within `heartbeatCheckMs`, 1 s by default), or with the result;
   * shown by `tock runs show` and `GET /v1/runs/{id}`. Throws `ValidationError` on a value that
   * is not a finite number.
   */
  progress(value: number, message?: string): void;
  /**
   * Adds a line to the attempt's log (its first 1,000 characters are kept). The attempt keeps its
   * last 100 lines; older ones are dropped and counted. Sent as `progress` is.
   */
  log(line: string): void;
}

/**
 * Resolve to succeed; a returned string, or `{ output: string }`, is kept (its last 64 KiB) on the
 * attempt. Throw `PermanentError` to dead-letter at once, `RetryLaterError` to retry no sooner than
 * its delay; any other error retries after the job's backoff. An error's `output` property, if it
 * is a string, is kept on the attempt too.
 *
 * Output and error text are sanitised, not refused: U+0000 and unpaired UTF-16 surrogates, which
 * PostgreSQL cannot store, are kept as U+FFFD, so a result is never lost over its bytes. Return
 * binary data encoded (base64) if it must survive exactly.
 */

export type Handler = (ctx: RunContext) => unknown | Promise<unknown>;

/** What a handler's result or error carries to keep on the attempt: a string, or its `output`. */
export function outputOf(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { output?: unknown }).output === 'string'
  ) {
    return (value as { output: string }).output;
  }
  return null;
}

/**
 * A thrown value as the attempt's error, each part its last 64 KiB, sanitised: the message (what
 * run tables show: an `Error`'s message, prefixed by its name unless that is plain `Error`; a
 * string; or JSON) and, for an `Error`, its stack.
 */
export function errorParts(err: unknown): { message: string; stack: string | null } {
  if (err instanceof Error) {
    const name = typeof err.name === 'string' && err.name !== '' ? err.name : 'Error';
    const text = typeof err.message === 'string' ? err.message : String(err.message);
    const message = name === 'Error' ? text || name : text ? `${name}: ${text}` : name;
    return {
      message: resultText(message),
      stack: typeof err.stack === 'string' && err.stack !== '' ? resultText(err.stack) : null,
    };
  }
  try {
    return {
      message: resultText(typeof err === 'string' ? err : (JSON.stringify(err) ?? String(err))),
      stack: null,
    };
  } catch {
    return { message: resultText(String(err)), stack: null };
  }
}

/** How a handler's call ended: its value, or what it threw (or the timeout). */
type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export interface ExecutorOptions {
  handlers: Record<string, Handler>;
  clock: Clock;
  logger: Logger;
  completer: Completer;
  /** See `WorkerOptions.resultRetryMs`. Default: the run's lease length. */
  resultRetryMs?: number;
  emit: EmitEvent;
  /** Renews every lease now; the run's new expiry, or `LeaseLostError` (the lease keeper's). */
  extendLease: (a: ActiveRun) => Promise<Date>;
  /** The handler returned: its slot is free while its result is recorded. */
  onFinished: (a: ActiveRun) => void;
  /** The run is over: its result is settled. */
  onEnded: (a: ActiveRun) => void;
}

/**
 * A handler's context: a class, not an object literal, because a literal with getters costs V8 a
 * runtime call per accessor (about 3 µs a context, measured on Node 24, against 0.1 µs for this),
 * at every run. `signal` and `logger` are made on first use (prototype getters): most handlers read
 * neither, and an AbortController and a pino child per run are a measurable share of the CPU. The
 * methods are own properties, so destructuring (`const { progress } = ctx`) keeps them working.
 */
class HandlerContext implements RunContext {
  readonly runId: string;
  readonly tenantId: string;
  readonly jobId: string;
  readonly scheduledFor: Date;
  readonly attempt: number;
  readonly payload: unknown;
  readonly extendLease: () => Promise<Date>;
  readonly progress: (value: number, message?: string) => void;
  readonly log: (line: string) => void;
  readonly #a: ActiveRun;
  readonly #parent: Logger;
  #logger: Logger | undefined;

  constructor(a: ActiveRun, parent: Logger, extendLease: (a: ActiveRun) => Promise<Date>) {
    const { run } = a;
    this.runId = run.runId;
    this.tenantId = run.tenantId;
    this.jobId = run.jobId;
    this.scheduledFor = run.scheduledFor;
    this.attempt = run.attempt;
    this.payload = run.payload;
    this.extendLease = () => extendLease(a);
    this.progress = (value, message) => {
      a.report ??= new ReportBuffer();
      a.report.progress(value, message);
    };
    this.log = (line) => {
      a.report ??= new ReportBuffer();
      a.report.log(line);
    };
    this.#a = a;
    this.#parent = parent;
  }

  get signal(): AbortSignal {
    this.#a.controller ??= new AbortController();
    return this.#a.controller.signal;
  }

  get logger(): Logger {
    const { run } = this.#a;
    this.#logger ??= this.#parent.child({ run_id: run.runId, job_id: run.jobId, attempt: run.attempt });
    return this.#logger;
  }
}

export class Executor {
  constructor(private readonly o: ExecutorOptions) {}

  /** Calls the run's handler now; `a.done` settles once its result is. */
  begin(a: ActiveRun): void {
    a.started = true;
    a.startedAt = this.o.clock.nowMs();
    this.o.emit('run:started', a.run);
    a.done = this.execute(a);
  }

  /** Runs the handler and records its outcome; the run is over (`onEnded`) when this settles. */
  private async execute(a: ActiveRun): Promise<void> {
    try {
      let outcome: Outcome;
      if (a.run.timeoutMs === null) {
        // Awaited in place (most runs): no promise of its own to race against a timeout.
        try {
          outcome = { ok: true, value: await this.invoke(a) };
        } catch (error) {
          outcome = { ok: false, error };
        }
      } else {
        outcome = await this.callWithTimeout(a, a.run.timeoutMs);
      }
      this.o.onFinished(a);
      if (a.dropped !== null) {
        this.o.emit('run:dropped', a.run, a.dropped);
        return;
      }
      this.report(a.run, await this.record(a, outcome));
    } finally {
      this.o.onEnded(a);
    }
  }

  /** Calls the run's handler with its context: what it returns, or throws if it throws (or is missing). */
  private invoke(a: ActiveRun): unknown {
    const handler = this.o.handlers[a.run.handler];
    if (!handler) throw new Error(`no handler named "${a.run.handler}" in this worker`);
    return handler(this.context(a));
  }

  /** The handler's context. */
  private context(a: ActiveRun): RunContext {
    return new HandlerContext(a, this.o.logger, this.o.extendLease);
  }

  /** Calls the handler, racing the job's timeout (which aborts the handler and fails the attempt). */
  private async callWithTimeout(a: ActiveRun, timeoutMs: number): Promise<Outcome> {
    const work: Promise<Outcome> = (async () => this.invoke(a))().then(
      (value) => ({ ok: true, value }),
      (error) => ({ ok: false, error }),
    );
    const timer = new AbortController();
    const timedOut = this.o.clock.sleep(timeoutMs, timer.signal).then((): Outcome => {
      const error = new Error(`timed out after ${timeoutMs / 1000}s`);
      if (!timer.signal.aborted) abortRun(a, error);
      return { ok: false, error };
    });
    const outcome = await Promise.race([work, timedOut]);
    // A reason of our own: aborting without one builds a DOMException with a stack, per run.
    timer.abort(FINISHED);
    return outcome;
  }

  /** Hands the outcome to the completer, with what the handler reported that no heartbeat carried; how it ended up. */
  private async record(a: ActiveRun, outcome: Outcome): Promise<ResultOutcome> {
    const { run } = a;
    const budgetMs = this.o.resultRetryMs ?? a.leaseMs;
    // A heartbeat carrying part of the report is in flight: what it fails to send comes back first.
    if (a.reporting !== null) await a.reporting;
    const report = a.report?.take() ?? undefined;
    if (outcome.ok) {
      const output = outputOf(outcome.value);
      return this.o.completer.complete(
        run,
        output === null ? null : resultText(output),
        budgetMs,
        a.startedAt,
        report,
      );
    }
    const failure = outcome.error;
    const code =
      typeof failure === 'object' && failure !== null ? (failure as { code?: unknown }).code : undefined;
    const output = outputOf(failure);
    const { message, stack } = errorParts(failure);
    return this.o.completer.fail(
      run,
      {
        error: message,
        errorStack: stack,
        startedAt: a.startedAt,
        permanent: code === 'permanent_failure',
        retryAfterMs: failure instanceof RetryLaterError ? failure.retryAfterMs : undefined,
        output: output === null ? null : resultText(output),
        report,
      },
      budgetMs,
    );
  }

  /** Emits how a run's result ended up. */
  private report(run: ClaimedRun, outcome: ResultOutcome): void {
    switch (outcome.kind) {
      case 'succeeded':
        this.o.emit('run:succeeded', run);
        return;
      case 'failed':
        this.o.emit('run:failed', run, { state: outcome.state, error: outcome.error });
        return;
      case 'lost':
        this.o.emit('lease:lost', run.runId);
        this.o.emit('run:dropped', run, 'lease lost before the result was recorded');
        return;
      case 'dropped':
        this.o.emit('run:dropped', run, outcome.reason);
        return;
    }
  }
}
