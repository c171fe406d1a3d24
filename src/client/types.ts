/**
 * The HTTP API's bodies and answers as TypeScript types, in the API's own snake_case. They mirror
 * `src/api/schemas.ts` (the contract); the client knows only the contract, not the server's code.
 * The fields of jobs, runs, attempts and keys are derived from core's field tables, as the schemas are.
 * Instants are ISO-8601 strings in UTC.
 */
import type {
  ApiKeyJson,
  AttemptJson,
  JobBodyJson,
  JobDefinitionJson,
  LeasedRunJson,
  MisfirePolicy,
  Role,
  RunJson,
  RunState,
} from '../core/index.js';

export type { MisfirePolicy, Role, RunState };

/**
 * `PUT /v1/jobs/{job_id}`: a job definition (the id is in the path). Unset fields take the server's
 * defaults. Its fields, their bounds and defaults are core's `JOB_FIELDS`.
 */
export interface JobBody extends Omit<JobBodyJson, 'job_id'> {}

/** What a job is doing (`Job.state`). */
export type JobState = 'active' | 'paused' | 'finished';

export type UpsertChange = 'created' | 'updated' | 'unchanged';

/** A job: its definition (`JOB_FIELDS`; `misfire` is any string here) and what it is doing. */
export interface Job extends JobDefinitionJson {
  /** The threshold that applies: the misfire policy acts once the next slot is this many seconds late. */
  misfire_after_seconds: number;
  /** `false` while paused. */
  enabled: boolean;
  /**
   * `active`: slots to come; `paused`: none until resumed; `finished`: no slot left (a one-shot
   * that fired, or a schedule that can no longer be evaluated).
   */
  state: JobState;
  /** The next slot not yet materialised; `null` while paused and once finished. */
  next_run_at: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

/** The answer to `PUT /v1/jobs/{job_id}`: the job and what the upsert did. */
export interface UpsertedJob extends Job {
  change: UpsertChange;
}

export interface JobList {
  jobs: Job[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  next_cursor: string | null;
}

/** An attempt of a run: its fields are core's `ATTEMPT_FIELDS`. */
export interface Attempt extends AttemptJson {}

/** A run: its fields are core's `RUN_FIELDS`. */
export interface Run extends RunJson {}

export interface RunWithAttempts extends Run {
  /** What holds a pending, due run (a limit, its job's overlap or cap, no live worker); else null. */
  waiting_for: string | null;
  /** The latest attempt's progress (`ctx.progress`), or null; its log lines are on the attempt. */
  progress: number | null;
  /** That progress report's message, or null. */
  progress_message: string | null;
  attempts: Attempt[];
}

/** A run in a list; a list of pending runs (`state: 'pending'`) also says what holds each. */
export interface ListedRun extends Run {
  /** Only in a list of pending runs: what holds the run; `null`: nothing, or not due yet. */
  waiting_for?: string | null;
}

export interface RunList {
  runs: ListedRun[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  next_cursor: string | null;
}

/** A run handed to a worker under a lease (`POST /v1/leases`): its fields are core's `LEASED_RUN_FIELDS`. */
export interface LeasedRun extends LeasedRunJson {}

export interface LeaseAnswer {
  runs: LeasedRun[];
  /** The outcomes of the results the claim carried, in order (absent when it carried none). */
  results?: ResultOutcome[];
  /** The server's clock when it answered: convert lease expiries to your clock with it. */
  server_time: string;
}

export interface HeartbeatAnswer {
  lease_expires_at: string;
  server_time: string;
}

/**
 * What a handler reported since the last heartbeat (`ctx.progress`, `ctx.log`), sent with its
 * lease: at most 100 lines of 1,000 characters and a message of 200 (more is refused, 400).
 */
export interface LeaseReport {
  /** The latest progress: replaces the attempt's. Default: unchanged. */
  progress?: { value: number; message?: string | null } | null;
  /** Log lines since the last report, oldest first: appended (the attempt keeps its last 100). */
  logs?: readonly string[];
  /** Lines dropped before they could be sent: added to the attempt's count. Default 0. */
  logsDropped?: number;
}

export interface WorkerHeartbeatAnswer {
  renewed: { run_id: string; lease_expires_at: string }[];
  /** Runs whose lease is no longer the caller's: stop working on them. */
  lost: string[];
  server_time: string;
}

export interface StateAnswer {
  /** After `complete`: `succeeded`, `pending` (a retry is scheduled) or `dead`. */
  state: string;
  /** After a failure: the attempt the run is on now. */
  attempt?: number;
  /** After a retried failure: when the run is claimable again. */
  available_at?: string | null;
}

/** What became of one result of a batch (`POST /v1/runs/complete`, or a claim's `results`). */
export interface ResultOutcome {
  run_id: string;
  /**
   * `done`: written; `lost`: the lease is not live; `not_found`: no such run in your tenant;
   * `conflict`: the run id was in the batch more than once. Nothing is written unless `done`.
   */
  outcome: 'done' | 'lost' | 'not_found' | 'conflict';
  /** What the single-run route would answer: 200, 404 or 409. */
  status: number;
  /** When done: `succeeded`, or for a failure `pending` (a retry) or `dead`. */
  state?: string;
  /** For a failure done: the attempt the run is on now. */
  attempt?: number;
  /** For a retried failure: when the run is claimable again. */
  available_at?: string | null;
  /** When not done: the code (`lease_lost`, `not_found`, `duplicate_run`) and a message. */
  error?: { code: string; message: string };
}

export interface CompleteManyAnswer {
  /** One per result sent, in order. */
  results: ResultOutcome[];
  server_time: string;
}

/**
 * `PUT /v1/limits/{key}`: a limit's whole definition: a `rate` with its `burst`, a
 * `max_concurrency`, or both. A field left out is unset (PUT replaces).
 */
export interface LimitBody {
  /**
   * Tokens added per second, above 0; a run takes one when it is claimed, and at most
   * max(burst, ceil(rate)) runs start in any one second. With `burst`.
   */
  rate?: number | null;
  /** Most tokens the bucket holds (a new limit starts full), at least 1. With `rate`. */
  burst?: number | null;
  /** Most runs holding a slot at once. Unset: no cap. */
  max_concurrency?: number | null;
}

/** A limit: a name jobs list in `limits`, or the tenant's own `tenant:<tenant>`. */
export interface Limit {
  /** The limit's key: a name, or `tenant:<tenant>`. */
  key: string;
  /** Tokens per second; `null`: no rate. */
  rate: number | null;
  /** Bucket size; `null`: no rate. */
  burst: number | null;
  /** Most runs holding a slot at once; `null`: no cap. */
  max_concurrency: number | null;
  /**
   * What a claim could take when the server answered: the bucket's tokens (may be fractional), but
   * no more than the room left in the one-second window; `null`: no rate.
   */
  tokens: number | null;
  /** Slots held by running runs. */
  in_use: number;
  /** When the limit was created. */
  created_at: string;
  /** When it was last replaced. */
  updated_at: string;
}

/** A limit as it is read (`GET /v1/limits`, `GET /v1/limits/{key}`): with the runs it holds back. */
export interface LimitState extends Limit {
  /**
   * Queued runs due when the server answered that this limit holds back while it is exhausted (no
   * whole token, or every slot in use); 0 while it is not (`tock_limit_held_runs` of `/metrics`).
   */
  held: number;
  /** The count read the tenant's 10,000 longest-due queued runs and stopped: `held` is a lower bound. */
  held_capped: boolean;
}

/** A page of the tenant's limits (`GET /v1/limits`). */
export interface LimitList {
  /** By key; jobs' own caps show on the job, not here. */
  limits: LimitState[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  next_cursor: string | null;
}

/** An API key (never its secret): its fields are core's `API_KEY_FIELDS`. */
export interface ApiKey extends ApiKeyJson {}

/** A new key: the secret `key` is shown this once. */
export interface CreatedKey extends ApiKey {
  key: string;
}

export interface KeyList {
  keys: ApiKey[];
}

/** `GET /v1/whoami`: the caller's tenant, role and what the role may do. */
export interface WhoAmI {
  tenant_id: string;
  role: Role;
  /** The key's id; null in open mode. */
  key_id: string | null;
  /** `keys`: requests need a key; `open`: none (`tock dev`, `tock server --insecure`). */
  auth: 'keys' | 'open';
  /** Of `read`, `operate`, `work`, `admin`, `cluster`. */
  permissions: string[];
}

/** Every error answer: `{error: {code, message, run_id?}}`. */
export interface ErrorBody {
  error: { code: string; message: string; run_id?: string };
}

/** `PUT /v1/workers/{worker_id}`: what a remote worker reports of itself for `tock status`. */
export interface WorkerReport {
  /** The pool it claims from. Default `default`. */
  pool?: string;
  /** The handlers it runs (at most 100); unset: any handler of its pool. */
  handlers?: string[];
  /** Runs it executes at once, 1–1000. */
  concurrency?: number;
  /** Runs it holds now (running or held for a slot). */
  in_flight?: number;
  /** The server's clock minus the worker's, ms, as the worker measured it from `server_time`. */
  clock_offset_ms?: number;
  /** Half the round trip of that measurement, ms. */
  clock_uncertainty_ms?: number;
}

/** A node as `GET /v1/status` shows it. */
export interface StatusNode {
  /** A remote worker's is `<tenant>/<worker_id>`. */
  node_id: string;
  /** `scheduler` or `worker`. */
  role: string;
  /** A remote worker's tenant; null for a cluster node (a scheduler, or a worker on the database). */
  tenant_id: string | null;
  started_at: string;
  last_seen_at: string;
  /** Seen within its own liveness window. */
  live: boolean;
  clock_offset_ms: number | null;
  clock_uncertainty_ms: number | null;
  /** Shard leases it holds (live only). */
  shards: number;
  info: Record<string, unknown>;
}

export interface StatusAnswer {
  server_time: string;
  /** `cluster` (a cluster-admin key): every node, shards and backlog. `tenant`: the caller's remote workers. */
  scope: 'cluster' | 'tenant';
  /** One page of nodes, by role then newest first. */
  nodes: StatusNode[];
  /** The next page of nodes; null on the last. */
  next_cursor: string | null;
  /** Scope `cluster` only. */
  shards?: { count: number; owned: number; unowned: number; by_owner: Record<string, number[]> };
  /** Scope `cluster` only. */
  backlog?: {
    due_jobs: number;
    ready_runs: number;
    /** Ready runs by pool and priority class, the deepest first (at most 100). */
    queues: { pool: string; priority: number; ready: number }[];
    /** Pairs past the list. */
    queues_more: number;
  };
  /**
   * Claimable runs no live worker serves (no live worker has their pool, handler and tenant):
   * `runs` and `groups` count all, `items` lists the longest waiting groups. Absent from older servers.
   */
  unserved?: {
    runs: number;
    groups: number;
    items: { tenant_id: string; pool: string; handler: string; runs: number; since: string }[];
  };
}

/** What `POST /v1/runs/replay` did: a count (`dry_run`), or one batch replayed. */
export interface ReplayDeadAnswer {
  dry_run: boolean;
  /** Dry run: the dead runs that match, counted up to 100,000; otherwise those this call found. */
  matching: number;
  /** Dry run: more than 100,000 match. */
  more_matching: boolean;
  /** Runs replayed by this call. */
  replayed: number;
  /** Runs found dead that were no longer dead when written (replayed or pruned meanwhile). */
  skipped: number;
  replayed_run_ids: string[];
  /** Send back as `cursor` to go on after this batch; `null` when no match follows. */
  next_cursor: string | null;
}

/** What `POST /v1/jobs/{job_id}/backfill` did. */
export interface BackfillAnswer {
  /** Runs created: slots of the range that had none. */
  created: number;
  /** Slots of the range that already had a run, left as they were. */
  existing: number;
  /** The range's first slot; null when it holds none. */
  first_slot: string | null;
  /** The range's last slot; null when it holds none. */
  last_slot: string | null;
}

export interface BulkJobsAnswer {
  jobs: { job_id: string; change: 'created' | 'updated' | 'unchanged' }[];
  created: number;
  updated: number;
  unchanged: number;
}

/** The states a finished run can be in, each with its own retention. */
export type RetentionState = 'succeeded' | 'dead' | 'cancelled' | 'skipped';

/**
 * `PUT /v1/retention`: how long runs that ended in each state are kept after they ended, a
 * duration from `1s` to `366d` (e.g. `7d`, `12h`) or `forever`. A state left out takes the default.
 */
export type RetentionBody = Partial<Record<RetentionState, string>>;

/** The tenant's retention (`GET` and `PUT /v1/retention`). */
export interface TenantRetention {
  /** In force for the tenant's runs (a job's `retention` overrides it for its runs). */
  retention: Record<RetentionState, string>;
  /** What the tenant set; the other states take the defaults. */
  set: RetentionBody;
  /** The built-in defaults. */
  defaults: Record<RetentionState, string>;
}

/** `POST /v1/runs/prune`: what one call deleted (or, dry, would). */
export interface PruneAnswer {
  dry_run: boolean;
  /** Runs deleted with their attempts, by the state they ended in. */
  runs: Record<RetentionState, number>;
  /** Runs looked at. */
  scanned: number;
  /** Runs scheduled before this instant were looked at; `null`: every run is kept forever. */
  horizon: string | null;
  /** Send it back to go on; `null`: done. */
  cursor: string | null;
}

/** What a webhook notification may be sent: see `docs/notifications.md`. */
export type NotificationEvent = 'run.dead' | 'job.misfired' | 'run.late' | 'worker.lost';

/**
 * `PUT /v1/notifications/{name}`: a notification's whole definition (a field left out is unset:
 * PUT replaces, the secret included).
 */
export interface NotificationBody {
  /** Where each event is POSTed: an http(s) URL under the server's `--notify-allow`. */
  url: string;
  /** The events to send, one or more. */
  events: NotificationEvent[];
  /** With `run.late` (required there, refused otherwise): how long past due a queued run is late (`10m`). */
  late_after?: string | null;
  /** 16 to 200 characters: deliveries are then signed (`X-Tock-Signature`). Never answered back. */
  secret?: string | null;
}

/** A webhook notification, as answered: never its secret. */
export interface Notification {
  name: string;
  url: string;
  events: NotificationEvent[];
  /** When a queued run is late (`run.late`); `null` without it. */
  late_after: string | null;
  /** Whether deliveries are signed. */
  secret_set: boolean;
  created_at: string;
  updated_at: string;
}

/** A page of the tenant's notifications (`GET /v1/notifications`), by name. */
export interface NotificationList {
  notifications: Notification[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  next_cursor: string | null;
}

/** One delivery of a notification's log. */
export interface Delivery {
  /** The body's `id` and the `X-Tock-Delivery` header. */
  delivery_id: string;
  event: NotificationEvent;
  /** `pending`: to be tried (again); `delivered`: answered 2xx; `failed`: given up. */
  state: 'pending' | 'delivered' | 'failed';
  /** Attempts made. */
  attempts: number;
  /** The last attempt's HTTP status; `null`: no answer (yet). */
  last_status: number | null;
  /** Why the last attempt did not deliver; `null` when it did (or none was made). */
  last_error: string | null;
  /** The event's data, as sent. */
  data: Record<string, unknown>;
  /** When the event happened. */
  created_at: string;
  last_attempt_at: string | null;
  /** The next attempt, while pending. */
  next_attempt_at: string | null;
  /** When it was delivered or given up. */
  finished_at: string | null;
}

/** A page of a notification's deliveries, newest first. */
export interface DeliveryList {
  deliveries: Delivery[];
  /** Pass as `cursor` for the next (older) page; `null` on the last page. */
  next_cursor: string | null;
}

/** One bucket of `GET /v1/delay`: the ended runs whose slot is in [start, start + step). */
export interface DelayBucket {
  start: string;
  /** Ended runs (succeeded or dead) in the bucket. */
  runs: number;
  /** Nearest-rank median, 99th percentile and largest delay, seconds; null without runs. */
  p50: number | null;
  p99: number | null;
  max: number | null;
}

/** `GET /v1/delay`: the tenant's scheduling delay over time, from run history. */
export interface DelayAnswer {
  from: string;
  to: string;
  step_seconds: number;
  pool: string | null;
  job_id: string | null;
  /** Every bucket of the range in order, those without runs included. */
  buckets: DelayBucket[];
}
