-- Deterministic jitter: a job's runs become available at slot + hash(tenant, job_id) mod jitter,
-- keeping the slot itself as the run's identity.
ALTER TABLE jobs ADD COLUMN jitter_seconds integer NOT NULL DEFAULT 0 CHECK (jitter_seconds BETWEEN 0 AND 86400);
