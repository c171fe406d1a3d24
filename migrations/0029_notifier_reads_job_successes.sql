-- Bounded, fair reads for the notifier, and each job's last success in the database (issue 22,
-- server side).
--
-- * `run_queue_late (tenant_id, available_at, run_id)`: the scan for late runs (`lateDeliveries`)
--   reads a tenant's queue in (available_at, run_id) order from where its last statement stopped,
--   at most a page of entries, all of them the tenant's. Through `run_queue_next (pool,
--   available_at)` it had to filter other tenants' runs out (a tenant's page read through every
--   late run of the pool), or through `run_queue_tenants` read the tenant's whole queue, and runs
--   sharing an instant (a cron minute, a burst of triggers) were read whole and sorted to find
--   where a page ends. A read that skipped the tenant filter before its LIMIT would be bounded
--   too, but would make each notification walk every tenant's late runs: one tenant's backlog of
--   200,000 runs would hold another's late run back by 400 scans. The cost: one more index entry
--   per queued run (the queue's insert; a claim deletes, which writes no index).
CREATE INDEX run_queue_late ON run_queue (tenant_id, available_at, run_id);

-- * `notification_deliveries_pending (tenant_id, name, next_attempt_at) WHERE state = 'pending'`
--   replaces `notification_deliveries_due (next_attempt_at)`: the notifier's claim is fair between
--   notifications (`deliveryDuePick`): it walks the notifications with pending deliveries by a skip
--   scan of this index and takes the oldest due of each, a few at a time, instead of the oldest due
--   of all (where one tenant's thousands came before another's one). Replaced, not added: an
--   outbox row writes as many index entries as before.
DROP INDEX notification_deliveries_due;
CREATE INDEX notification_deliveries_pending ON notification_deliveries (tenant_id, name, next_attempt_at)
  WHERE state = 'pending';

-- * `job_successes`: when each job's runs last succeeded, for every server's metrics
--   (`tock_job_last_success_timestamp_seconds`, which each process used to record of the successes
--   it saw: two servers disagreed and a restart forgot). Not written by the completion, which stays
--   one HOT update of `runs`: the metrics sampler (`jobSuccessRecord`, at most once per sample
--   interval per server) reads each tenant's newest runs of the last hour (a bounded page, as the
--   per-job delay gauges do) and moves a job's `succeeded_at` forward when it finds a later success
--   (no write when not). `job_successes_oldest` gives the jobs whose last success is oldest, the
--   ones an alert on "has not succeeded for X" wants, without reading every job. A job's row goes
--   with the job.
CREATE TABLE job_successes (
  tenant_id    text        NOT NULL,
  job_id       text        NOT NULL,
  succeeded_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, job_id),
  FOREIGN KEY (tenant_id, job_id) REFERENCES jobs (tenant_id, job_id) ON DELETE CASCADE
);
CREATE INDEX job_successes_oldest ON job_successes (succeeded_at);
