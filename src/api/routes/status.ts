/**
 * `GET /v1/status`, scoped by the caller. A cluster-admin key (or `tock dev`'s open mode) sees the
 * cluster: every node, the shard ownership and the global backlog. Any other operator sees its
 * own tenant's remote workers only: no scheduler (pid, URL), no other tenant's names or pools,
 * no cluster-wide figure. The node list is paged (DEFAULT_STATUS_NODES a page). Either scope names
 * the claimable runs that no live worker serves (its own tenant's only for a tenant's key): a run
 * whose handler nobody runs would otherwise wait forever without a hint.
 */
import { allows, DEFAULT_NODE_LIVE_MS } from '../../core/index.js';
import type { NodeInfo } from '../../store/index.js';
import type { App, AppOptions } from '../app.js';
import * as S from '../schemas.js';
import { errors, limitOf } from './shared.js';

/** How many (tenant, pool, handler) groups of unserved runs `GET /v1/status` lists (all are counted). */
export const STATUS_UNSERVED_GROUPS = 20;
/** Nodes per page of `GET /v1/status` when no `limit` is given (at most 500). */
export const DEFAULT_STATUS_NODES = 100;

export function registerStatusRoute(app: App, o: AppOptions): void {
  const { store, clock } = o;
  app.get(
    '/v1/status',
    {
      config: { permission: 'operate' },
      schema: {
        summary:
          "Nodes (one page) with their last heartbeat and clock offset; for a cluster-admin also shard ownership and backlog, else the tenant's remote workers only",
        tags: ['operations'],
        querystring: S.StatusQuery,
        response: { 200: S.StatusAnswer, ...errors },
      },
    },
    async (request) => {
      const t = clock.nowMs();
      const q = request.query as { limit?: string; cursor?: string };
      const cluster = allows(request.principal.role, 'cluster');
      const page = await store.listNodes({
        tenantId: cluster ? null : request.principal.tenantId,
        limit: limitOf(q, DEFAULT_STATUS_NODES),
        cursor: q.cursor ?? null,
      });
      const node = (n: NodeInfo, shards: number) => {
        const liveMs = typeof n.info.live_ms === 'number' ? n.info.live_ms : DEFAULT_NODE_LIVE_MS;
        return {
          node_id: n.nodeId,
          role: n.role,
          tenant_id: n.tenantId,
          started_at: n.startedAt.toISOString(),
          last_seen_at: n.lastSeenAt.toISOString(),
          live: t - n.lastSeenAt.getTime() < liveMs,
          clock_offset_ms: n.clockOffsetMs,
          clock_uncertainty_ms: n.clockUncertaintyMs,
          shards,
          info: n.info,
        };
      };
      const unserved = await store.unservedRuns({
        now: t,
        tenantId: cluster ? null : request.principal.tenantId,
        limit: STATUS_UNSERVED_GROUPS,
      });
      const head = {
        server_time: new Date(t).toISOString(),
        unserved: {
          runs: unserved.runs,
          groups: unserved.groups,
          items: unserved.items.map((u) => ({
            tenant_id: u.tenantId,
            pool: u.pool,
            handler: u.handler,
            runs: u.runs,
            since: u.since.toISOString(),
          })),
        },
      };
      if (!cluster) {
        return {
          ...head,
          scope: 'tenant',
          nodes: page.items.map((n) => node(n, 0)),
          next_cursor: page.nextCursor,
        };
      }
      const [shards, due, ready] = await Promise.all([
        store.listShards(),
        store.dueBacklog({ now: t }),
        store.readyDepth({ now: t }),
      ]);
      const byOwner: Record<string, number[]> = {};
      let owned = 0;
      for (const s of shards) {
        if (s.owner === null || s.leaseExpiresAt === null || s.leaseExpiresAt.getTime() <= t) continue;
        owned += 1;
        const list = byOwner[s.owner] ?? [];
        list.push(s.shardId);
        byOwner[s.owner] = list;
      }
      const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
      return {
        ...head,
        scope: 'cluster',
        nodes: page.items.map((n) => node(n, byOwner[n.nodeId]?.length ?? 0)),
        next_cursor: page.nextCursor,
        shards: { count: shards.length, owned, unowned: shards.length - owned, by_owner: byOwner },
        backlog: { due_jobs: sum(due), ready_runs: sum(ready) },
      };
    },
  );
}
