/**
 * Every statement on `shards` and `nodes`. A scheduler node's step is: say it is alive, count the
 * live scheduler nodes, renew the shards it still holds, give back those above its fair share,
 * and take unowned or expired ones up to it. Every change of owner bumps the shard's epoch; a
 * tick locks its shards `FOR SHARE` with the epochs it was given, so a node that lost a shard
 * (paused, partitioned) cannot write for it, and a shard cannot change hands during a tick.
 */

/**
 * $1 node, $2 role, $3 now, $4 clock offset ms, $5 clock uncertainty ms, $6 info (jsonb).
 * Registers a cluster node (a scheduler, or a worker on the database) or records that it is alive.
 * Never a remote worker's row (tenant_id set): those are `nodeTouchRemote`'s alone.
 */
export const nodeTouch = `
INSERT INTO nodes (node_id, role, started_at, last_seen_at, clock_offset_ms, clock_uncertainty_ms, info)
VALUES ($1, $2, $3, $3, $4, $5, $6)
ON CONFLICT (node_id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at,
  clock_offset_ms = EXCLUDED.clock_offset_ms, clock_uncertainty_ms = EXCLUDED.clock_uncertainty_ms,
  info = EXCLUDED.info
WHERE nodes.tenant_id IS NULL`;

/**
 * $1 node (`<tenant>/<worker_id>`), $2 tenant, $3 now, $4 info (jsonb), $5 the tenant's cap,
 * $6 clock offset ms (or null), $7 clock uncertainty ms (or null).
 * A remote worker (known through the HTTP API) says it is alive. The update matches only a worker
 * row of the same tenant, so an API caller can never write a scheduler's row or another tenant's.
 * `info` is merged into what the row has (a heartbeat knows no pool, the worker's own report does),
 * and a touch without a clock offset keeps the last one reported.
 * When the tenant already has `$5` other rows, the least recently seen beyond `$5 - 1` go, so a
 * tenant's rows stay at most `$5`: run under `nodeRemoteLock`, which orders a tenant's touches.
 */
export const nodeTouchRemote = `
WITH touched AS (
  INSERT INTO nodes (node_id, role, started_at, last_seen_at, info, tenant_id, clock_offset_ms, clock_uncertainty_ms)
  VALUES ($1, 'worker', $3, $3, $4, $2, $6, $7)
  ON CONFLICT (node_id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at, info = nodes.info || EXCLUDED.info,
    clock_offset_ms = COALESCE(EXCLUDED.clock_offset_ms, nodes.clock_offset_ms),
    clock_uncertainty_ms = COALESCE(EXCLUDED.clock_uncertainty_ms, nodes.clock_uncertainty_ms)
  WHERE nodes.tenant_id = EXCLUDED.tenant_id AND nodes.role = 'worker'
  RETURNING node_id
), evicted AS (
  DELETE FROM nodes WHERE node_id IN (
    SELECT node_id FROM nodes
    WHERE tenant_id = $2 AND node_id <> $1
    ORDER BY last_seen_at DESC, node_id
    OFFSET $5::int - 1
  )
  RETURNING node_id
)
SELECT (SELECT count(*)::int FROM touched) AS touched, (SELECT count(*)::int FROM evicted) AS evicted`;

/**
 * $1 tenant. Orders one tenant's remote-worker touches until the transaction ends, so that each
 * sees the rows the one before it left (the cap is exact even with many API servers).
 */
export const nodeRemoteLock = `SELECT pg_advisory_xact_lock(hashtext('tock.nodes.' || current_schema() || '.' || $1))`;

/**
 * $1 role, $2 seen since. Cluster nodes (tenant_id NULL) of a role seen since an instant: the
 * live scheduler count behind the fair share, which no API caller can reach.
 */
export const nodeCountLive = `
SELECT count(*)::int AS n FROM nodes WHERE role = $1 AND last_seen_at > $2 AND tenant_id IS NULL`;

/** $1 node (`<tenant>/<worker_id>`), $2 tenant. A remote worker leaving on purpose (a clean stop). */
export const nodeDeleteRemote = `DELETE FROM nodes WHERE node_id = $1 AND tenant_id = $2 AND role = 'worker'`;

/** $1 node. A node leaving on purpose. */
export const nodeDelete = `DELETE FROM nodes WHERE node_id = $1`;

/**
 * $1 cluster nodes older than, $2 remote workers older than. Forgets cluster nodes not seen for a
 * long time (their shards expired long ago) and remote workers after a short silence.
 */
export const nodePrune = `
DELETE FROM nodes
WHERE (tenant_id IS NULL AND last_seen_at < $1) OR (tenant_id IS NOT NULL AND last_seen_at < $2)`;

/** $1 node, $2 now, $3 new expiry. Renews the leases the node still holds; the rest are lost. */
export const shardRenew = `
UPDATE shards SET lease_expires_at = $3
WHERE owner = $1 AND lease_expires_at > $2
RETURNING shard_id, epoch, lease_expires_at`;

/** $1 node, $2 shard ids. Gives shards back (unowned, new epoch) so another node can take them. */
export const shardRelease = `
UPDATE shards SET owner = NULL, lease_expires_at = NULL, epoch = epoch + 1
WHERE owner = $1 AND shard_id = ANY($2::int[])
RETURNING shard_id`;

/** $1 node, $2 now, $3 expiry, $4 how many. Takes unowned or expired shards, lowest id first. */
export const shardTake = `
WITH free AS (
  SELECT shard_id FROM shards
  WHERE owner IS NULL OR lease_expires_at <= $2
  ORDER BY shard_id
  LIMIT $4
  FOR UPDATE SKIP LOCKED
)
UPDATE shards s SET owner = $1, lease_expires_at = $3, epoch = s.epoch + 1
FROM free WHERE s.shard_id = free.shard_id
RETURNING s.shard_id, s.epoch, s.lease_expires_at`;

/** $1 node, $2 now. The earliest live lease another node holds: when a shard may become free. */
export const shardNextForeignExpiry = `
SELECT min(lease_expires_at) AS at FROM shards
WHERE owner IS DISTINCT FROM $1 AND owner IS NOT NULL AND lease_expires_at > $2`;

/**
 * $1 node, $2 now, $3 shard ids, $4 their epochs. The tick's fence: the shards this node still
 * holds at these epochs, locked FOR SHARE until the tick commits (a take waits, or skips them).
 */
export const shardFence = `
SELECT s.shard_id FROM shards s
JOIN unnest($3::int[], $4::bigint[]) AS v(shard_id, epoch) ON v.shard_id = s.shard_id AND v.epoch = s.epoch
WHERE s.owner = $1 AND s.lease_expires_at > $2
ORDER BY s.shard_id
FOR SHARE OF s`;

/** How many shards there are (fixed when the database was initialised). */
export const shardCount = 'SELECT count(*)::int AS n FROM shards';

/** Shards: their count, and who owns each. */
export const shardList = `SELECT shard_id, owner, lease_expires_at, epoch FROM shards ORDER BY shard_id`;

/**
 * $1 tenant (NULL: every node), $2 limit, $3 cursor role, $4 cursor started_at, $5 cursor node
 * (NULLs: the first page). Nodes by role, then newest first, one page after the cursor's row.
 */
export const nodeList = `
SELECT node_id, role, started_at, last_seen_at, clock_offset_ms, clock_uncertainty_ms, info, tenant_id
FROM nodes
WHERE ($1::text IS NULL OR tenant_id = $1)
  AND ($3::text IS NULL OR role > $3 OR (role = $3 AND (started_at < $4
    OR (started_at = $4 AND node_id > $5))))
ORDER BY role, started_at DESC, node_id
LIMIT $2`;

/** $1 now, $2 shard ids. Jobs due by now and not yet ticked, per shard: the scheduler's backlog. */
export const jobBacklog = `
SELECT shard_id, count(*)::int AS n FROM jobs
WHERE enabled AND next_run_at <= $1 AND shard_id = ANY($2::int[]) GROUP BY shard_id`;
