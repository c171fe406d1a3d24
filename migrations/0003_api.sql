-- The HTTP API's state: API keys (stored as a SHA-256 of the secret, shown once) and the answers
-- remembered for Idempotency-Key replays (kept 24 hours).

CREATE TABLE api_keys (
  key_id      text        PRIMARY KEY,
  tenant_id   text        NOT NULL,
  role        text        NOT NULL CHECK (role IN ('admin', 'operator', 'worker', 'reader')),
  name        text        NOT NULL DEFAULT '',
  secret_hash text        NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL,
  revoked_at  timestamptz
);

CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);

CREATE TABLE idempotency_keys (
  tenant_id    text        NOT NULL,
  scope        text        NOT NULL,
  key          text        NOT NULL,
  request_hash text        NOT NULL,
  status       integer     NOT NULL,
  body         jsonb       NOT NULL,
  created_at   timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, scope, key)
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (created_at);
