-- Claim ids are scoped to their tenant and worker. 0009's unique index on (claim_id, lease_ms) made
-- a claim id unique across all tenants and workers: a tenant (or another worker of one tenant)
-- sending a claim id that someone else had already used hit the unique violation, found no claim of
-- its own, and answered no runs while it had claimable ones. The key is now the claim id, the tenant
-- (null, a worker on the database claiming for every tenant, is one scope of its own: NULLS NOT
-- DISTINCT), the worker and the lease length: the same scope the retry's lookup (`claimAgain`) and
-- the release (`claimRelease`) match on. Still partial: a claim made without an id is not indexed.
DROP INDEX run_claims_claim_id;
CREATE UNIQUE INDEX run_claims_claim_id ON run_claims (claim_id, tenant_id, worker_id, lease_ms) NULLS NOT DISTINCT
  WHERE claim_id IS NOT NULL;
