/**
 * The worker's lease operations over a Tock server's HTTP API, so a `Worker` runs the same
 * handlers against a remote server as against the database. Claims long-poll (`wait_ms`) when
 * nothing is ready; heartbeats renew every lease in one request; results go under the lease token.
 *
 * Lease expiries are the server's instants. The worker judges them by its own clock, so each one is
 * converted: local expiry = when the request was sent + (expiry − the server's `server_time`). The
 * request left before the server read its clock, so a converted expiry is never later than the
 * real one, whatever the skew between the two machines.
 */
import { TockApiError, TockClient } from '../client/index.js';
import { type Clock, LeaseLostError, SystemClock } from '../core/index.js';
import type { ClaimedRun, Completion, LeaseRef } from '../store/index.js';
import type { LeaseStore } from './worker.js';

export interface HttpLeaseStoreOptions {
  /** The server, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** A `worker` (or admin) key of the tenant whose runs to work. */
  key?: string;
  /** How long a claim waits on the server for work when none is ready, ms. Default 20000. */
  waitMs?: number;
  /** Per-request timeout (a long-poll adds its wait), ms. Default 30000. */
  timeoutMs?: number;
  /** The worker's clock, which lease expiries are converted to. Default the system clock. */
  clock?: Clock;
}

const lost = (err: unknown) => err instanceof TockApiError && err.code === 'lease_lost';

export class HttpLeaseStore implements LeaseStore {
  readonly client: TockClient;
  private readonly waitMs: number;
  private readonly clock: Clock;
  private workerId = 'worker';

  constructor(o: HttpLeaseStoreOptions) {
    this.client = new TockClient({ url: o.url, key: o.key, timeoutMs: o.timeoutMs });
    this.waitMs = o.waitMs ?? 20_000;
    this.clock = o.clock ?? new SystemClock();
  }

  /** A server expiry on this worker's clock, given when the request was sent and the server's time. */
  private localExpiry(expiresAt: string, serverTime: string, sentAt: number): Date {
    return new Date(sentAt + (Date.parse(expiresAt) - Date.parse(serverTime)));
  }

  async claimRuns(p: {
    workerId: string;
    pool: string;
    max: number;
    handlers?: readonly string[];
    aheadMs?: number;
    signal?: AbortSignal;
  }): Promise<ClaimedRun[]> {
    this.workerId = p.workerId;
    let answer: Awaited<ReturnType<TockClient['claimLeases']>>;
    const sentAt = this.clock.nowMs();
    try {
      answer = await this.client.claimLeases({
        workerId: p.workerId,
        pool: p.pool,
        max: Math.min(p.max, 500),
        handlers: p.handlers ? [...p.handlers] : undefined,
        waitMs: this.waitMs,
        aheadMs: p.aheadMs,
        signal: p.signal,
      });
    } catch (err) {
      if (p.signal?.aborted) return []; // the worker is stopping: the server claims nothing for us
      throw err;
    }
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

  async heartbeatRuns(p: { leases: readonly LeaseRef[] }) {
    if (p.leases.length === 0) return { renewed: [], lost: [] };
    const sentAt = this.clock.nowMs();
    const answer = await this.client.heartbeatMany(this.workerId, p.leases);
    return {
      renewed: answer.renewed.map((r) => ({
        runId: r.run_id,
        leaseExpiresAt: this.localExpiry(r.lease_expires_at, answer.server_time, sentAt),
      })),
      lost: answer.lost,
    };
  }

  /** One request per run (the API completes runs one at a time), sent concurrently. */
  async completeRuns(p: { leases: readonly Completion[] }) {
    const completed: string[] = [];
    const lostRuns: string[] = [];
    await Promise.all(
      p.leases.map(async (l) => {
        try {
          await this.client.complete(l.runId, {
            leaseToken: l.leaseToken,
            status: 'succeeded',
            output: l.output ?? undefined,
          });
          completed.push(l.runId);
        } catch (err) {
          if (!lost(err)) throw err;
          lostRuns.push(l.runId);
        }
      }),
    );
    return { completed, lost: lostRuns };
  }

  async failRun(p: {
    runId: string;
    leaseToken: string;
    error: string;
    permanent?: boolean;
    retryAfterMs?: number;
    output?: string | null;
  }) {
    try {
      const answer = await this.client.complete(p.runId, {
        leaseToken: p.leaseToken,
        status: 'failed',
        error: p.error.length > 65_536 ? p.error.slice(-65_536) : p.error,
        retryable: p.permanent !== true,
        retryAfterMs: p.retryAfterMs,
        output: p.output ?? undefined,
      });
      return {
        state: answer.state === 'dead' ? ('dead' as const) : ('pending' as const),
        attempt: answer.attempt ?? 0,
        availableAt: answer.available_at ? new Date(answer.available_at) : null,
      };
    } catch (err) {
      if (lost(err)) throw new LeaseLostError(`the lease on run ${p.runId} is not live`, { run_id: p.runId });
      throw err;
    }
  }

  async releaseRuns(p: { leases: readonly LeaseRef[]; reason: string }) {
    const released: string[] = [];
    await Promise.all(
      p.leases.map(async (l) => {
        try {
          await this.client.release(l.runId, { leaseToken: l.leaseToken, reason: p.reason });
          released.push(l.runId);
        } catch (err) {
          if (!lost(err)) throw err;
        }
      }),
    );
    return { released };
  }
}
