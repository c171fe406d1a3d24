/**
 * The answers of the HTTP API the console reads, as docs/http-api.md describes them (only the
 * fields it shows). The console knows the API by this contract alone, not by Tock's source.
 */

export type Permission = 'read' | 'operate' | 'work' | 'admin' | 'cluster';

export interface WhoAmI {
  tenant_id: string;
  role: string;
  key_id: string | null;
  auth: 'keys' | 'open';
  /** Of the `Permission`s; a name this console does not know grants nothing here. */
  permissions: string[];
}

export interface Job {
  job_id: string;
  schedule: string;
  timezone: string;
  handler: string;
  payload: unknown;
  priority: number;
  max_attempts: number;
  pool: string;
  misfire: string;
  overlap: string;
  max_concurrency: number | null;
  limits: string[];
  enabled: boolean;
  state: 'active' | 'paused' | 'finished';
  next_run_at: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

export type RunState = 'pending' | 'running' | 'succeeded' | 'dead' | 'cancelled' | 'skipped';

export interface Run {
  run_id: string;
  job_id: string;
  scheduled_for: string;
  state: RunState;
  attempt: number;
  max_attempts: number;
  handler: string;
  payload: unknown;
  pool: string;
  priority: number;
  available_at: string;
  lease_owner: string | null;
  lease_expires_at: string | null;
  last_error: string | null;
  created_at: string;
  started_at: string | null;
  claimed_at: string | null;
  finished_at: string | null;
  /** In a list of pending runs only: what holds the run; null: nothing, or not due yet. */
  waiting_for?: string | null;
}

export interface Attempt {
  attempt: number;
  worker_id: string;
  started_at: string;
  claimed_at: string | null;
  finished_at: string | null;
  outcome: string | null;
  error: string | null;
  error_stack: string | null;
  output: string | null;
  progress: number | null;
  progress_message: string | null;
  logs: string[];
  logs_dropped: number;
  reported_at: string | null;
}

export interface RunWithAttempts extends Run {
  waiting_for: string | null;
  progress: number | null;
  progress_message: string | null;
  attempts: Attempt[];
}

export interface JobList {
  jobs: Job[];
  next_cursor: string | null;
}

export interface RunList {
  runs: Run[];
  next_cursor: string | null;
}

/** `POST /v1/runs/replay`: a count (`dry_run`), or one batch replayed. */
export interface ReplayDeadAnswer {
  dry_run: boolean;
  matching: number;
  more_matching: boolean;
  replayed: number;
  skipped: number;
  replayed_run_ids: string[];
  next_cursor: string | null;
}

export interface StatusNode {
  node_id: string;
  role: string;
  tenant_id: string | null;
  started_at: string;
  last_seen_at: string;
  live: boolean;
  clock_offset_ms: number | null;
  shards: number;
}

export interface Status {
  server_time: string;
  scope: 'cluster' | 'tenant';
  nodes: StatusNode[];
  next_cursor: string | null;
  shards?: { count: number; owned: number; unowned: number };
  /** Absent from older servers. */
  unserved?: {
    runs: number;
    groups: number;
    items: { tenant_id: string; pool: string; handler: string; runs: number; since: string }[];
  };
  backlog?: {
    due_jobs: number;
    ready_runs: number;
    queues: { pool: string; priority: number; ready: number }[];
    queues_more: number;
  };
}

/** One bucket of `GET /v1/delay`: the ended runs whose slot is in [start, start + step), seconds. */
export interface DelayBucket {
  start: string;
  runs: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

export interface DelayAnswer {
  from: string;
  to: string;
  step_seconds: number;
  pool: string | null;
  job_id: string | null;
  buckets: DelayBucket[];
}

/** A limit as `GET /v1/limits` answers it, with the runs it holds back now. */
export interface Limit {
  key: string;
  rate: number | null;
  burst: number | null;
  max_concurrency: number | null;
  tokens: number | null;
  in_use: number;
  held: number;
  held_capped: boolean;
  updated_at: string;
}

export interface LimitList {
  limits: Limit[];
  next_cursor: string | null;
}
