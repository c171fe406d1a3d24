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
-- behind each other): it appends to `limit_releases`, and the next claim that locks the limit
-- folds the pending releases into `in_use` (and `freed_at`) and deletes them. A release a claim
-- does not see yet waits for the next one: it can only hold runs back, never let one too many
-- through. A job's gate with overlap `skip`, whose end of a run decides which slots overlapped,
-- is still written at once. Releases name the limit row by `id`, so that a limit deleted and
-- made again does not inherit the releases of the runs it never counted.
ALTER TABLE limits ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY UNIQUE;

CREATE TABLE limit_releases (
  limit_id bigint      NOT NULL,
  n        integer     NOT NULL CHECK (n > 0),
  at       timestamptz NOT NULL
);
CREATE INDEX limit_releases_limit ON limit_releases (limit_id);

-- Limits as they stand: `in_use` less the releases not folded yet. Every read of slots in use
-- outside the claim (which folds them) goes through this view.
CREATE VIEW limit_states AS
SELECT l.tenant_id, l.key, l.gate, l.rate, l.burst, l.tokens, l.refilled_at, l.max_concurrency,
  l.in_use - COALESCE((SELECT sum(r.n) FROM limit_releases r WHERE r.limit_id = l.id), 0)::integer AS in_use,
  l.overlap, l.busy_from,
  GREATEST(l.freed_at, (SELECT max(r.at) FROM limit_releases r WHERE r.limit_id = l.id)) AS freed_at,
  l.created_at, l.updated_at, l.id
FROM limits l;
