/**
 * Every statement on `shards` and `nodes`. A scheduler node's step is: say it is alive, count the
 * live scheduler nodes, renew the shards it still holds, give back those above its fair share,
 * and take unowned or expired ones up to it. Every change of owner bumps the shard's epoch; a
 * tick locks its shards `FOR SHARE` with the epochs it was given, so a node that lost a shard
 * (paused, partitioned) cannot write for it, and a shard cannot change hands during a tick.
 */

/**
 * $1 node, $2 role, $3 now, $4 clock offset ms, $5 clock uncertainty ms, $6 info (jsonb).
 * Registers the node or records that it is alive.
 */
export const nodeTouch = `
INSERT INTO nodes (node_id, role, started_at, last_seen_at, clock_offset_ms, clock_uncertainty_ms, info)
VALUES ($1, $2, $3, $3, $4, $5, $6)
ON CONFLICT (node_id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at,
  clock_offset_ms = EXCLUDED.clock_offset_ms, clock_uncertainty_ms = EXCLUDED.clock_uncertainty_ms,
  info = EXCLUDED.info`;

/** $1 role, $2 seen since. Nodes of a role seen since an instant. */
export const nodeCountLive = `SELECT count(*)::int AS n FROM nodes WHERE role = $1 AND last_seen_at > $2`;

/** $1 node. A node leaving on purpose. */
export const nodeDelete = `DELETE FROM nodes WHERE node_id = $1`;

/** $1 older than. Forgets nodes not seen for a long time (their shards expired long ago). */
export const nodePrune = `DELETE FROM nodes WHERE last_seen_at < $1`;

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

/** Shards: their count, and who owns each. */
export const shardList = `SELECT shard_id, owner, lease_expires_at, epoch FROM shards ORDER BY shard_id`;

/** Nodes, newest first. */
export const nodeList = `
SELECT node_id, role, started_at, last_seen_at, clock_offset_ms, clock_uncertainty_ms, info
FROM nodes ORDER BY role, started_at DESC, node_id`;

/** $1 now, $2 shard ids. Jobs due by now and not yet ticked, per shard: the scheduler's backlog. */
export const jobBacklog = `
SELECT shard_id, count(*)::int AS n FROM jobs
WHERE enabled AND next_run_at <= $1 AND shard_id = ANY($2::int[]) GROUP BY shard_id`;
