-- A claim's runs are leased in parts of at most 100 (`part`, numbered from 0 within its lease
-- length), one row each with its own token, so each row's run_ids stays small enough to be stored
-- inline. One row per lease length held up to 1,000 run ids (16 KB): stored out of line (TOAST),
-- and each completion of some of its runs rewrote the whole list, so a completion of a quarter of
-- a claim cost about a quarter more per run than one of a whole claim. The claim id's unique key
-- gains the part: the parts of one claim share its id, and the same claim sent twice at once still
-- collides on part 0.
ALTER TABLE run_claims ADD COLUMN part integer NOT NULL DEFAULT 0;
DROP INDEX run_claims_claim_id;
CREATE UNIQUE INDEX run_claims_claim_id ON run_claims (claim_id, tenant_id, worker_id, lease_ms, part) NULLS NOT DISTINCT
  WHERE claim_id IS NOT NULL;
