-- Tock's core schema: job definitions, the runs materialised from them, one attempt row per
-- claim, and the shard/node tables that scheduler nodes lease. Every timestamp is written by the
-- application from its injected clock; no statement uses now() for a scheduling decision.

CREATE TABLE jobs (
  tenant_id            text        NOT NULL,
  job_id               text        NOT NULL,
  handler              text        NOT NULL,
  payload              jsonb       NOT NULL DEFAULT '{}',
  schedule             text        NOT NULL,
  timezone             text        NOT NULL DEFAULT 'UTC',
  priority             integer     NOT NULL DEFAULT 0,
  max_attempts         integer     NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  backoff_base_seconds double precision NOT NULL DEFAULT 2,
  backoff_cap_seconds  double precision NOT NULL DEFAULT 3600,
  misfire              text        NOT NULL DEFAULT 'fire_once' CHECK (misfire IN ('skip', 'fire_once', 'catch_up')),
  catch_up_limit       integer     NOT NULL DEFAULT 10 CHECK (catch_up_limit >= 1),
  pool                 text        NOT NULL DEFAULT 'default',
  lease_seconds        integer     CHECK (lease_seconds >= 1),
  enabled              boolean     NOT NULL DEFAULT true,
  shard_id             integer     NOT NULL,
  -- The earliest slot not yet materialised; NULL once a one-shot (@at) job has fired.
  next_run_at          timestamptz,
  definition_hash      text        NOT NULL,
  version              integer     NOT NULL DEFAULT 1,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, job_id)
);

-- The due scan: WHERE shard_id = ANY($owned) AND next_run_at <= $horizon ORDER BY next_run_at.
CREATE INDEX jobs_due ON jobs (shard_id, next_run_at) WHERE enabled AND next_run_at IS NOT NULL;

CREATE TABLE runs (
  run_id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id            text        NOT NULL,
  job_id               text        NOT NULL,
  -- The slot: with tenant and job, the run's identity. Handlers key their writes by it.
  scheduled_for        timestamptz NOT NULL,
  state                text        NOT NULL DEFAULT 'pending'
                       CHECK (state IN ('pending', 'running', 'succeeded', 'dead', 'cancelled')),
  -- The attempt this run is on (pending) or running; it grows when a failed attempt is retried.
  attempt              integer     NOT NULL DEFAULT 1,
  max_attempts         integer     NOT NULL,
  -- Snapshot of the job at materialisation, so a run is self-contained when its job changes.
  handler              text        NOT NULL,
  payload              jsonb       NOT NULL,
  pool                 text        NOT NULL,
  priority             integer     NOT NULL,
  backoff_base_seconds double precision NOT NULL,
  backoff_cap_seconds  double precision NOT NULL,
  lease_seconds        integer,
  -- Not claimable before this instant (the slot, or the end of a retry backoff).
  available_at         timestamptz NOT NULL,
  -- available_at − priority × ageing step: the ready queue's order (see src/core/priority.ts).
  sort_key             timestamptz NOT NULL,
  lease_owner          text,
  lease_token          uuid,
  lease_expires_at     timestamptz,
  last_error           text,
  created_at           timestamptz NOT NULL,
  started_at           timestamptz,
  finished_at          timestamptz,
  UNIQUE (tenant_id, job_id, scheduled_for)
) WITH (fillfactor = 80);

-- The runs table churns: let autovacuum keep up with it instead of waiting for 20% dead rows.
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- The ready scan of claim: pending runs of a pool in sort_key order.
CREATE INDEX runs_ready ON runs (pool, sort_key) WHERE state = 'pending';
-- The reaper scans running runs. lease_expires_at is deliberately not indexed: a heartbeat
-- rewrites only that column, so renewals stay HOT updates (no index writes).
CREATE INDEX runs_running ON runs (started_at) WHERE state = 'running';
-- Run history newest first, per job; the cursor is (scheduled_for, run_id).
CREATE INDEX runs_history ON runs (tenant_id, job_id, scheduled_for DESC, run_id DESC);
-- Listing by state (the dead-letter view), newest first.
CREATE INDEX runs_by_state ON runs (tenant_id, state, scheduled_for DESC, run_id DESC);

-- One row per claim. The lease token is unique per claim, so it is the attempt's key.
CREATE TABLE attempts (
  lease_token          uuid        PRIMARY KEY,
  run_id               uuid        NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  attempt              integer     NOT NULL,
  worker_id            text        NOT NULL,
  started_at           timestamptz NOT NULL,
  finished_at          timestamptz,
  outcome              text        CHECK (outcome IN ('succeeded', 'failed', 'lease_expired', 'released')),
  error                text
) WITH (fillfactor = 80);

CREATE INDEX attempts_by_run ON attempts (run_id, started_at);

-- Scheduler coordination (used when several scheduler nodes share the job space).
CREATE TABLE shards (
  shard_id             integer     PRIMARY KEY,
  owner                text,
  lease_expires_at     timestamptz,
  epoch                bigint      NOT NULL DEFAULT 0
);

CREATE TABLE nodes (
  node_id              text        PRIMARY KEY,
  role                 text        NOT NULL,
  started_at           timestamptz NOT NULL,
  last_seen_at         timestamptz NOT NULL
);
