/**
 * `TockClient`: a typed client of the HTTP API over `fetch`, one method per `/v1` endpoint. It
 * knows only the contract (`types.ts`): bodies and answers are the API's snake_case JSON, passed
 * through as they are. Every error answer becomes a `TockApiError` carrying the status and the
 * envelope's stable `code`; a server that cannot be reached (or does not answer in time) is a
 * `TockConnectionError` naming the URL (both made in `transport.ts`). The client never retries:
 * whether a request may be repeated is the caller's decision (a trigger is safe to repeat only
 * with an idempotency key).
 */

import { reportJson } from './report-json.js';
import { type CompleteOptions, type ResultOptions, resultBody } from './results.js';
import { type RequestOptions, request, requestWithStatus } from './transport.js';
import type {
  ApiKey,
  BackfillAnswer,
  BulkJobsAnswer,
  CompleteManyAnswer,
  CreatedKey,
  DelayAnswer,
  DeliveryList,
  HeartbeatAnswer,
  Job,
  JobBody,
  JobList,
  LeaseAnswer,
  LeaseReport,
  Limit,
  LimitBody,
  LimitList,
  LimitState,
  Notification,
  NotificationBody,
  NotificationList,
  PruneAnswer,
  ReplayDeadAnswer,
  RetentionBody,
  Role,
  Run,
  RunList,
  RunState,
  RunWithAttempts,
  StateAnswer,
  StatusAnswer,
  TenantRetention,
  UpsertedJob,
  WhoAmI,
  WorkerHeartbeatAnswer,
  WorkerReport,
} from './types.js';

/** Default per-request timeout, ms. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Added to a lease long-poll's `waitMs` for its timeout, ms. */
const LONG_POLL_MARGIN_MS = 10_000;

export interface TockClientOptions {
  /** Base URL of a Tock server, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  url: string;
  /** API key, sent as `Authorization: Bearer <key>`. Default: none (a server without keys). */
  key?: string;
  /** How long one request may take, ms; a lease long-poll gets its `waitMs` on top. Default 30000. */
  timeoutMs?: number;
  /** The `fetch` to use. Default: the global `fetch`. */
  fetch?: typeof fetch;
}

/**
 * `GET /v1/delay`: the range (`from` to `to`, ISO-8601 instants; default the server's last hour),
 * the bucket length (`step`, a duration such as `1m`; default 1m) and one pool or job. At most
 * 1440 buckets over at most 7 days.
 */
export interface DelayOptions {
  from?: string;
  to?: string;
  step?: string;
  pool?: string;
  jobId?: string;
}

/** A page of a list: `limit` 1–500 (server default 50), `cursor` from the previous page's `next_cursor`. */
export interface PageOptions {
  limit?: number;
  cursor?: string | null;
}

export interface ListJobsOptions extends PageOptions {
  /** Only jobs whose id starts with this text (taken literally). Default: any. */
  q?: string;
  /** Only jobs in this state. Default: any. */
  state?: 'active' | 'paused' | 'finished';
  /** Only jobs of this pool. Default: any. */
  pool?: string;
  /** Only jobs of this handler. Default: any. */
  handler?: string;
}

/** Which dead runs `replayDeadRuns` takes, and how. Every filter is optional; all given must hold. */
export interface ReplayDeadOptions {
  /** Only this job's dead runs. Default: any job. */
  jobId?: string;
  /** Only dead runs whose last error holds this text (any case, taken literally). Default: any. */
  errorContains?: string;
  /** Only slots at or after this instant. Default: no bound. */
  slotFrom?: string | Date;
  /** Only slots before this instant. Default: no bound. */
  slotTo?: string | Date;
  /** Count the matching dead runs (up to 100,000) and replay none. Default false. */
  dryRun?: boolean;
  /** Most runs this call replays, 1-500. Default 500. */
  limit?: number;
  /** The last answer's `next_cursor`: go on after its batch. Default: from the newest slot. */
  cursor?: string | null;
}

export interface ListRunsOptions extends PageOptions {
  /** Only runs in this state (`dead`: the dead-letter view). */
  state?: RunState;
  /** Only this job's runs. */
  jobId?: string;
}

export interface TriggerOptions {
  /** The slot to run; an ISO-8601 instant or a `Date`. Default: now (the server's clock). */
  scheduledFor?: string | Date;
  /**
   * This run's payload in place of the job's: any JSON value, at most 64 KiB serialised (checked as
   * a job's payload is). Default: the job's.
   */
  payload?: unknown;
  /** Makes a retried trigger safe: the same key and body return the first answer again. */
  idempotencyKey?: string;
}

/** A backfill's range, `[from, to)`: at most 10,000 slots of the job's schedule. */
export interface BackfillOptions {
  /** The range's first instant (included); an ISO-8601 instant or a `Date`. */
  from: string | Date;
  /** The range's end (excluded); an ISO-8601 instant or a `Date`. */
  to: string | Date;
  /** Replays the first answer for a repeated request with the same key and range. */
  idempotencyKey?: string;
}

export interface ClaimOptions {
  /** Unique per worker process. */
  workerId: string;
  /** Pool to claim from. Default `default`. */
  pool?: string;
  /** Claim only runs of these handlers. Default: any. */
  handlers?: string[];
  /** Most runs to claim, 1–500. Default 1. */
  max?: number;
  /** Long-poll: wait up to this long for a run when none is ready, ms (≤ 30000). Default 0. */
  waitMs?: number;
  /**
   * Also claim runs that become claimable within this many ms (≤ 10000), to start each at its
   * `available_at` with the claim's round trip already done. Default 0.
   */
  aheadMs?: number;
  /** Aborts the request (a worker shutting down). */
  signal?: AbortSignal;
  /**
   * Makes the claim retry-safe: a uuid made per claim and sent again when that claim is retried
   * (to any server). While the claim it names is live, the answer is that claim's runs and leases
   * again, and nothing more is claimed. Default: none.
   */
  claimId?: string;
  /** This request's timeout, ms. Default the client's timeout plus the wait (and a margin for it). */
  timeoutMs?: number;
  /**
   * Results of earlier runs (up to 500), written before the claim; their outcomes are the answer's
   * `results`. A claim with results does not long-poll.
   */
  results?: readonly ResultOptions[];
}

const segment = (value: string) => encodeURIComponent(value);
/** An instant as the API takes it. */
const instantText = (at: string | Date) => (at instanceof Date ? at.toISOString() : at);
/** The `Idempotency-Key` header, when there is a key. */
const idempotencyHeader = (key: string | undefined): Record<string, string> =>
  key === undefined ? {} : { 'idempotency-key': key };

export class TockClient {
  /** The base URL, without a trailing slash. */
  readonly url: string;
  private readonly key: string | undefined;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: TockClientOptions) {
    let parsed: URL;
    try {
      parsed = new URL(options.url);
    } catch {
      throw new TypeError(`server URL "${options.url}" is not a URL; expected e.g. http://127.0.0.1:8080`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new TypeError(`server URL "${options.url}" must start with http:// or https://`);
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('timeoutMs must be positive');
    this.url = `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
    this.key = options.key === '' ? undefined : options.key;
    this.timeoutMs = timeoutMs;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
  }

  // -- jobs ---------------------------------------------------------------------------------------

  /** Creates or replaces a job; `change` says whether it was `created`, `updated` or `unchanged`. */
  putJob(jobId: string, body: JobBody): Promise<UpsertedJob> {
    return this.request('PUT', `/v1/jobs/${segment(jobId)}`, { body });
  }

  /** Creates or updates up to 1000 jobs (each with its `job_id`) at once: all or nothing. */
  putJobs(jobs: (JobBody & { job_id: string })[]): Promise<BulkJobsAnswer> {
    return this.request('PUT', '/v1/jobs', { body: { jobs } });
  }

  getJob(jobId: string): Promise<Job> {
    return this.request('GET', `/v1/jobs/${segment(jobId)}`);
  }

  listJobs(options: ListJobsOptions = {}): Promise<JobList> {
    const { limit, cursor, q, state, pool, handler } = options;
    return this.request('GET', '/v1/jobs', { query: { limit, cursor, q, state, pool, handler } });
  }

  /** Deletes a job; its pending runs are cancelled, its history is kept. */
  async deleteJob(jobId: string): Promise<void> {
    await this.request('DELETE', `/v1/jobs/${segment(jobId)}`);
  }

  pauseJob(jobId: string): Promise<Job> {
    return this.request('POST', `/v1/jobs/${segment(jobId)}/pause`);
  }

  resumeJob(jobId: string): Promise<Job> {
    return this.request('POST', `/v1/jobs/${segment(jobId)}/resume`);
  }

  // -- runs ---------------------------------------------------------------------------------------

  /** Creates a run of a job for a slot (default now); `409` if that slot already has a run. */
  triggerRun(jobId: string, options: TriggerOptions = {}): Promise<Run> {
    const at = options.scheduledFor;
    const body: Record<string, unknown> = at === undefined ? {} : { scheduled_for: instantText(at) };
    if (options.payload !== undefined) body.payload = options.payload;
    return this.request('POST', `/v1/jobs/${segment(jobId)}/runs`, {
      body,
      headers: idempotencyHeader(options.idempotencyKey),
    });
  }

  /**
   * Creates the run of every slot of the job's schedule in `[from, to)` that has none (at most
   * 10,000 slots, else `400`); answers how many were created and how many already existed.
   */
  backfillJob(jobId: string, options: BackfillOptions): Promise<BackfillAnswer> {
    return this.request('POST', `/v1/jobs/${segment(jobId)}/backfill`, {
      body: { from: instantText(options.from), to: instantText(options.to) },
      headers: idempotencyHeader(options.idempotencyKey),
    });
  }

  /** A job's runs, newest slot first. */
  listJobRuns(jobId: string, options: PageOptions = {}): Promise<RunList> {
    return this.request('GET', `/v1/jobs/${segment(jobId)}/runs`, {
      query: { limit: options.limit, cursor: options.cursor },
    });
  }

  /** Runs of the tenant, newest slot first, optionally of one state or job. */
  listRuns(options: ListRunsOptions = {}): Promise<RunList> {
    return this.request('GET', '/v1/runs', {
      query: { state: options.state, job_id: options.jobId, limit: options.limit, cursor: options.cursor },
    });
  }

  /** The tenant's scheduling delay over time, from run history: a bucket per `step` of slots. */
  delay(options: DelayOptions = {}): Promise<DelayAnswer> {
    const { from, to, step, pool, jobId } = options;
    return this.request('GET', '/v1/delay', { query: { from, to, step, pool, job_id: jobId } });
  }

  /** A run with its attempts. */
  getRun(runId: string): Promise<RunWithAttempts> {
    return this.request('GET', `/v1/runs/${segment(runId)}`);
  }

  /** Requeues a dead run; `409` for a run in any other state. */
  replayRun(runId: string): Promise<Run> {
    return this.request('POST', `/v1/runs/${segment(runId)}/replay`);
  }

  /**
   * Replays the dead runs a filter picks, up to `limit` (500) a call, newest slot first; `dryRun`
   * counts them instead. Pass `next_cursor` back as `cursor` until it is `null`.
   */
  replayDeadRuns(options: ReplayDeadOptions = {}): Promise<ReplayDeadAnswer> {
    const o = options;
    const body = {
      job_id: o.jobId,
      error_contains: o.errorContains,
      slot_from: o.slotFrom === undefined ? undefined : instantText(o.slotFrom),
      slot_to: o.slotTo === undefined ? undefined : instantText(o.slotTo),
      dry_run: o.dryRun,
      limit: o.limit,
      cursor: o.cursor ?? undefined,
    };
    return this.request('POST', '/v1/runs/replay', { body });
  }

  /**
   * Cancels a pending or running run (a running one's lease is revoked: its worker's next heartbeat
   * aborts the handler); the run, `cancelled`, with its attempts. `409` for a finished run.
   */
  cancelRun(runId: string): Promise<RunWithAttempts> {
    return this.request('POST', `/v1/runs/${segment(runId)}/cancel`);
  }

  // -- workers ------------------------------------------------------------------------------------

  /** Claims up to `max` ready runs under leases, long-polling up to `waitMs` when none is ready. */
  claimLeases(options: ClaimOptions): Promise<LeaseAnswer> {
    const body: Record<string, unknown> = { worker_id: options.workerId };
    if (options.pool !== undefined) body.pool = options.pool;
    if (options.handlers !== undefined) body.handlers = options.handlers;
    if (options.max !== undefined) body.max = options.max;
    if (options.waitMs !== undefined) body.wait_ms = options.waitMs;
    if (options.aheadMs !== undefined && options.aheadMs > 0) body.ahead_ms = options.aheadMs;
    if (options.claimId !== undefined) body.claim_id = options.claimId;
    if (options.results !== undefined && options.results.length > 0)
      body.results = options.results.map((r) => ({ run_id: r.runId, ...resultBody(r) }));
    return this.request('POST', '/v1/leases', {
      body,
      timeoutMs:
        options.timeoutMs ??
        this.timeoutMs + (options.waitMs ?? 0) + (options.waitMs ? LONG_POLL_MARGIN_MS : 0),
      signal: options.signal,
    });
  }

  /** Renews one lease, with its handler's report; a `TockApiError` `lease_lost` (409) once it is not live. */
  heartbeat(runId: string, leaseToken: string, report: LeaseReport = {}): Promise<HeartbeatAnswer> {
    return this.request('POST', `/v1/runs/${segment(runId)}/heartbeat`, {
      body: { lease_token: leaseToken, ...reportJson(report) },
    });
  }

  /** Renews a worker's leases (each with its handler's report) in one request; `lost`: those it no longer holds. */
  heartbeatMany(
    workerId: string,
    leases: readonly ({ runId: string; leaseToken: string } & LeaseReport)[],
  ): Promise<WorkerHeartbeatAnswer> {
    return this.request('POST', `/v1/workers/${segment(workerId)}/heartbeat`, {
      body: { leases: leases.map((l) => ({ run_id: l.runId, lease_token: l.leaseToken, ...reportJson(l) })) },
    });
  }

  /**
   * Reports the worker for `tock status` (its pool, handlers, runs held and clock offset); a worker
   * sends it every few seconds. Its claims and heartbeats list it too, with less detail.
   */
  reportWorker(workerId: string, report: WorkerReport): Promise<{ server_time: string }> {
    return this.request('PUT', `/v1/workers/${segment(workerId)}`, { body: report });
  }

  /** The worker leaves on purpose (a clean stop): `tock status` no longer lists it. */
  async leaveWorker(workerId: string): Promise<void> {
    await this.request('DELETE', `/v1/workers/${segment(workerId)}`);
  }

  /** Reports a run's result under its lease; `409 lease_lost` when the lease is not live. */
  complete(runId: string, options: CompleteOptions): Promise<StateAnswer> {
    return this.request('POST', `/v1/runs/${segment(runId)}/complete`, { body: resultBody(options) });
  }

  /**
   * Reports up to 500 results in one request, each under its own lease: one outcome per result, in
   * order (`done`, or `lost`, `not_found`, `conflict` with nothing written for it).
   */
  completeMany(
    results: readonly ResultOptions[],
    options: { timeoutMs?: number } = {},
  ): Promise<CompleteManyAnswer> {
    return this.request('POST', '/v1/runs/complete', {
      body: { results: results.map((r) => ({ run_id: r.runId, ...resultBody(r) })) },
      timeoutMs: options.timeoutMs,
    });
  }

  /** Gives a run back without spending an attempt (worker shutdown); `lease_lost` (409) when it is not ours. */
  release(
    runId: string,
    options: { leaseToken: string; reason?: string; startedAt?: string },
  ): Promise<StateAnswer> {
    const body: Record<string, unknown> = { lease_token: options.leaseToken };
    if (options.reason !== undefined) body.reason = options.reason;
    if (options.startedAt !== undefined) body.started_at = options.startedAt;
    return this.request('POST', `/v1/runs/${segment(runId)}/release`, { body });
  }

  // -- limits -------------------------------------------------------------------------------------

  /**
   * Creates or replaces a limit (`created` tells which); a field left out is unset. The tenant's
   * own key, `tenant:<tenant>`, needs an admin key.
   */
  async putLimit(key: string, body: LimitBody): Promise<Limit & { created: boolean }> {
    const { status, body: limit } = await this.requestWithStatus<Limit>('PUT', `/v1/limits/${segment(key)}`, {
      body,
    });
    return { ...limit, created: status === 201 };
  }

  /** One limit, with its tokens as of the answer, the slots in use and the runs it holds back. */
  getLimit(key: string): Promise<LimitState> {
    return this.request('GET', `/v1/limits/${segment(key)}`);
  }

  /** The tenant's limits, by key. */
  listLimits(options: PageOptions = {}): Promise<LimitList> {
    return this.request('GET', '/v1/limits', { query: { limit: options.limit, cursor: options.cursor } });
  }

  /** Deletes a limit; `409` while a job lists it. */
  async deleteLimit(key: string): Promise<void> {
    await this.request('DELETE', `/v1/limits/${segment(key)}`);
  }

  // -- notifications ------------------------------------------------------------------------------

  /** Creates or replaces a webhook notification (`created` tells which); needs an admin key. */
  async putNotification(name: string, body: NotificationBody): Promise<Notification & { created: boolean }> {
    const path = `/v1/notifications/${segment(name)}`;
    const { status, body: n } = await this.requestWithStatus<Notification>('PUT', path, { body });
    return { ...n, created: status === 201 };
  }

  /** One notification (whether a secret is set, never the secret). */
  getNotification(name: string): Promise<Notification> {
    return this.request('GET', `/v1/notifications/${segment(name)}`);
  }

  /** The tenant's notifications, by name. */
  listNotifications(options: PageOptions = {}): Promise<NotificationList> {
    return this.request('GET', '/v1/notifications', {
      query: { limit: options.limit, cursor: options.cursor },
    });
  }

  /** Deletes a notification with its delivery log; needs an admin key. */
  async deleteNotification(name: string): Promise<void> {
    await this.request('DELETE', `/v1/notifications/${segment(name)}`);
  }

  /** A notification's recent deliveries, newest first. */
  listDeliveries(name: string, options: PageOptions = {}): Promise<DeliveryList> {
    return this.request('GET', `/v1/notifications/${segment(name)}/deliveries`, {
      query: { limit: options.limit, cursor: options.cursor },
    });
  }

  // -- retention ----------------------------------------------------------------------------------

  /** The tenant's retention: in force, set, and the defaults. */
  getRetention(): Promise<TenantRetention> {
    return this.request('GET', '/v1/retention');
  }

  /** Replaces the tenant's retention (admin only); a state left out takes the default. */
  putRetention(body: RetentionBody): Promise<TenantRetention> {
    return this.request('PUT', '/v1/retention', { body });
  }

  /**
   * Deletes the tenant's finished runs past their retention (admin only), a bounded part per call:
   * call again with the answer's `cursor` until it is null. `dry_run` counts instead.
   */
  pruneRuns(options: { dry_run?: boolean; cursor?: string } = {}): Promise<PruneAnswer> {
    return this.request('POST', '/v1/runs/prune', { body: options });
  }

  // -- keys ---------------------------------------------------------------------------------------

  /** Creates a key in the caller's tenant (admin only); the answer's `key` is the secret, shown once. */
  createKey(options: { role: Role; name?: string }): Promise<CreatedKey> {
    const body: Record<string, unknown> = { role: options.role };
    if (options.name !== undefined) body.name = options.name;
    return this.request('POST', '/v1/keys', { body });
  }

  listKeys(): Promise<{ keys: ApiKey[] }> {
    return this.request('GET', '/v1/keys');
  }

  /** Revokes a key; requests made with it are refused from then on. */
  revokeKey(keyId: string): Promise<ApiKey> {
    return this.request('DELETE', `/v1/keys/${segment(keyId)}`);
  }

  /** Who this client's key is: its tenant, role and permissions (any key that may read). */
  whoami(): Promise<WhoAmI> {
    return this.request('GET', '/v1/whoami');
  }

  /**
   * One page of the status (an operator or admin key): the tenant's remote workers, or with a
   * cluster-admin key every node, the shard ownership and the backlog. Follow `next_cursor` for
   * the next page of nodes (default 100 a page, at most 500).
   */
  status(options: PageOptions = {}): Promise<StatusAnswer> {
    return this.request('GET', '/v1/status', { query: { limit: options.limit, cursor: options.cursor } });
  }

  // -- transport ----------------------------------------------------------------------------------

  private request<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    return request<T>(this.connection(), method, path, o);
  }

  private requestWithStatus<T>(method: string, path: string, o: RequestOptions = {}) {
    return requestWithStatus<T>(this.connection(), method, path, o);
  }

  private connection() {
    return { url: this.url, key: this.key, timeoutMs: this.timeoutMs, fetch: this.fetchImpl };
  }
}
