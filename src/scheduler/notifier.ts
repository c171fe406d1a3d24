/**
 * The notifier: delivers the webhook notifications of `notification_deliveries` (the outbox the
 * store's fail, reap and tick statements write in the transaction of the change), scans for late
 * runs, and prunes the delivery log. A `Periodic` unit like the reaper and the pruner.
 *
 * Delivery is at least once. A step claims due deliveries for the places free among
 * `concurrency` attempts in flight (`FOR UPDATE SKIP LOCKED`; the claim counts the attempt and
 * moves the row's next attempt past `timeoutMs`), so several scheduler nodes deliver side by side
 * without sending one row twice at once, and a node that dies mid-request leaves its rows due
 * again when that lease runs out: no maintenance lease is needed.
 *
 * Fair between tenants: the step does not wait for its attempts. Each runs on its own and frees
 * its place when it ends (and wakes the loop), so a receiver that answers late holds only the
 * places of its own deliveries in flight: at most `perNotification` of one notification and
 * `perTenant` of one tenant, the rest go on to others. The claim takes turns (`claimDeliveries`):
 * the oldest due delivery of every notification before the second of any, the walk of the
 * notifications going on after the last one served, so one tenant's thousands of due deliveries
 * do not hold back another's one. Each is a `POST` of JSON to the notification's URL, checked again against the
 * server's allow-list (it may have shrunk since the notification was written), redirects not
 * followed, the answer bounded by `timeoutMs` of the injected clock. A 2xx answer delivers; any
 * other answer, a timeout or a failed connection is tried again with exponential backoff
 * (`decideDelivery` in core) until `maxAttempts` or `maxAgeMs` after the event, then the delivery
 * is `failed` in its log. The body is the same on every attempt (`id` lets the receiver drop a
 * repeat).
 *
 * Headers: `X-Tock-Event`, `X-Tock-Delivery` (the id), `X-Tock-Attempt`, `X-Tock-Timestamp` (Unix
 * seconds of this attempt, from the injected clock), and with a secret `X-Tock-Signature:
 * sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed by the secret>`: a receiver recomputes it
 * over the raw body, compares in constant time and refuses an old timestamp (replay).
 *
 * Late runs: every `lateScanMs` the step walks the notifications that want `run.late`
 * (`scanLateRuns`: each locked while scanned, so nodes share the walk), a bounded page at a time.
 */
import { createHmac } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import {
  type Clock,
  checkAllowedUrl,
  DEFAULT_DELIVERY_POLICY,
  type DeliveryPolicy,
  type DeliveryState,
  decideDelivery,
  Periodic,
  sanitiseText,
} from '../core/index.js';
import type { DueDelivery, NotificationKey, NotificationStore } from '../store/index.js';

export type NotifierStore = Pick<
  NotificationStore,
  'claimDeliveries' | 'finishDelivery' | 'scanLateRuns' | 'pruneDeliveries'
>;

/** What one attempt sends. */
export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
}

/** Sends a request; resolves to the answer's status, rejects on a connection failure or an abort. */
export type WebhookSend = (request: WebhookRequest) => Promise<number>;

export interface NotifierOptions {
  store: NotifierStore;
  clock: Clock;
  logger: Logger;
  /** URL prefixes deliveries may go to (the server's notification allow-list). */
  allow: readonly string[];
  /**
   * Consulted before each scan for late runs: a reason not to trust the clock skips it (a clock
   * running ahead would call runs late that are not). Deliveries go on.
   */
  refusal?: () => string | null;
  /** Pause between steps when nothing is due, ms. Default 1000. */
  intervalMs?: number;
  /** Most attempts in flight at once on this node, all tenants. Default 20. */
  concurrency?: number;
  /** Most attempts of one notification in flight at once. Default 4. */
  perNotification?: number;
  /** Most attempts of one tenant's notifications in flight at once. Default 10. */
  perTenant?: number;
  /** Most time one attempt may take, ms. Default 10000. */
  timeoutMs?: number;
  /** Retries: backoff, attempts, age. Default `DEFAULT_DELIVERY_POLICY`. */
  policy?: Partial<DeliveryPolicy>;
  /** Time between scans for late runs, ms. Default 30000. */
  lateScanMs?: number;
  /** Late runs one scan reads (and reports) per notification at most; the next scan goes on from there. Default 500. */
  lateRuns?: number;
  /** How long a delivered or failed delivery stays in the log, ms. Default 7 days. */
  keepMs?: number;
  /** The HTTP transport. Default: `fetch`, redirects not followed. */
  send?: WebhookSend;
}

/** One attempt's outcome: `pending` means it will be tried again. */
export interface DeliveryAttempt {
  deliveryId: string;
  tenantId: string;
  name: string;
  event: string;
  attempt: number;
  state: DeliveryState;
  status: number | null;
  error: string | null;
}

export interface NotifierEvents {
  delivery: [attempt: DeliveryAttempt];
  /** A scan for late runs went through every notification; `written` deliveries. */
  'late-scan': [scan: { written: number }];
  error: [err: unknown];
}

/** Notifications a late scan locks per transaction, and late runs it reads per notification. */
const LATE_PAGE = 50;
const LATE_RUNS = 500;
/** Pages of notifications one scan walks at most; the next scan goes on from there. */
const LATE_PAGES = 100;
/**
 * Longest a scan walks, ms of the clock: past it the scan stops after its page and the next goes
 * on from there. With each statement bounded (a page of notifications, `lateRuns` index entries of
 * each), a scan is bounded by pages × this page's time too, not only by the page count.
 */
const LATE_SCAN_BUDGET_MS = 10_000;
/** Finished deliveries deleted per step, and how often the log is pruned, ms. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 600_000;
/** Past the timeout, how long a claimed delivery stays off other nodes, ms. */
const CLAIM_MARGIN_MS = 30_000;
/** Longest error text kept in the log. */
const MAX_ERROR_LENGTH = 500;

/** `sha256=<hex>`: the HMAC-SHA256 of `<timestamp>.<body>` keyed by `secret` (`X-Tock-Signature`). */
export function signDelivery(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** The default transport: `fetch`, no redirects followed, the answer's body discarded. */
export const fetchSend: WebhookSend = async (r) => {
  const res = await fetch(r.url, {
    method: 'POST',
    headers: r.headers,
    body: r.body,
    redirect: 'manual',
    signal: r.signal,
  });
  await res.body?.cancel().catch(() => {});
  return res.status;
};

/** An error as one line: `fetch failed: connect ECONNREFUSED 127.0.0.1:9` (fetch puts the why in `cause`). */
function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
}

export class Notifier extends EventEmitter<NotifierEvents> {
  private readonly periodic: Periodic;
  private readonly concurrency: number;
  private readonly perNotification: number;
  private readonly perTenant: number;
  private readonly timeoutMs: number;
  private readonly policy: DeliveryPolicy;
  private readonly lateScanMs: number;
  private readonly lateRuns: number;
  private readonly keepMs: number;
  private readonly send: WebhookSend;
  private nextLateScan = Number.NEGATIVE_INFINITY;
  private nextPrune = Number.NEGATIVE_INFINITY;
  /** The attempts in flight, and how many of each notification (`tenant\u0000name`). */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly busy = new Map<string, number>();
  /** Where the next claim's walk of the notifications starts (null: from the first). */
  private turn: NotificationKey | null = null;
  /** Where a late scan cut off at `LATE_PAGES` stopped (null: the next one starts from the first). */
  private lateAfter: { tenantId: string; name: string } | null = null;

  constructor(private readonly o: NotifierOptions) {
    super();
    this.concurrency = o.concurrency ?? 20;
    this.perNotification = o.perNotification ?? 4;
    this.perTenant = o.perTenant ?? 10;
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.policy = { ...DEFAULT_DELIVERY_POLICY, ...o.policy };
    this.lateScanMs = o.lateScanMs ?? 30_000;
    this.lateRuns = o.lateRuns ?? LATE_RUNS;
    this.keepMs = o.keepMs ?? 7 * 24 * 3600 * 1000;
    this.send = o.send ?? fetchSend;
    this.periodic = new Periodic({
      clock: o.clock,
      intervalMs: o.intervalMs ?? 1000,
      step: () => this.step(),
      onError: (err, failures) => {
        o.logger.error({ err, failures }, 'notifier failed; retrying with backoff');
        if (this.listenerCount('error') > 0) this.emit('error', err);
      },
    });
  }

  /**
   * Late scan and pruning when due, then claims deliveries for the free places and starts them
   * (not waiting for them: each attempt's end wakes the loop for the next claim).
   */
  async step(): Promise<boolean> {
    const now = this.o.clock.nowMs();
    if (now >= this.nextLateScan && !this.o.refusal?.()) {
      this.nextLateScan = now + this.lateScanMs;
      await this.scanLate(now);
    }
    if (now >= this.nextPrune) {
      const pruned = await this.o.store.pruneDeliveries({ before: now - this.keepMs, limit: PRUNE_BATCH });
      // A full batch: more are due; prune again at the next step, so the log cannot outgrow the prune.
      this.nextPrune = pruned >= PRUNE_BATCH ? now : now + PRUNE_EVERY_MS;
    }
    await this.dispatch();
    return false;
  }

  /**
   * Walks the notifications that want `run.late`, a page per transaction, at most `LATE_PAGES` pages
   * and `LATE_SCAN_BUDGET_MS` (bounded: pages × page size, each notification's statement at most
   * `lateRuns` runs read, and in time); a walk cut off there goes on where it stopped at the next scan, so
   * notifications past the first pages are scanned too (by turns).
   */
  async scanLate(now: number): Promise<number> {
    let written = 0;
    let after = this.lateAfter;
    for (let page = 0; page < LATE_PAGES; page++) {
      const r = await this.o.store.scanLateRuns({
        now,
        after,
        notifications: LATE_PAGE,
        runs: this.lateRuns,
      });
      written += r.written;
      after = r.next;
      if (after === null || this.o.clock.nowMs() - now >= LATE_SCAN_BUDGET_MS) break;
    }
    this.lateAfter = after;
    this.emit('late-scan', { written });
    return written;
  }

  /**
   * Claims due deliveries for the free places, starts them, and waits for those it started; how
   * many were claimed. (The loop's step starts them without waiting.)
   */
  async deliverDue(): Promise<number> {
    const started = await this.dispatch();
    await Promise.all(started);
    return started.length;
  }

  /**
   * Claims up to the free places' worth of due deliveries, by turns, and starts each; the attempts
   * started. A claim whose walk reached the last notification, having started after the first, is
   * followed by one from the first (the turn wraps around), so every notification is looked at.
   */
  private async dispatch(): Promise<Promise<void>[]> {
    const started: Promise<void>[] = [];
    for (let leg = 0; leg < 2; leg++) {
      const free = this.concurrency - this.inFlight.size;
      if (free <= 0) break;
      const after = this.turn;
      const { deliveries, next } = await this.o.store.claimDeliveries({
        now: this.o.clock.nowMs(),
        limit: free,
        leaseMs: this.timeoutMs + CLAIM_MARGIN_MS,
        after,
        perNotification: this.perNotification,
        perTenant: this.perTenant,
        busy: [...this.busy].map(([key, count]) => {
          const [tenantId = '', name = ''] = key.split('\u0000');
          return { tenantId, name, count };
        }),
      });
      this.turn = next;
      for (const d of deliveries) started.push(this.launch(d));
      if (after === null || next !== null) break;
    }
    return started;
  }

  /** Runs one attempt in its place; its end frees the place and wakes the loop. Never rejects. */
  private launch(d: DueDelivery): Promise<void> {
    const key = `${d.tenantId}\u0000${d.name}`;
    this.busy.set(key, (this.busy.get(key) ?? 0) + 1);
    const run = this.attempt(d)
      .catch((err: unknown) => {
        // Not recorded (the database failed): the claim runs out and the delivery is due again.
        this.o.logger.error({ err, delivery_id: d.deliveryId }, 'notification attempt not recorded');
        if (this.listenerCount('error') > 0) this.emit('error', err);
      })
      .finally(() => {
        this.inFlight.delete(run);
        const left = (this.busy.get(key) ?? 1) - 1;
        if (left > 0) this.busy.set(key, left);
        else this.busy.delete(key);
        this.periodic.poke();
      });
    this.inFlight.add(run);
    return run;
  }

  private async attempt(d: DueDelivery): Promise<void> {
    const { status, error } = await this.post(d);
    const now = this.o.clock.nowMs();
    const next =
      error !== null && status === null && error.startsWith('refused:')
        ? { state: 'failed' as const, nextAttemptAt: null }
        : decideDelivery({
            attempt: d.attempt,
            status,
            now,
            createdAt: d.createdAt.getTime(),
            policy: this.policy,
          });
    const text = error === null ? null : sanitiseText(error).slice(0, MAX_ERROR_LENGTH);
    await this.o.store.finishDelivery({
      deliveryId: d.deliveryId,
      attempt: d.attempt,
      state: next.state,
      status,
      error: text,
      nextAttemptAt: next.nextAttemptAt,
      now,
    });
    const log = {
      delivery_id: d.deliveryId,
      notification: d.name,
      event: d.event,
      attempt: d.attempt,
      status,
    };
    if (next.state === 'failed') this.o.logger.warn({ ...log, error: text }, 'notification delivery failed');
    this.emit('delivery', {
      deliveryId: d.deliveryId,
      tenantId: d.tenantId,
      name: d.name,
      event: d.event,
      attempt: d.attempt,
      state: next.state,
      status,
      error: text,
    });
  }

  /** One POST, bounded by the timeout; the status, or the error (`refused:` when it was never sent). */
  private async post(d: DueDelivery): Promise<{ status: number | null; error: string | null }> {
    try {
      checkAllowedUrl(d.url, this.o.allow, 'url', "the server's notification");
    } catch (err) {
      return { status: null, error: `refused: ${(err as Error).message}` };
    }
    const body = JSON.stringify({
      id: d.deliveryId,
      event: d.event,
      tenant_id: d.tenantId,
      notification: d.name,
      occurred_at: d.createdAt.toISOString(),
      data: d.data,
    });
    const timestamp = String(Math.floor(this.o.clock.nowMs() / 1000));
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'tock-notifier',
      'x-tock-event': d.event,
      'x-tock-delivery': d.deliveryId,
      'x-tock-attempt': String(d.attempt),
      'x-tock-timestamp': timestamp,
    };
    if (d.secret !== null) headers['x-tock-signature'] = signDelivery(d.secret, timestamp, body);
    const abort = new AbortController();
    const done = new AbortController();
    const timer = this.o.clock.sleep(this.timeoutMs, done.signal).then(() => {
      if (!done.signal.aborted) abort.abort(new Error(`no answer within ${this.timeoutMs} ms`));
    });
    try {
      const status = await this.send({ url: d.url, headers, body, signal: abort.signal });
      return { status, error: status >= 200 && status < 300 ? null : `HTTP ${status}` };
    } catch (err) {
      return { status: null, error: errorText(abort.signal.aborted ? abort.signal.reason : err) };
    } finally {
      done.abort();
      await timer;
    }
  }

  start(): void {
    this.periodic.start();
  }

  /** Stops after the step in flight and the attempts in flight (each ends within the timeout). */
  async stop(): Promise<void> {
    await this.periodic.stop();
    await Promise.all([...this.inFlight]);
  }
}
