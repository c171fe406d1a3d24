/**
 * The `nodes` table: who is alive, for the shards' fair share and for `tock status`. Cluster nodes
 * (schedulers, workers on the database; `tenant_id` null) write their own rows. Remote workers,
 * seen only through the HTTP API, are rows `<tenant>/<worker_id>`: an API caller can never write a
 * cluster node's row or another tenant's, and a tenant keeps at most `cap` of them (the least
 * recently seen give way, under a per-tenant lock so the cap is exact with several API servers).
 */
import { remoteNodeId, ValidationError, validateId } from '../core/index.js';
import { checkInstant, checkLimit } from './checks.js';
import { decodeCursor, encodeCursor, notIssued } from './cursor.js';
import * as S from './queries/shards.js';
import { type Queryable, toNode } from './rows.js';
import type { Store } from './store.js';
import type { NodeInfo, Page } from './types.js';

/** The largest page of nodes. */
export const MAX_NODE_PAGE = 500;

/** Registers a cluster node or records that it is alive, with its clock offset and what it reports. */
export async function touchNode(db: Queryable, p: Parameters<Store['touchNode']>[0]): Promise<void> {
  await db.query(S.nodeTouch, [
    validateId(p.nodeId, 'node_id'),
    p.role,
    checkInstant(p.now, 'now'),
    p.clock?.offsetMs ?? null,
    p.clock?.uncertaintyMs ?? null,
    JSON.stringify(p.info ?? {}),
  ]);
}

/** The checked parameters of a remote worker's touch, before its transaction. */
export function checkRemoteTouch(p: Parameters<Store['touchRemoteWorker']>[0]) {
  const tenantId = validateId(p.tenantId, 'tenant_id');
  const nodeId = remoteNodeId(tenantId, validateId(p.workerId, 'worker_id'));
  if (!Number.isInteger(p.cap) || p.cap < 1) throw new ValidationError('cap must be a positive integer');
  return { ...p, tenantId, nodeId, now: checkInstant(p.now, 'now') };
}

/** A remote worker says it is alive (checked by `checkRemoteTouch`; one transaction, `db` a client in it). */
export async function touchRemoteWorker(
  db: Queryable,
  p: ReturnType<typeof checkRemoteTouch>,
): Promise<{ nodeId: string; touched: boolean; evicted: number }> {
  await db.query(S.nodeRemoteLock, [p.tenantId]);
  const { rows } = await db.query(S.nodeTouchRemote, [
    p.nodeId,
    p.tenantId,
    p.now,
    JSON.stringify(p.info ?? {}),
    p.cap,
    p.clock?.offsetMs ?? null,
    p.clock?.uncertaintyMs ?? null,
  ]);
  return { nodeId: p.nodeId, touched: rows[0].touched === 1, evicted: rows[0].evicted as number };
}

/** A remote worker of `tenantId` leaving on purpose: its row goes (no other tenant's, no cluster node's). */
export async function leaveRemoteWorker(
  db: Queryable,
  p: { tenantId: string; workerId: string },
): Promise<{ left: boolean }> {
  const tenantId = validateId(p.tenantId, 'tenant_id');
  const nodeId = remoteNodeId(tenantId, validateId(p.workerId, 'worker_id'));
  const { rowCount } = await db.query(S.nodeDeleteRemote, [nodeId, tenantId]);
  return { left: (rowCount ?? 0) > 0 };
}

/** Forgets cluster nodes not seen since `before` and remote workers not seen since `remoteBefore` (default `before`). */
export async function pruneNodes(
  db: Queryable,
  p: { before: number; remoteBefore?: number },
): Promise<number> {
  const { rowCount } = await db.query(S.nodePrune, [
    checkInstant(p.before, 'before'),
    checkInstant(p.remoteBefore ?? p.before, 'remoteBefore'),
  ]);
  return rowCount ?? 0;
}

/** Nodes by role, then newest first, one page after the cursor (the last node's role, start and id). */
export async function listNodes(
  db: Queryable,
  p: { tenantId?: string | null; limit: number; cursor?: string | null },
): Promise<Page<NodeInfo>> {
  const limit = checkLimit(p.limit, MAX_NODE_PAGE);
  let after: [string | null, Date | null, string | null] = [null, null, null];
  if (p.cursor) {
    const [role, ms, id] = decodeCursor(p.cursor);
    if (typeof role !== 'string' || typeof ms !== 'number' || typeof id !== 'string') throw notIssued();
    after = [role, checkInstant(ms, 'cursor'), id];
  }
  const { rows } = await db.query(S.nodeList, [p.tenantId ?? null, limit + 1, ...after]);
  const items = rows.slice(0, limit).map(toNode);
  const last = items[items.length - 1];
  return {
    items,
    nextCursor:
      rows.length > limit && last ? encodeCursor([last.role, last.startedAt.getTime(), last.nodeId]) : null,
  };
}
