-- The concurrency slots a claim took are recorded on its claim row (issue 18, throughput with
-- limits in play): `run_claims.gates`, the gates with a cap that the claim took a slot of for
-- each of its runs that passes them (null: none). A run of the claim holds a slot of gate G
-- exactly when G is in its claim's `gates` and in its own gate set (its tenant's, its job's and
-- its `runs.gates`), so the claim and the end of an attempt no longer write and delete one
-- `run_holds` row per run and gate. The holds of runs running now move to their claims.
ALTER TABLE run_claims ADD COLUMN gates text[];

UPDATE run_claims c SET gates = h.gates
FROM (
  SELECT c2.lease_token, array_agg(DISTINCT h.gate ORDER BY h.gate) AS gates
  FROM run_claims c2 JOIN run_holds h ON h.run_id = ANY(c2.run_ids)
  GROUP BY c2.lease_token
) h
WHERE c.lease_token = h.lease_token;

DROP TABLE run_holds;

-- The end of an attempt no longer writes the limit rows it gives slots back to (every claim and
-- every completion locked the same few rows through its commit, so the workers' statements queued
-- behind each other). It adds its slots to a running total of the limit's releases, one row per
-- limit and shard (`pg_backend_pid() % 16`: two connections seldom share one, so completions
-- seldom wait for each other, and claims never write these rows). A claim, which holds the limit
-- row locked, folds what was released since the last fold into `in_use`: the sum of the totals
-- as it sees them, less `limits.released` (the sum folded so far), which it then raises to that
-- sum. A release a claim does not see yet waits for the next one: it can only hold runs back,
-- never let one too many through. A job's gate with overlap `skip`, whose end of a run decides
-- which slots overlapped, is still written at once. Totals name the limit row by `id`, so that a
-- limit deleted and made again does not inherit the releases of runs it never counted. Rows are
-- updated in place (no index covers `released`): no dead rows pile up as a queue's would.
ALTER TABLE limits
  ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  ADD COLUMN released bigint NOT NULL DEFAULT 0;

CREATE TABLE limit_releases (
  limit_id bigint   NOT NULL,
  shard    smallint NOT NULL,
  released bigint   NOT NULL,
  PRIMARY KEY (limit_id, shard)
);

-- Limits as they stand: `in_use` less the releases not folded yet. Every read of slots in use
-- outside the claim (which folds them) goes through this view.
CREATE VIEW limit_states AS
SELECT l.tenant_id, l.key, l.gate, l.rate, l.burst, l.tokens, l.refilled_at, l.max_concurrency,
  l.in_use - GREATEST(0, COALESCE((SELECT sum(r.released) FROM limit_releases r WHERE r.limit_id = l.id), 0)
    - l.released)::integer AS in_use,
  l.overlap, l.busy_from, l.freed_at, l.created_at, l.updated_at, l.id
FROM limits l;

-- Every claim writes the rows of the limits it takes from. An index whose predicate reads `in_use`
-- (limits_full) made every such write a non-HOT update: a new entry in every index of the table
-- and a dead row version that only VACUUM removes, so a busy limit's few rows grew to thousands of
-- versions that each claim's scans walked. The claim's scan of full limits reads the capped ones
-- instead (a cap changes only when an operator changes it), and the table keeps room in its pages
-- for the new versions of its rows: the claims' writes are HOT updates, pruned in place.
DROP INDEX limits_full;
CREATE INDEX limits_capped ON limits (gate) WHERE max_concurrency IS NOT NULL;
ALTER TABLE limits SET (fillfactor = 50);
