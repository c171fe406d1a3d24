-- Tenants in the node list, and a cluster-wide role (issue 14, items 2, 5 and 8).
-- * `nodes.tenant_id`: NULL for cluster nodes (scheduler nodes and workers connected to the
--   database), the tenant for a remote worker known only through the HTTP API. A remote worker's
--   row is `<tenant>/<worker_id>` (a `/` is not allowed in any id, so it cannot collide with a
--   cluster node's id), is written only by a statement whose update matches rows of that tenant
--   and role 'worker', and is never counted as a live scheduler: nothing an API caller does can
--   change the shards' fair share or another tenant's row.
-- * Rows written before this migration by the API (`info.via = 'http'`) may be forged ones that
--   took a scheduler's id: they go. Live remote workers come back at their next claim or heartbeat,
--   and a live scheduler at its next shard step.
-- * `api_keys.role` may be `cluster-admin`: an admin of its tenant that may also read cluster-wide
--   facts (every node and shard, the global backlog, /metrics). Only `tock keys create` (on the
--   database) makes one; the API refuses to.

ALTER TABLE nodes ADD COLUMN tenant_id text;

DELETE FROM nodes WHERE info ->> 'via' = 'http';

-- A tenant's remote workers, least recently seen first: the row that gives way when the tenant is
-- at its cap, the silent ones the pruner forgets, and a tenant's page of `GET /v1/status`.
CREATE INDEX nodes_remote_by_tenant ON nodes (tenant_id, last_seen_at) WHERE tenant_id IS NOT NULL;

ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
  CHECK (role IN ('cluster-admin', 'admin', 'operator', 'worker', 'reader'));
