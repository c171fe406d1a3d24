-- Throughput: write each run row once per attempt. Until now a claim rewrote the run row
-- (pending -> running) and its completion rewrote it again (running -> succeeded), and neither
-- could be a HOT update, because partial indexes read `state`: each run cost two new row versions
-- with entries in every index of `runs`, two of them uniqueness-checked. Now:
-- * The claimable runs are listed in `run_queue`, a narrow table the claim deletes from.
-- * A claim writes one row in `run_claims` for its batch (per lease length): the lease token, the
--   worker, the start, the expiry and the ids of the runs it holds. It does not write the run rows.
--   A run is running while a claim lists it; a heartbeat renews the claim row, so a worker's
--   renewals write one row per claim, not per run.
-- * The attempt's end (success, failure, release, expiry) writes the run row once, with the
--   attempt's token, worker and start taken from the claim, and takes the run off the claim (the
--   claim goes when it lists no run). No index of `runs` reads `state` or another column an attempt's
--   end changes, so that write is a HOT update when the row's page has room for the new version of
--   every row on it (a completion writes a claim's runs, neighbours on a page, in one transaction,
--   so pruning cannot free room in between, and the new version is about 40 bytes longer: the
--   attempt's worker, token, start and finish). Fillfactor 40 leaves that room; 50 left it for
--   about four rows in five.
-- * `runs.state` stores pending (queued or claimed), succeeded, dead or cancelled; `run_states`
--   (below) adds running from the claims, and is what every read goes through.

-- The ready queue. A row here is a pending run no claim holds; the claim takes it with SKIP LOCKED.
CREATE TABLE run_queue (
  run_id       uuid        PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
  tenant_id    text        NOT NULL,
  pool         text        NOT NULL,
  handler      text        NOT NULL,
  priority     integer     NOT NULL,
  available_at timestamptz NOT NULL,
  sort_key     timestamptz NOT NULL
);
CREATE INDEX run_queue_ready ON run_queue (pool, sort_key);
CREATE INDEX run_queue_next ON run_queue (pool, available_at);
ALTER TABLE run_queue SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Live leases, one row per claim and lease length. run_ids shrinks as the claim's runs end.
CREATE TABLE run_claims (
  lease_token      uuid        PRIMARY KEY,
  worker_id        text        NOT NULL,
  claimed_at       timestamptz NOT NULL,
  lease_ms         integer     NOT NULL CHECK (lease_ms >= 1),
  lease_expires_at timestamptz NOT NULL,
  run_ids          uuid[]      NOT NULL CHECK (cardinality(run_ids) >= 1)
);
-- The reaper: claims whose lease expired, oldest first.
CREATE INDEX run_claims_expiry ON run_claims (lease_expires_at);
ALTER TABLE run_claims SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Runs already pending or running move over: pending ones into the queue, each live lease into a
-- claim of its own (its token, worker, start and expiry), and a running run becomes a pending one
-- that a claim lists.
INSERT INTO run_queue (run_id, tenant_id, pool, handler, priority, available_at, sort_key)
SELECT run_id, tenant_id, pool, handler, priority, available_at, sort_key FROM runs WHERE state = 'pending';
INSERT INTO run_claims (lease_token, worker_id, claimed_at, lease_ms, lease_expires_at, run_ids)
SELECT lease_token, lease_owner, started_at, COALESCE(lease_seconds * 1000, 30000),
  lease_expires_at, ARRAY[run_id]
FROM runs WHERE state = 'running';
UPDATE runs SET state = 'pending' WHERE state = 'running';
-- The expiry lives on the claim now.
ALTER TABLE runs DROP COLUMN lease_expires_at;

-- Dead letters and cancelled runs are listed by a column of their own, which only dying, being
-- cancelled and being replayed change: the hot path never writes it.
ALTER TABLE runs ADD COLUMN parked text;
UPDATE runs SET parked = state WHERE state IN ('dead', 'cancelled');

ALTER TABLE runs DROP CONSTRAINT runs_state_check;
ALTER TABLE runs ADD CONSTRAINT runs_state_check CHECK (state IN ('pending', 'succeeded', 'dead', 'cancelled'));
ALTER TABLE runs ADD CONSTRAINT runs_parked_check
  CHECK (parked IS NOT DISTINCT FROM (CASE WHEN state IN ('dead', 'cancelled') THEN state END));

DROP INDEX runs_ready;
DROP INDEX runs_next_available;
DROP INDEX runs_running;
DROP INDEX runs_finished;
-- A tenant's runs newest first, whatever their state; the job's history is the unique
-- (tenant_id, job_id, scheduled_for) index.
CREATE INDEX runs_by_tenant ON runs (tenant_id, scheduled_for DESC, run_id DESC);
CREATE INDEX runs_parked ON runs (tenant_id, parked, scheduled_for DESC, run_id DESC) WHERE parked IS NOT NULL;
ALTER TABLE runs SET (fillfactor = 40);

-- Attempt rows: runs of one claim share its token, so an attempt is a (token, run).
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD PRIMARY KEY (lease_token, run_id);

-- Every run with its state as a user sees it: a pending run that a claim lists is running, with
-- the claim's token, worker, start and expiry.
CREATE VIEW run_states AS
SELECT r.run_id, r.tenant_id, r.job_id, r.scheduled_for,
  CASE WHEN c.lease_token IS NULL THEN r.state ELSE 'running' END AS state,
  r.attempt, r.max_attempts, r.handler, r.payload, r.pool, r.priority, r.backoff_base_seconds,
  r.backoff_cap_seconds, r.lease_seconds, r.timeout_seconds, r.available_at, r.sort_key,
  CASE WHEN c.lease_token IS NULL THEN r.lease_owner ELSE c.worker_id END AS lease_owner,
  CASE WHEN c.lease_token IS NULL THEN r.lease_token ELSE c.lease_token END AS lease_token,
  c.lease_expires_at, r.last_error, r.created_at,
  CASE WHEN c.lease_token IS NULL THEN r.started_at ELSE c.claimed_at END AS started_at,
  r.finished_at, r.output, r.parked
FROM runs r
LEFT JOIN (
  SELECT x.run_id, c.lease_token, c.worker_id, c.claimed_at, c.lease_expires_at
  FROM run_claims c CROSS JOIN unnest(c.run_ids) AS x(run_id)
) c ON c.run_id = r.run_id AND r.state = 'pending';
COMMENT ON VIEW run_states IS
  'Runs with the state a user sees: a pending run listed by a claim (run_claims) is running.';
COMMENT ON TABLE attempts IS
  'One row per attempt that ended in failure, release or an expired lease, keyed by (lease token, run); the running attempt is its claim, the succeeded one its run row.';
