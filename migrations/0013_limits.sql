-- Backlog control (issue 18): overlap policy and concurrency cap per job, named limits (rate,
-- burst, concurrency) that jobs name, and an implicit limit per tenant.
--
-- A limit is a row of `limits`, found by its gate: `<tenant>/<key>`. Three kinds of key:
-- * a named limit an operator defines (`payments-api`), which jobs list in `limits`;
-- * `tenant:<tenant>`, the tenant's own limit, which every run of the tenant takes when it exists;
-- * `job:<job>`, the row a job with `max_concurrency` or an overlap policy other than `allow`
--   keeps for itself (its cap; 1 for `skip` and `queue`).
-- A claim takes, in the statement that leases a run, a token from every gate with a rate and a
-- slot from every gate with a concurrency cap (recorded in `run_holds`); the end of the attempt
-- gives the slot back. Tokens refill by arithmetic in the claim: min(burst, tokens + rate × Δt).

ALTER TABLE jobs
  ADD COLUMN overlap text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'queue')),
  ADD COLUMN max_concurrency integer CHECK (max_concurrency BETWEEN 1 AND 100000),
  ADD COLUMN limits text[] NOT NULL DEFAULT '{}';

-- The named limits a run takes, from its job at the run's creation (tenant and job gates are
-- found from the run's tenant and job at claim time).
ALTER TABLE runs ADD COLUMN gates text[];
ALTER TABLE run_queue ADD COLUMN job_id text, ADD COLUMN gates text[];
UPDATE run_queue q SET job_id = r.job_id FROM runs r WHERE r.run_id = q.run_id;
ALTER TABLE run_queue ALTER COLUMN job_id SET NOT NULL;
-- Fair claims: the first ready run of each tenant of a pool, by a skip scan over this index; each
-- claim draws a turn from the sequence, which says where in the tenants its rotation starts.
CREATE INDEX run_queue_tenants ON run_queue (pool, tenant_id, sort_key);
CREATE SEQUENCE tock_claim_turns;

CREATE TABLE limits (
  tenant_id       text        NOT NULL,
  key             text        NOT NULL,
  gate            text        NOT NULL GENERATED ALWAYS AS (tenant_id || '/' || key) STORED UNIQUE,
  -- Tokens per second and bucket size; both null for a limit of concurrency only.
  rate            double precision CHECK (rate > 0 AND rate <= 1000000),
  burst           integer     CHECK (burst BETWEEN 1 AND 1000000),
  tokens          double precision NOT NULL DEFAULT 0,
  refilled_at     timestamptz NOT NULL,
  max_concurrency integer     CHECK (max_concurrency BETWEEN 1 AND 100000),
  -- Slots held: the rows of run_holds with this gate, kept by the claim and the attempt's end.
  in_use          integer     NOT NULL DEFAULT 0 CHECK (in_use >= 0),
  -- A job's own gate: its overlap policy ('skip' drops a slot that arrives while a run is running).
  overlap         text        CHECK (overlap IN ('skip', 'queue')),
  -- The start of the latest run that took a slot, and when a slot was last given back: a `skip`
  -- job's slot that became available in between arrived while a run was running.
  busy_from       timestamptz,
  freed_at        timestamptz,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, key),
  CHECK ((rate IS NULL) = (burst IS NULL)),
  CHECK (rate IS NOT NULL OR max_concurrency IS NOT NULL)
);
-- The claim's "what is exhausted" scan reads only these.
CREATE INDEX limits_rated ON limits (gate) WHERE rate IS NOT NULL;
CREATE INDEX limits_full ON limits (gate) WHERE in_use >= max_concurrency;

-- One row per concurrency slot a running run holds.
CREATE TABLE run_holds (
  run_id uuid NOT NULL,
  gate   text NOT NULL,
  PRIMARY KEY (run_id, gate)
);
CREATE INDEX run_holds_gate ON run_holds (gate);

-- A slot dropped by a `skip` overlap policy is a run in state `skipped` (parked like a dead or
-- cancelled run, so it shows in the job's history and in `GET /v1/runs?state=skipped`).
ALTER TABLE runs DROP CONSTRAINT runs_parked_check;
ALTER TABLE runs DROP CONSTRAINT runs_state_check;
ALTER TABLE runs ADD CONSTRAINT runs_state_check
  CHECK (state IN ('pending', 'succeeded', 'dead', 'cancelled', 'skipped'));
ALTER TABLE runs ADD CONSTRAINT runs_parked_check
  CHECK (parked IS NOT DISTINCT FROM (CASE WHEN state IN ('dead', 'cancelled', 'skipped') THEN state END));
