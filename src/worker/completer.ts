/**
 * A worker's results on their way to the store. Completions are batched: those that arrive while
 * one batch is being written go in the next, so a claim of 100 quick runs completes in one
 * statement. Failures are written one run at a time (`failRun`), a few at once, beside the
 * completions: a source that batches (HTTP) sends them all in one request.
 *
 * The invariants, which keep one bad result from wedging a worker:
 * - A result the store refuses as data (SQLSTATE class 22 or 54, a `validation_error`, an HTTP
 *   400/413/422) is never retried as it is. A refused batch is split in halves until the refused
 *   result stands alone; every other result is recorded, and the refused run is failed (dead at
 *   once, with a sanitised message saying why) instead of being completed.
 * - Any other error (the database or server unreachable) is retried with backoff, but only for
 *   a fixed budget measured from the result's first failed write: by default the length of the
 *   lease the run was claimed with. Never "while the lease lasts": the worker's own heartbeats keep
 *   renewing it. Past the budget the result is given up (logged), the run leaves the worker, its
 *   lease lapses and the reaper retries it.
 * - `settle` bounds how long a stopping worker waits: what is still unrecorded then is given up.
 */
import type { Logger } from 'pino';
import {
  type ClaimedRun,
  type Clock,
  type Completion,
  LeaseLostError,
  type LeaseSource,
  type RunReport,
  resultText,
  TockError,
} from '../core/index.js';

/** How a result ended up. */
export type ResultOutcome =
  | { kind: 'succeeded' }
  | { kind: 'failed'; state: 'pending' | 'dead'; error: string }
  /** The lease was not live: the run is not ours any more, the result was not recorded. */
  | { kind: 'lost' }
  /** Not recorded: given up after the retry budget, or at shutdown. */
  | { kind: 'dropped'; reason: string };

/** A failed attempt to record. Text fields are stored as given (the caller makes them `resultText`). */
export interface FailureResult {
  /** The error's message. */
  error: string;
  /** The error's stack, if it has one. */
  errorStack?: string | null;
  /** When the handler started (epoch ms), if it did. */
  startedAt?: number | null;
  permanent: boolean;
  retryAfterMs?: number;
  output: string | null;
  /** What the handler reported (progress, log lines) that no heartbeat carried. */
  report?: RunReport;
}

type Write =
  | { kind: 'complete'; output: string | null; startedAt: number | null; report?: RunReport }
  | ({ kind: 'fail'; refused: boolean } & FailureResult);

interface Pending {
  run: ClaimedRun;
  write: Write;
  /** How long after its first failed write the result is still retried, ms. */
  budgetMs: number;
  firstFailedAt: number | null;
  resolve: (outcome: ResultOutcome) => void;
}

export interface CompleterOptions {
  store: Pick<LeaseSource, 'completeRuns' | 'failRun'>;
  clock: Clock;
  logger: Logger;
  /** Told of each write error (after it is logged). */
  onError?: (err: unknown) => void;
}

/**
 * Failures written at once: each is its own write (its retry is decided from the run's attempts),
 * so a batch of them takes this many of the store's connections, or goes in one HTTP request.
 */
const FAILURES_AT_ONCE = 8;

/** Backoff between retries of unrecorded results: 200 ms doubling to 3.2 s. */
const RETRY_BASE_MS = 100;
const RETRY_MAX_DOUBLINGS = 5;

/**
 * Whether `err` is the store refusing this data (retrying the same write would fail the same
 * way), as opposed to the store being unreachable.
 */
export function isDataError(err: unknown): boolean {
  if (err instanceof TockError) return err.code === 'validation_error' || err.code === 'payload_too_large';
  if (typeof err !== 'object' || err === null) return false;
  const { code, status } = err as { code?: unknown; status?: unknown };
  // SQLSTATE 22 data exception (22021 a NUL byte, 22P05 an untranslatable escape in jsonb), 54
  // program limit exceeded (a value too large).
  if (typeof code === 'string' && /^(22|54)[0-9A-Z]{3}$/.test(code)) return true;
  // A Tock server refusing the request itself (`TockApiError`).
  return typeof status === 'number' && (status === 400 || status === 413 || status === 422);
}

/** The store's reason, for the run's error: the message and the SQLSTATE, sanitised. */
function reasonOf(err: unknown): string {
  const { message, code } = err as { message?: unknown; code?: unknown };
  const text = typeof message === 'string' ? message : String(err);
  return resultText(typeof code === 'string' ? `${text} (${code})` : text);
}

/** The outcomes without details, one object each for every run (they are only read). */
const SUCCEEDED: ResultOutcome = Object.freeze({ kind: 'succeeded' });
const LOST: ResultOutcome = Object.freeze({ kind: 'lost' });

export class Completer {
  private queue: Pending[] = [];
  /** The batch being written (one array, not a set: a run is added and taken out with its batch). */
  private inFlight: Pending[] = [];
  private flushing: Promise<void> | null = null;
  /** Aborted by `settle` when it gives up: cuts a backoff sleep short. */
  private closing = new AbortController();

  constructor(private readonly o: CompleterOptions) {}

  /** Results not recorded yet. */
  get size(): number {
    return this.queue.length + this.inFlight.length;
  }

  /** Records a success (batched with others); resolves with how it ended. */
  complete(
    run: ClaimedRun,
    output: string | null,
    budgetMs: number,
    startedAt: number | null = null,
    report?: RunReport,
  ): Promise<ResultOutcome> {
    return this.enqueue(run, { kind: 'complete', output, startedAt, report }, budgetMs);
  }

  /** Records a failure of the handler; resolves with how it ended. */
  fail(run: ClaimedRun, failure: FailureResult, budgetMs: number): Promise<ResultOutcome> {
    return this.enqueue(run, { kind: 'fail', refused: false, ...failure }, budgetMs);
  }

  private enqueue(run: ClaimedRun, write: Write, budgetMs: number): Promise<ResultOutcome> {
    if (this.closing.signal.aborted) this.closing = new AbortController();
    return new Promise((resolve) => {
      this.queue.push({ run, write, budgetMs, firstFailedAt: null, resolve });
      this.flushing ??= this.flush();
    });
  }

  /**
   * Waits up to `waitMs` for every result to be recorded; then gives up the rest (logged, each
   * resolved `dropped`), so a stopping worker never waits on an unreachable store. A write still in
   * flight may yet land.
   */
  async settle(waitMs: number): Promise<void> {
    if (this.size === 0) return;
    const timer = new AbortController();
    const idle = (async () => {
      while (this.flushing) await this.flushing;
    })();
    await Promise.race([idle, this.o.clock.sleep(waitMs, timer.signal).catch(() => undefined)]);
    timer.abort();
    if (this.size === 0) return;
    const rest = [...this.inFlight, ...this.queue];
    this.queue = [];
    this.inFlight = [];
    this.closing.abort();
    this.o.logger.error(
      { runs: rest.map((p) => p.run.runId) },
      'worker stopping with results not recorded; giving them up (their leases will expire and the runs retry)',
    );
    for (const p of rest)
      p.resolve({ kind: 'dropped', reason: 'worker shutdown before the result was recorded' });
  }

  /** Writes the queue until it is empty; the only writer while it runs. */
  private async flush(): Promise<void> {
    try {
      // Let the handlers that finish in this turn of the event loop join the first batch.
      await new Promise<void>((r) => setImmediate(r));
      let failures = 0;
      while (this.queue.length > 0) {
        const batch = this.queue;
        this.queue = [];
        this.inFlight = batch;
        const retry: Pending[] = [];
        let lastError: unknown = null;
        const onOutage = (items: Pending[], err: unknown) => {
          retry.push(...items);
          lastError = err;
        };
        // Taken apart first: a refused completion becomes a failure and is written as one there.
        const completions = batch.filter((p) => p.write.kind === 'complete');
        const fails = batch.filter((p) => p.write.kind === 'fail');
        // Side by side: a lease source that batches (HTTP) sends them in one request.
        await Promise.all([
          this.writeCompletions(completions, onOutage),
          this.writeFailures(fails, onOutage),
        ]);
        this.inFlight = [];
        if (retry.length === 0) {
          failures = 0;
          continue;
        }
        failures += 1;
        await this.backOff(retry, lastError, failures);
      }
    } finally {
      // In the same synchronous step as the loop's last look at the queue: a result queued from
      // here on starts a flush of its own instead of joining one that has ended.
      this.flushing = null;
    }
  }

  /** Puts back the results still within their budget and sleeps; gives up the others. */
  private async backOff(retry: Pending[], err: unknown, failures: number): Promise<void> {
    // `settle` gave these up while they were being written.
    if (this.closing.signal.aborted) return;
    const now = this.o.clock.nowMs();
    const keep: Pending[] = [];
    for (const p of retry) {
      p.firstFailedAt ??= now;
      if (now - p.firstFailedAt < p.budgetMs) keep.push(p);
      else p.resolve({ kind: 'dropped', reason: `the result could not be recorded within ${p.budgetMs} ms` });
    }
    this.o.logger.error(
      { err, runs: retry.length, retrying: keep.length, failures },
      keep.length > 0
        ? 'could not record results; retrying for a bounded time'
        : 'could not record results within their retry budget; giving them up (the leases will expire)',
    );
    this.o.onError?.(err);
    if (keep.length === 0 || this.closing.signal.aborted) return;
    this.queue = [...keep, ...this.queue];
    const untilFirstGiveUp = Math.min(...keep.map((p) => (p.firstFailedAt ?? now) + p.budgetMs)) - now;
    const backoff = RETRY_BASE_MS * 2 ** Math.min(failures, RETRY_MAX_DOUBLINGS);
    await this.o.clock
      .sleep(Math.max(1, Math.min(untilFirstGiveUp, backoff)), this.closing.signal)
      .catch(() => undefined);
  }

  /** One statement for `items`; a data error splits them in halves until the refused one stands alone. */
  private async writeCompletions(
    items: Pending[],
    onOutage: (items: Pending[], err: unknown) => void,
  ): Promise<void> {
    if (items.length === 0) return;
    try {
      const { lost } = await this.o.store.completeRuns({
        leases: items.map(
          (p): Completion => ({
            runId: p.run.runId,
            leaseToken: p.run.leaseToken,
            output: (p.write as { output: string | null }).output,
            startedAt: (p.write as { startedAt: number | null }).startedAt,
            ...(p.write as { report?: RunReport }).report,
          }),
        ),
        now: this.o.clock.nowMs(),
      });
      const lostSet = new Set(lost);
      for (const p of items) p.resolve(lostSet.has(p.run.runId) ? LOST : SUCCEEDED);
    } catch (err) {
      if (!isDataError(err)) return onOutage(items, err);
      if (items.length > 1) {
        const half = Math.ceil(items.length / 2);
        await this.writeCompletions(items.slice(0, half), onOutage);
        await this.writeCompletions(items.slice(half), onOutage);
        return;
      }
      const p = items[0]!;
      this.o.logger.error(
        { err, run_id: p.run.runId, job_id: p.run.jobId },
        "the store refused the handler's result; failing the run",
      );
      p.write = {
        kind: 'fail',
        refused: true,
        error: `the handler's result could not be stored: ${reasonOf(err)}`,
        permanent: true,
        output: null,
        startedAt: (p.write as { startedAt: number | null }).startedAt,
      };
      await this.writeFailure(p, onOutage);
    }
  }

  /** `failRun` for each of `items`, {@link FAILURES_AT_ONCE} at a time. */
  private async writeFailures(
    items: Pending[],
    onOutage: (items: Pending[], err: unknown) => void,
  ): Promise<void> {
    for (let at = 0; at < items.length; at += FAILURES_AT_ONCE) {
      await Promise.all(items.slice(at, at + FAILURES_AT_ONCE).map((p) => this.writeFailure(p, onOutage)));
    }
  }

  /**
   * `failRun` for one result. Refused as data, it is written once more without the handler's text
   * (a message saying why instead); refused again, it is given up.
   */
  private async writeFailure(p: Pending, onOutage: (items: Pending[], err: unknown) => void): Promise<void> {
    const w = p.write;
    if (w.kind !== 'fail') return;
    try {
      const r = await this.o.store.failRun({
        runId: p.run.runId,
        leaseToken: p.run.leaseToken,
        error: w.error,
        errorStack: w.errorStack,
        startedAt: w.startedAt,
        permanent: w.permanent,
        retryAfterMs: w.retryAfterMs,
        output: w.output,
        ...w.report,
        now: this.o.clock.nowMs(),
      });
      p.resolve({ kind: 'failed', state: r.state, error: w.error });
    } catch (err) {
      if (err instanceof LeaseLostError) return p.resolve(LOST);
      if (!isDataError(err)) return onOutage([p], err);
      this.o.logger.error({ err, run_id: p.run.runId, job_id: p.run.jobId }, 'the store refused a failure');
      if (w.refused)
        return p.resolve({ kind: 'dropped', reason: `the store refused the result: ${reasonOf(err)}` });
      p.write = {
        ...w,
        refused: true,
        error: `the handler's error could not be stored: ${reasonOf(err)}`,
        errorStack: null,
        retryAfterMs: undefined,
        output: null,
        report: undefined,
      };
      await this.writeFailure(p, onOutage);
    }
  }
}
