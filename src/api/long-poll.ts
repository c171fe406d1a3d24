/**
 * Waiting long-polls of `POST /v1/leases` (`wait_ms`). A waiting request does not poll the
 * database: it sleeps until it is woken, and claims again only then. It is woken by
 *
 * - a notification that runs may have become claimable: one LISTEN per server process
 *   ({@link RunWakeups}, fed by the store's `listen`) fans out to every waiting long-poll of the
 *   process (the notification names no pool or tenant, so each re-claims once);
 * - the instant a run it knows of (materialised, not yet available) becomes claimable
 *   (`nextAvailableAt`);
 * - a fallback interval, {@link LONG_POLL_FALLBACK_MS} while the listener is up (a lost
 *   notification costs at most that much latency), {@link LONG_POLL_UNLISTENED_MS} while it is down
 *   or absent;
 * - the end of its `wait_ms`, when it claims a last time and answers what it has (maybe nothing).
 *
 * Invariants: at most `longPollsPerKey` waiting long-polls per API key and `longPollsPerTenant`
 * per tenant (more answer 429 `rate_limited` with `Retry-After`, before touching the database);
 * every claim is counted against a quota of the tenant: the request's first claim against the
 * request quota (the token its request took), each re-claim after a wake against the tenant's
 * re-claim quota, a bucket of its own of the same size (when it is empty, the re-claim waits for a
 * token). A notification names no tenant, so one tenant's activity wakes every tenant's waiters:
 * were their re-claims paid from the request quota, one tenant could spend another's and have its
 * heartbeats and completions refused. A client that went away gets no claim.
 */
import { type Clock, idleSleepMs, type RunWakeups, TockError, type Wakeups } from '../core/index.js';
import type { HttpLimits } from './limits.js';
import type { TenantQuota } from './plugins/quota.js';

/** Longest sleep of a waiting long-poll while notifications arrive, ms. */
export const LONG_POLL_FALLBACK_MS = 5000;
/** Longest sleep of a waiting long-poll while the listener is down (or the app has none), ms. */
export const LONG_POLL_UNLISTENED_MS = 1000;
/**
 * Shortest sleep between two claims of one long-poll, ms: a run that is claimable within
 * `ahead_ms` but not for this request (another handler, or another worker took it first) must not
 * make it claim in a loop. (A notification still wakes it at once: a run triggered while it waits
 * is answered without delay. What bounds re-claims after notifications is the re-claim quota.)
 */
export const LONG_POLL_MIN_SLEEP_MS = 100;
/** `Retry-After` of a long-poll refused for the per-key or per-tenant cap, seconds. */
export const LONG_POLL_RETRY_AFTER_S = 5;

// What a waiting long-poll sleeps on: the process's fan-out of notifications, shared with the worker.
export { RunWakeups, type Wakeups } from '../core/index.js';

export interface LongPollRequest<T> {
  tenantId: string;
  /** The API key (null in open mode, where the tenant's cap is the only one). */
  keyId: string | null;
  waitMs: number;
  /** Runs that become claimable within this many ms count as claimable now. */
  aheadMs: number;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  claim: () => Promise<T[]>;
  /** The earliest future instant a run of the pool becomes claimable, or null. */
  nextAvailableAt: () => Promise<Date | null>;
}

export class LongPolls {
  /** Aborted when the server closes: waiting long-polls answer what they have (nothing) at once. */
  private readonly closing = new AbortController();
  private readonly perKey = new Map<string, number>();
  private readonly perTenant = new Map<string, number>();

  constructor(
    private readonly o: {
      clock: Clock;
      /** Each tenant's re-claim quota (not its request quota: see the module's header). */
      reclaims: TenantQuota;
      limits: Pick<HttpLimits, 'longPollsPerKey' | 'longPollsPerTenant'>;
      wakeups?: Wakeups;
    },
  ) {}

  /** Claims at once, then (with `waitMs`) waits for runs as the header says; the runs, maybe none. */
  async run<T>(r: LongPollRequest<T>): Promise<T[]> {
    if (r.waitMs <= 0 || this.closing.signal.aborted) return r.signal.aborted ? [] : await r.claim();
    const leave = this.enter(r.tenantId, r.keyId);
    try {
      const signal = AbortSignal.any([r.signal, this.closing.signal]);
      return await this.wait({ ...r, signal });
    } finally {
      leave();
    }
  }

  private async wait<T>(r: LongPollRequest<T>): Promise<T[]> {
    const { clock, reclaims, wakeups } = this.o;
    const deadline = clock.nowMs() + r.waitMs;
    for (;;) {
      // A client that went away gets no runs: a claim now would strand them under a lease nobody
      // renews until the reaper takes them back.
      if (r.signal.aborted) return [];
      const runs = await r.claim();
      if (runs.length > 0 || deadline - clock.nowMs() <= 0 || r.signal.aborted) return runs;
      const next = await r.nextAvailableAt();
      const now = clock.nowMs();
      const ms = idleSleepMs({
        now,
        next,
        aheadMs: r.aheadMs,
        intervalMs: wakeups?.listening ? LONG_POLL_FALLBACK_MS : LONG_POLL_UNLISTENED_MS,
        minMs: LONG_POLL_MIN_SLEEP_MS,
        leftMs: Math.max(0, deadline - now),
      });
      if (wakeups) await wakeups.wait(ms, r.signal);
      else await clock.sleep(ms, r.signal);
      // Each re-claim counts against the tenant's re-claim quota; with none left, it waits for a token.
      for (let short = reclaims.take(r.tenantId); short > 0; short = reclaims.take(r.tenantId)) {
        const left = deadline - clock.nowMs();
        if (left <= 0 || r.signal.aborted) return [];
        await clock.sleep(Math.min(short, left), r.signal);
      }
    }
  }

  /** Ends every wait (the server is closing): each waiting long-poll answers at once, with no runs. */
  close(): void {
    this.closing.abort();
  }

  /** Counts a waiting long-poll in; the returned function counts it out. Throws 429 past a cap. */
  private enter(tenantId: string, keyId: string | null): () => void {
    const key = keyId === null ? null : `${tenantId}\u0000${keyId}`;
    const { longPollsPerKey, longPollsPerTenant } = this.o.limits;
    const tenantCount = this.perTenant.get(tenantId) ?? 0;
    const keyCount = key === null ? 0 : (this.perKey.get(key) ?? 0);
    if (tenantCount >= longPollsPerTenant || (key !== null && keyCount >= longPollsPerKey)) {
      const which =
        tenantCount >= longPollsPerTenant ? `tenant (${longPollsPerTenant})` : `key (${longPollsPerKey})`;
      throw new TockError('rate_limited', `too many waiting long-polls for this ${which}; retry later`, {
        retry_after_s: LONG_POLL_RETRY_AFTER_S,
      });
    }
    this.perTenant.set(tenantId, tenantCount + 1);
    if (key !== null) this.perKey.set(key, keyCount + 1);
    return () => {
      const t = (this.perTenant.get(tenantId) ?? 1) - 1;
      if (t > 0) this.perTenant.set(tenantId, t);
      else this.perTenant.delete(tenantId);
      if (key === null) return;
      const k = (this.perKey.get(key) ?? 1) - 1;
      if (k > 0) this.perKey.set(key, k);
      else this.perKey.delete(key);
    };
  }
}

/** A store's `listen`: calls `onWake` when runs may have become claimable, reports its state. */
export type RunListen = (
  onWake: () => void,
  onListening: (up: boolean) => void,
) => Promise<() => Promise<void>>;

/**
 * Starts the process's one listener for claimable runs, feeding `wakeups`; logs when it goes down
 * (long-polls then poll every {@link LONG_POLL_UNLISTENED_MS}) and when it is back. Returns the stop.
 */
export async function listenForRuns(
  listen: RunListen,
  wakeups: RunWakeups,
  logger: { warn(o: object, m: string): void; info(o: object, m: string): void },
): Promise<() => Promise<void>> {
  return listen(
    () => wakeups.wake(),
    (up) => {
      if (up === wakeups.listening) return;
      wakeups.listening = up;
      if (up) logger.info({}, 'listening for claimable runs; waiting long-polls wake on notifications');
      else
        logger.warn(
          { poll_ms: LONG_POLL_UNLISTENED_MS },
          'the listener for claimable runs is down; waiting long-polls poll until it is back',
        );
    },
  );
}
