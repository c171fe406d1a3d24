/**
 * The `shards` table: how scheduler nodes share the job space. A node's step says it is alive,
 * renews the shards it still holds (a lease that ran out is lost), gives back those above its fair
 * share `ceil(shards / live scheduler nodes)` (highest ids first) and takes unowned or expired ones
 * up to it. Every change of owner bumps the shard's epoch, which a tick's fence checks. The shard
 * count is fixed when the database is initialised.
 */
import { ValidationError } from '../core/index.js';
import { checkInstant } from './checks.js';
import { touchNode } from './nodes.js';
import * as S from './queries/shards.js';
import { type Queryable, toShard, toShardLease } from './rows.js';
import type { Store } from './store.js';
import type { ShardInfo, ShardStep } from './types.js';

/** How many shards the job space has. */
export async function countShards(db: Queryable): Promise<number> {
  const { rows } = await db.query(S.shardCount);
  const n = rows[0].n as number;
  if (n < 1) throw new Error('the shards table is empty: run the migrations (tock migrate)');
  return n;
}

const byId = (a: number, b: number) => a - b;

/** One shard-lease step of scheduler node `nodeId` (see the module's header); `shardCount`: the store's. */
export async function shardStep(
  db: Queryable,
  p: Parameters<Store['shardStep']>[0] & { shardCount: () => Promise<number> },
): Promise<ShardStep> {
  const now = checkInstant(p.now, 'now');
  if (!Number.isInteger(p.leaseMs) || p.leaseMs < 100)
    throw new ValidationError('shard lease must be at least 100ms');
  const expiry = new Date(p.now + p.leaseMs);
  await touchNode(db, { ...p, role: 'scheduler' });
  const shardCount = await p.shardCount();
  const live = await db.query(S.nodeCountLive, ['scheduler', new Date(p.now - p.leaseMs)]);
  const liveNodes = Math.max(1, live.rows[0].n as number);
  const fairShare = Math.ceil(shardCount / liveNodes);
  let owned = (await db.query(S.shardRenew, [p.nodeId, now, expiry])).rows.map(toShardLease);
  owned.sort((a, b) => a.shardId - b.shardId);
  let released: number[] = [];
  let taken: number[] = [];
  if (owned.length > fairShare) {
    const extra = owned.slice(fairShare).map((o) => o.shardId);
    const { rows } = await db.query(S.shardRelease, [p.nodeId, extra]);
    released = rows.map((r) => r.shard_id as number).sort(byId);
    owned = owned.filter((o) => !released.includes(o.shardId));
  } else if (owned.length < fairShare) {
    const { rows } = await db.query(S.shardTake, [p.nodeId, now, expiry, fairShare - owned.length]);
    const got = rows.map(toShardLease);
    taken = got.map((g) => g.shardId).sort(byId);
    owned = [...owned, ...got].sort((a, b) => a.shardId - b.shardId);
  }
  const next = await db.query(S.shardNextForeignExpiry, [p.nodeId, now]);
  return {
    owned,
    released,
    taken,
    liveNodes,
    fairShare,
    shardCount,
    nextForeignExpiry: (next.rows[0]?.at as Date | null) ?? null,
  };
}

/** A node leaving on purpose: gives back every shard of `shardIds` it holds and forgets the node (one transaction). */
export async function leaveNode(
  db: Queryable,
  p: { nodeId: string; shardIds: number[] },
): Promise<{ released: number[] }> {
  const { rows } = await db.query(S.shardRelease, [p.nodeId, p.shardIds]);
  await db.query(S.nodeDelete, [p.nodeId]);
  return { released: rows.map((r) => r.shard_id as number).sort(byId) };
}

export async function listShards(db: Queryable): Promise<ShardInfo[]> {
  const { rows } = await db.query(S.shardList);
  return rows.map(toShard);
}

/** Jobs due by `now` whose slots are not materialised yet, per shard of `shardIds`: the backlog. */
export async function dueBacklog(
  db: Queryable,
  p: { now: number; shardIds: number[] },
): Promise<Map<number, number>> {
  const { rows } = await db.query(S.jobBacklog, [checkInstant(p.now, 'now'), p.shardIds]);
  return new Map(rows.map((r) => [r.shard_id as number, r.n as number]));
}
