-- Retention (issue 21): finished runs are kept for a while by state, then pruned with their
-- attempts and reports (the foreign keys cascade).
--
-- `tenant_retention.retention` is a tenant's defaults, `jobs.retention` a job's overrides, both a
-- JSON object keyed by state (`succeeded`, `dead`, `cancelled`, `skipped`) whose values are a
-- duration in the API's canonical form (`7d`, `12h30m`: PostgreSQL reads them as intervals) or
-- `forever`. A state a job leaves out takes the tenant's value, and one the tenant leaves out the
-- built-in default (core/retention.ts). Only validated, canonical values are written.
CREATE TABLE tenant_retention (
  tenant_id  text PRIMARY KEY,
  retention  jsonb NOT NULL,
  updated_at timestamptz NOT NULL
);

ALTER TABLE jobs ADD COLUMN retention jsonb;
-- The pruner reads a tenant's shortest retention from its jobs with overrides: few rows. A tick's
-- update of `next_run_at` adds an entry here only for a job with overrides.
CREATE INDEX jobs_with_retention ON jobs (tenant_id) WHERE retention IS NOT NULL;

-- A named duty that one node at a time runs (the pruner: `prune`), under a lease it renews.
CREATE TABLE maintenance_leases (
  name       text PRIMARY KEY,
  owner      text NOT NULL,
  expires_at timestamptz NOT NULL
);
