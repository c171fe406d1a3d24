/** Operations: the cluster status, health, readiness, metrics and the OpenAPI document. */
import type { App, AppOptions } from '../app.js';
import * as S from '../schemas.js';
import { errors } from './shared.js';

export function registerOperationRoutes(app: App, o: AppOptions): void {
  const { store, clock } = o;
  const now = () => clock.nowMs();
  app.get(
    '/v1/status',
    {
      config: { permission: 'operate' },
      schema: {
        summary: 'The cluster: nodes and their last heartbeat and clock offset, shard ownership, backlog',
        tags: ['operations'],
        response: { 200: S.StatusAnswer, ...errors },
      },
    },
    async () => {
      const t = now();
      const [nodes, shards, due, ready] = await Promise.all([
        store.listNodes(),
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
        server_time: new Date(t).toISOString(),
        nodes: nodes.map((n) => {
          const liveMs = typeof n.info.live_ms === 'number' ? n.info.live_ms : 30_000;
          return {
            node_id: n.nodeId,
            role: n.role,
            started_at: n.startedAt.toISOString(),
            last_seen_at: n.lastSeenAt.toISOString(),
            live: t - n.lastSeenAt.getTime() < liveMs,
            clock_offset_ms: n.clockOffsetMs,
            clock_uncertainty_ms: n.clockUncertaintyMs,
            shards: byOwner[n.nodeId]?.length ?? 0,
            info: n.info,
          };
        }),
        shards: { count: shards.length, owned, unowned: shards.length - owned, by_owner: byOwner },
        backlog: { due_jobs: sum(due), ready_runs: sum(ready) },
      };
    },
  );

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const r = await o.readiness().catch(() => ({ database: false, migrations: false }));
    const ready = r.database && r.migrations;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', ...r });
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    try {
      const counts = await store.countRuns({});
      for (const [state, n] of Object.entries(counts)) o.metrics.runsByState.set({ state }, n);
      o.metrics.readyDepth.reset();
      for (const [priority, n] of await store.readyDepth({ now: now() })) {
        o.metrics.readyDepth.set({ priority_class: String(priority) }, n);
      }
    } catch (err) {
      _request.log.warn({ err }, 'metrics: could not sample run counts');
    }
    return reply.type(o.metrics.registry.contentType).send(await o.metrics.registry.metrics());
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
