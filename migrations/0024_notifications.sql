-- Webhook notifications (issue 22, item 4): a tenant names a URL and the events it wants
-- (`run.dead`, `job.misfired`, `run.late`, `worker.lost`); Tock POSTs each event there, signed,
-- at least once.
--
-- `notification_deliveries` is an outbox: one row per event per notification that wants it,
-- written by the statement (or the transaction) that makes the change: the dead-letter of
-- `runFail` and `runReap`, the reaper's reclaim of a lost worker's lease, the tick's misfire. Those
-- statements join `notifications` on (tenant_id) and write nothing when no notification wants the
-- event, so a tenant without notifications pays a read of this small table on a failure's last
-- attempt and on a reap, and nothing on the claim or the completion. The notifier (scheduler)
-- claims due rows with `FOR UPDATE SKIP LOCKED`, moving `next_attempt_at` past its HTTP timeout,
-- so several nodes deliver without sending one row twice at once; the row is the delivery log.
--
-- `secret` is kept in clear: Tock needs it to sign (HMAC-SHA256), and the API never answers it.
-- `late_from`/`late_run` is where the last scan for late runs stopped (the queue order), so each
-- queued run is reported late once per notification (`dedupe` holds `late:<run>:<available_at>`).
CREATE TABLE notifications (
  tenant_id          text NOT NULL,
  name               text NOT NULL,
  url                text NOT NULL,
  events             text[] NOT NULL,
  late_after_seconds integer,
  secret             text,
  late_from          timestamptz,
  late_run           uuid,
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, name)
);

CREATE TABLE notification_deliveries (
  delivery_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id       text NOT NULL,
  name            text NOT NULL,
  event           text NOT NULL,
  -- What the event is about (`dead:<run>:<attempt>`, `late:<run>:<available_at>`): one row each.
  dedupe          text,
  data            jsonb NOT NULL,
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  last_attempt_at timestamptz,
  last_status     integer,
  last_error      text,
  finished_at     timestamptz,
  FOREIGN KEY (tenant_id, name) REFERENCES notifications (tenant_id, name) ON DELETE CASCADE
);
-- The notifier's claim: the due pending rows, oldest first.
CREATE INDEX notification_deliveries_due ON notification_deliveries (next_attempt_at) WHERE state = 'pending';
-- A notification's log, newest first (`GET /v1/notifications/{name}/deliveries`), and the cascade.
CREATE INDEX notification_deliveries_log ON notification_deliveries (tenant_id, name, delivery_id);
-- One row per event per notification (NULL: no key, as a misfire's or a lost worker's).
CREATE UNIQUE INDEX notification_deliveries_once ON notification_deliveries (tenant_id, name, dedupe);
-- The pruning of the log: finished rows by age.
CREATE INDEX notification_deliveries_finished ON notification_deliveries (finished_at) WHERE state <> 'pending';
