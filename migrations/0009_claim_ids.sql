-- Retry-safe claims. A claim whose answer never reached its worker (a server or the network stalled
-- after the claim committed) stranded its runs for a whole lease: nobody renewed them, and only the
-- reaper took them back, spending an attempt. Now a worker may send a claim id (a uuid it makes per
-- claim and sends again when it retries that claim, to any server), recorded on the claim rows with
-- the tenant the claim was for. A claim whose id already names a live claim of the same worker and
-- tenant answers that claim's runs and leases (same tokens) instead of claiming more.
-- * claim_id: the worker's id for the claim; null for a claim made without one. One claim writes one
--   row per lease length, so the id is unique with the lease length. The retry's lookup and a
--   release of a claim whose client went away probe this index; nothing else reads it, and
--   heartbeats (which rewrite lease_expires_at) never change it.
-- * tenant_id: the tenant the claim was restricted to (null: any tenant, a worker on the database).
--   Another tenant's claim id finds nothing.
-- * retried: a retry was answered with this claim, so its worker holds these leases: the server
--   whose first answer found its client gone must not release them.
ALTER TABLE run_claims ADD COLUMN claim_id uuid;
ALTER TABLE run_claims ADD COLUMN tenant_id text;
ALTER TABLE run_claims ADD COLUMN retried boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX run_claims_claim_id ON run_claims (claim_id, lease_ms) WHERE claim_id IS NOT NULL;
