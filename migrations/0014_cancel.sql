-- Cancelling a run (issue 18, item 7): `POST /v1/runs/{id}/cancel`. A queued run leaves the queue;
-- a running one is taken off its claim, so its lease is revoked (its worker's next heartbeat finds
-- it lost and aborts the handler) and its late result is refused. The attempt it ended gets its row
-- in attempts like every attempt that ends without succeeding, with the outcome `cancelled`. A
-- cancelled run is parked as `cancelled` (runs_parked_check), as a deleted job's queued runs are.
ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check
  CHECK (outcome IN ('succeeded', 'failed', 'lease_expired', 'released', 'cancelled'));
