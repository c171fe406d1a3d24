/**
 * The worker's lease operations over a Tock server's HTTP API, so a `Worker` runs the same
 * handlers against a remote server as against the database. Claims long-poll (`wait_ms`) when
 * nothing is ready; heartbeats renew every lease in one request; results go under the lease token.
 *
 * Lease expiries are the server's instants. The worker judges them by its own clock, so each one is
 * converted: local expiry = expiry − the least bound of the server's offset the latest answers gave
 * (each: its `server_time` − when its request was sent). A request left before the server read its
 * clock, so a converted expiry is never later than the real one, whatever the skew between the two
 * machines, while that skew holds (a bound the answer in hand shows stale, after a clock step, is
 * not used: `localExpiry`); and a long-poll's wait, which only loosens its own answer's bound, is not taken out of
 * the leases it answers. A handler's start goes the other way, to
 * the server's clock, with the least offset of the latest answers (each one's `server_time` − when
 * its request was sent, so a long-poll's wait is not taken for skew): an estimate never earlier than
 * the real start; the server keeps it within the claim and its now whatever is sent.
 *
 * The source is bound to one worker (`workerId`, given at construction): its claims, heartbeats
 * and reports all go under that id, so the server's node list shows one worker, not one per
 * request. A `Worker` given this source takes its id from it.
 *
 * Claims are retry-safe: each carries a claim id (the worker's, or one made here), and a claim
 * whose request failed without an answer (a network error, a timeout, a 5xx) is sent again with the
 * same id, which answers the claim the first request made, if it made one, with the same runs and
 * tokens. A claim whose answer was lost is then not stranded under leases nobody renews.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  type ClaimedRun,
  type ClaimRunsParams,
  type Clock,
  type ClockSample,
  type CompleteRunsAnswer,
  type Completion,
  type EndedLease,
  estimateOffset,
  type FailRunAnswer,
  type FailRunParams,
  type HeartbeatLease,
  type HeartbeatRunsAnswer,
  hasReport,
  LeaseLostError,
  type LeaseSource,
  MAX_HTTP_CLAIM_RUNS,
  MAX_HTTP_HEARTBEAT_LEASES,
  RESULT_TEXT_MAX_CHARS,
  type RunReport,
  SystemClock,
} from '../core/index.js';
import { TockClient } from './client.js';
import { ResultBatcher } from './result-batcher.js';
import type { ResultOptions } from './results.js';
import { TockApiError, TockConnectionError } from './transport.js';
import type { LeaseReport, ResultOutcome, WorkerReport } from './types.js';

export interface HttpLeaseSourceOptions {
  /** The server, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /**
   * The worker these leases are for: claims, heartbeats and reports go under it. Default
   * `worker-<random>`; a `Worker` built on this source takes it as its own id.
   */
  workerId?: string;
  /** A `worker` (or admin) key of the tenant whose runs to work. */
  key?: string;
  /** How long a claim waits on the server for work when none is ready, ms. Default 20000. */
  waitMs?: number;
  /** Per-request timeout of heartbeats, results and releases, ms. Default 30000. Claims: `claimTimeoutMs`. */
  timeoutMs?: number;
  /** The worker's clock, which lease expiries are converted to. Default the system clock. */
  clock?: Clock;
  /**
   * How long a claim may take beyond its long-poll wait before it is given up and sent again with
   * its claim id, ms. Default 5000 (`DEFAULT_CLAIM_TIMEOUT_MS`). Keep it well under the lease: a
   * claim answered late holds runs whose leases are running out.
   */
  claimTimeoutMs?: number;
  /**
   * How long a result waits for others to join its request, ms (0–1000; default 10,
   * `DEFAULT_RESULT_LINGER_MS`): fewer, larger requests (at 1,000 runs/s about 80 instead of 300 a
   * second) for a few ms more before a result is recorded. 0 sends what is handed in within one turn.
   */
  resultLingerMs?: number;
}

/** The default of `resultLingerMs`, ms. */
export const DEFAULT_RESULT_LINGER_MS = 10;

/** The default of `claimTimeoutMs`, ms. */
export const DEFAULT_CLAIM_TIMEOUT_MS = 5000;

/** How many times a claim whose request failed is sent again with the same claim id. */
export const CLAIM_RETRIES = 3;
/**
 * No retry is sent once this long has passed since the claim was first sent, ms: by then the
 * leases it may have made are a third gone (of the default 30 s), and the reaper's to take back.
 */
export const CLAIM_RETRY_WINDOW_MS = 10_000;
/** The pause before the second retry, ms, doubling for each later one; the first goes at once. */
export const CLAIM_RETRY_BACKOFF_MS = 200;
/** The clock offset a worker reports is estimated from this many of its latest round trips. */
const CLOCK_SAMPLES = 8;

const lost = (err: unknown) => err instanceof TockApiError && err.code === 'lease_lost';

/** What a handler reported that its result carries, if anything. */
const reportOf = (r: RunReport): LeaseReport | undefined =>
  hasReport(r) ? { progress: r.progress, logs: r.logs, logsDropped: r.logsDropped } : undefined;

/** The server keeps the last 64 KiB of an output, an error or a stack: no more is sent. */
const tail = (s: string) => (s.length > RESULT_TEXT_MAX_CHARS ? s.slice(-RESULT_TEXT_MAX_CHARS) : s);

/**
 * A server from before `started_at` and `error_stack` refusing them as unknown fields (its bodies
 * are strict): the request is sent again without them.
 */
const olderServer = (err: unknown) =>
  err instanceof TockApiError && err.status === 400 && /additional propert/i.test(err.message);

/** A failed request that may have claimed runs whose answer was lost: worth retrying with its id. */
const retryable = (err: unknown) =>
  err instanceof TockConnectionError || (err instanceof TockApiError && err.status >= 500);

/** A claim over HTTP: the server's clock is `now`, and the key's tenant the only tenant. */
export type HttpClaimParams = Omit<ClaimRunsParams, 'now' | 'tenantId' | 'tenants'> & {
  now?: number;
  tenantId?: string;
  tenants?: readonly string[];
};

export class HttpLeaseSource implements LeaseSource {
  readonly client: TockClient;
  readonly workerId: string;
  /** Claims long-poll (`waitMs` > 0): the worker claims again at once after a short answer. */
  readonly waitsForWork: boolean;
  /** The server's claim route takes at most this many runs a claim. */
  readonly maxClaimRuns = MAX_HTTP_CLAIM_RUNS;
  private readonly waitMs: number;
  private readonly clock: Clock;
  private readonly claimTimeoutMs: number;
  /** The server's clock minus this worker's, as the last answer told (0 before any). */
  private serverOffsetMs = 0;
  /** The latest round trips with the server's `server_time`: the worker's clock offset, for `tock status`. */
  private samples: ClockSample[] = [];
  /** False once the server answered that it has no worker reports (an older server): none is sent again. */
  private reports = true;
  /** False once the server refused `started_at` and `error_stack` (an older server): not sent again. */
  private sendsAttemptDetails = true;
  /** False once the server answered that it has no batch route for results (an older server). */
  private batchesResults = true;
  private readonly results: ResultBatcher;

  /**
   * Sends a result with the fields older servers do not know (`started_at`, `error_stack`), or,
   * once a server has refused them, without: a worker upgraded before its server still records its
   * results (with the claim's time as their start, and no stack).
   */
  private async withDetails<T>(send: (details: boolean) => Promise<T>): Promise<T> {
    if (!this.sendsAttemptDetails) return send(false);
    try {
      return await send(true);
    } catch (err) {
      if (!olderServer(err)) throw err;
      const answer = await send(false);
      this.sendsAttemptDetails = false;
      return answer;
    }
  }

  constructor(o: HttpLeaseSourceOptions) {
    // Not validated here: the server refuses a bad id, and a `Worker` checks its own.
    this.workerId = o.workerId ?? `worker-${randomBytes(6).toString('hex')}`;
    this.client = new TockClient({ url: o.url, key: o.key, timeoutMs: o.timeoutMs });
    this.waitMs = o.waitMs ?? 20_000;
    this.waitsForWork = this.waitMs > 0;
    const lingerMs = o.resultLingerMs ?? DEFAULT_RESULT_LINGER_MS;
    if (!(Number.isFinite(lingerMs) && lingerMs >= 0 && lingerMs <= 1000))
      throw new RangeError('resultLingerMs must be from 0 to 1000 ms');
    this.clock = o.clock ?? new SystemClock();
    this.results = new ResultBatcher((batch) => this.sendResults(batch), { clock: this.clock, lingerMs });
    this.claimTimeoutMs = o.claimTimeoutMs ?? DEFAULT_CLAIM_TIMEOUT_MS;
  }

  /**
   * Asks the server whether this worker may work: an empty lease heartbeat, which needs what every
   * lease request needs (a key with the `worker` role, or admin). Throws what the request threw.
   */
  async checkAccess(): Promise<void> {
    await this.client.heartbeatMany(this.workerId, []);
  }

  /**
   * A server expiry on this worker's clock. Each answer bounds the server's offset from above
   * (`server_time` − when its request left): this answer's bound, or the least of the latest
   * answers' (recorded by `noteServerTime` first), whichever gives the later expiry; both are never
   * later than the real one. The least bound keeps a long-poll's wait (its `server_time` is the
   * wait later) from being taken out of the leases it answers.
   *
   * The latest answers' bound holds only while the offset has not moved up since (the worker's
   * clock stepped back, the server's forward, another server node's clock): this answer bounds the
   * offset from below too (`server_time` − now, as the server read its clock before it answered),
   * and a least bound under that is stale, not used. What is left undetected is at most the
   * answer's way back, not the step.
   */
  private localExpiry(expiresAt: string, serverTime: string, sentAt: number): Date {
    const server = Date.parse(expiresAt);
    const thisAnswer = sentAt + (server - Date.parse(serverTime));
    const atLeast = Date.parse(serverTime) - this.clock.nowMs();
    const fresh = this.samples.length > 0 && this.serverOffsetMs >= atLeast;
    return new Date(fresh ? Math.max(thisAnswer, server - this.serverOffsetMs) : thisAnswer);
  }

  /**
   * Notes the server's clock of an answer to a request sent at `sentAt`. Each answer bounds the
   * offset from above (the server read its clock after the request left); the offset used is the
   * least bound of the latest answers, so a long-poll's answer (whose server time is its wait
   * later) does not move handler starts late.
   */
  private noteServerTime(serverTime: string, sentAt: number): void {
    const referenceMs = Date.parse(serverTime);
    const receivedMs = this.clock.nowMs();
    if (!Number.isFinite(referenceMs) || receivedMs < sentAt) return;
    // One round trip, for the offset of handler starts and the one reported to `tock status`.
    this.samples.push({ sentMs: sentAt, referenceMs, receivedMs });
    if (this.samples.length > CLOCK_SAMPLES) this.samples.shift();
    this.serverOffsetMs = Math.min(...this.samples.map((x) => x.referenceMs - x.sentMs));
  }

  /** A handler start on this worker's clock as an instant on the server's, or undefined. */
  private serverInstant(ms: number | null | undefined): string | undefined {
    if (ms === undefined || ms === null) return undefined;
    const d = new Date(ms + this.serverOffsetMs);
    return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
  }

  /**
   * Claims for this source's worker: `p.workerId` must be its `workerId` (refused otherwise: the
   * claims would be another worker's, and the heartbeats and reports this one's).
   */
  async claimRuns(p: HttpClaimParams): Promise<ClaimedRun[]> {
    if (p.workerId !== this.workerId)
      throw new RangeError(`this lease source serves worker ${this.workerId}, not ${p.workerId}`);
    const claimId = p.claimId ?? randomUUID();
    const firstSentAt = this.clock.nowMs();
    let answer: Awaited<ReturnType<TockClient['claimLeases']>>;
    let sentAt: number;
    for (let retry = 0; ; retry++) {
      sentAt = this.clock.nowMs();
      // A retry does not wait for work: it is after the answer of a claim already made.
      const waitMs = retry === 0 ? this.waitMs : 0;
      try {
        answer = await this.client.claimLeases({
          workerId: p.workerId,
          pool: p.pool,
          max: Math.min(p.max, MAX_HTTP_CLAIM_RUNS),
          handlers: p.handlers ? [...p.handlers] : undefined,
          waitMs,
          aheadMs: p.aheadMs,
          signal: p.signal,
          claimId,
          timeoutMs: waitMs + this.claimTimeoutMs,
        });
        break;
      } catch (err) {
        if (p.signal?.aborted) return []; // the worker is stopping: the server claims nothing for us
        const elapsed = this.clock.nowMs() - firstSentAt;
        if (!retryable(err) || retry >= CLAIM_RETRIES || elapsed >= CLAIM_RETRY_WINDOW_MS) throw err;
        if (retry > 0) await this.clock.sleep(CLAIM_RETRY_BACKOFF_MS * 2 ** (retry - 1), p.signal);
      }
    }
    this.noteServerTime(answer.server_time, sentAt);
    return answer.runs.map((r) => ({
      runId: r.run_id,
      tenantId: r.tenant_id,
      jobId: r.job_id,
      handler: r.handler,
      payload: r.payload,
      pool: r.pool,
      scheduledFor: new Date(r.scheduled_for),
      attempt: r.attempt,
      maxAttempts: r.max_attempts,
      leaseToken: r.lease_token,
      leaseExpiresAt: this.localExpiry(r.lease_expires_at, answer.server_time, sentAt),
      availableAt: new Date(r.available_at),
      timeoutMs: r.timeout_seconds === null ? null : r.timeout_seconds * 1000,
    }));
  }

  /**
   * Renews every lease, each with what its handler reported (progress, log lines): in one request,
   * or, when the worker holds more than the server takes in one (1000), in requests of at most that
   * many, one after another.
   */
  async heartbeatRuns(p: { leases: readonly HeartbeatLease[] }): Promise<HeartbeatRunsAnswer> {
    const renewed: HeartbeatRunsAnswer['renewed'] = [];
    const lost: string[] = [];
    for (let at = 0; at < p.leases.length; at += MAX_HTTP_HEARTBEAT_LEASES) {
      const sentAt = this.clock.nowMs();
      const answer = await this.client.heartbeatMany(
        this.workerId,
        p.leases.slice(at, at + MAX_HTTP_HEARTBEAT_LEASES),
      );
      this.noteServerTime(answer.server_time, sentAt);
      for (const r of answer.renewed)
        renewed.push({
          runId: r.run_id,
          leaseExpiresAt: this.localExpiry(r.lease_expires_at, answer.server_time, sentAt),
        });
      lost.push(...answer.lost);
    }
    return { renewed, lost };
  }

  /**
   * Results go in batches: those handed in within one turn of the event loop (the worker's batch of
   * completions and the failures beside it) are one `POST /v1/runs/complete`. A server without that
   * route (older) gets one request per result.
   */
  private async sendResults(results: ResultOptions[]): Promise<ResultOutcome[]> {
    if (this.batchesResults) {
      try {
        const answer = await this.client.completeMany(results);
        if (!Array.isArray(answer?.results)) {
          throw new TockApiError(200, 'bad_response', 'POST /v1/runs/complete answered without results');
        }
        return answer.results;
      } catch (err) {
        if (!(err instanceof TockApiError && err.status === 404 && /no route/.test(err.message))) throw err;
        this.batchesResults = false;
      }
    }
    return Promise.all(results.map((r) => this.sendOne(r)));
  }

  /** One result by the single-run route (an older server), its answer as a batch outcome. */
  private async sendOne(r: ResultOptions): Promise<ResultOutcome> {
    try {
      const answer = await this.withDetails((details) =>
        this.client.complete(r.runId, {
          ...r,
          errorStack: details ? r.errorStack : undefined,
          startedAt: details ? r.startedAt : undefined,
          // A server without the batch route does not know reports on results either.
          report: undefined,
        }),
      );
      return { run_id: r.runId, outcome: 'done', status: 200, ...answer };
    } catch (err) {
      if (!lost(err)) throw err;
      return { run_id: r.runId, outcome: 'lost', status: 409 };
    }
  }

  async completeRuns(p: { leases: readonly Completion[] }): Promise<CompleteRunsAnswer> {
    const outcomes = await Promise.all(
      p.leases.map((l) =>
        this.results.submit({
          runId: l.runId,
          leaseToken: l.leaseToken,
          status: 'succeeded',
          output: l.output === null || l.output === undefined ? undefined : tail(l.output),
          startedAt: this.serverInstant(l.startedAt),
          report: reportOf(l),
        }),
      ),
    );
    const completed: string[] = [];
    const lostRuns: string[] = [];
    for (const o of outcomes) (o.outcome === 'done' ? completed : lostRuns).push(o.run_id);
    return { completed, lost: lostRuns };
  }

  async failRun(p: Omit<FailRunParams, 'now' | 'tenantId'>): Promise<FailRunAnswer> {
    const answer = await this.results.submit({
      runId: p.runId,
      leaseToken: p.leaseToken,
      status: 'failed',
      error: tail(p.error),
      errorStack: p.errorStack === undefined || p.errorStack === null ? undefined : tail(p.errorStack),
      startedAt: this.serverInstant(p.startedAt),
      retryable: p.permanent !== true,
      retryAfterMs: p.retryAfterMs,
      output: p.output === null || p.output === undefined ? undefined : tail(p.output),
      report: reportOf(p),
    });
    if (answer.outcome !== 'done')
      throw new LeaseLostError(`the lease on run ${p.runId} is not live`, { run_id: p.runId });
    return {
      state: answer.state === 'dead' ? ('dead' as const) : ('pending' as const),
      attempt: answer.attempt ?? 0,
      availableAt: answer.available_at ? new Date(answer.available_at) : null,
    };
  }

  /**
   * Reports this worker for `tock status` (the worker calls it every few seconds): its pool,
   * handlers, runs held, and its clock's offset from the server's as measured from the answers'
   * `server_time`. An older server without the route (404) is not asked again.
   */
  async touchNode(p: { nodeId: string; info?: Record<string, unknown> }): Promise<void> {
    if (!this.reports) return;
    const info = p.info ?? {};
    const report: WorkerReport = {};
    if (typeof info.pool === 'string') report.pool = info.pool;
    if (Array.isArray(info.handlers) && info.handlers.length <= 100)
      report.handlers = info.handlers as string[];
    if (typeof info.concurrency === 'number') report.concurrency = info.concurrency;
    if (typeof info.in_flight === 'number') report.in_flight = info.in_flight;
    if (this.samples.length > 0) {
      const { offsetMs, uncertaintyMs } = estimateOffset(this.samples);
      report.clock_offset_ms = offsetMs;
      report.clock_uncertainty_ms = uncertaintyMs;
    }
    const sentAt = this.clock.nowMs();
    try {
      const answer = await this.client.reportWorker(p.nodeId, report);
      this.noteServerTime(answer.server_time, sentAt);
    } catch (err) {
      if (err instanceof TockApiError && err.status === 404) {
        this.reports = false;
        return;
      }
      throw err;
    }
  }

  /** This worker stops on purpose: the server forgets it (`tock status` no longer lists it). */
  async leaveNode(p: { nodeId: string }): Promise<void> {
    if (!this.reports) return;
    await this.client.leaveWorker(p.nodeId);
  }

  async releaseRuns(p: { leases: readonly EndedLease[]; reason: string }): Promise<{ released: string[] }> {
    const released: string[] = [];
    await Promise.all(
      p.leases.map(async (l) => {
        try {
          await this.withDetails((details) =>
            this.client.release(l.runId, {
              leaseToken: l.leaseToken,
              reason: p.reason,
              startedAt: details ? this.serverInstant(l.startedAt) : undefined,
            }),
          );
          released.push(l.runId);
        } catch (err) {
          if (!lost(err)) throw err;
        }
      }),
    );
    return { released };
  }
}
