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
