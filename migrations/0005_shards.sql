-- Many nodes: the fixed set of shards scheduler nodes lease (64, set here at initialisation; jobs
-- hash into them by (tenant_id, job_id)), what each node reports about itself for `tock status`,
-- and the index a worker uses to sleep until the earliest materialised run becomes claimable.
INSERT INTO shards (shard_id) SELECT s FROM generate_series(0, 63) AS s ON CONFLICT DO NOTHING;

ALTER TABLE nodes
  ADD COLUMN clock_offset_ms      double precision,
  ADD COLUMN clock_uncertainty_ms double precision,
  ADD COLUMN info                 jsonb NOT NULL DEFAULT '{}';

-- MIN(available_at) of a pool's pending runs: the next instant a worker has something to claim.
CREATE INDEX runs_next_available ON runs (pool, available_at) WHERE state = 'pending';
