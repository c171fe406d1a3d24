/**
 * The service's own state: `GET /v1/status`, health, readiness, metrics and the OpenAPI document.
 *
 * `/v1/status` is scoped by the caller. A cluster-admin key (or `tock dev`'s open mode) sees the
 * cluster: every node, the shard ownership and the global backlog. Any other operator sees its
 * own tenant's remote workers only: no scheduler (pid, URL), no other tenant's names or pools,
 * no cluster-wide figure. The node list is paged (DEFAULT_STATUS_NODES a page). Either scope names
 * the claimable runs that no live worker serves (its own tenant's only for a tenant's key): a run
 * whose handler nobody runs would otherwise wait forever without a hint.
 *
 * `/metrics` needs a key with the `cluster` permission (a cluster-admin key; open in `tock dev`),
 * and reads the database at most once per METRICS_SAMPLE_MS whatever the scrape rate. `/readyz`
 * needs no key, so it runs the readiness check at most once per READINESS_CACHE_MS whatever the
 * call rate: concurrent calls share one check in flight, and later calls within the interval get
 * its answer.
 */
import type { Static } from 'typebox';
import { allows, type Clock, DEFAULT_NODE_LIVE_MS } from '../../core/index.js';
import type { NodeInfo, ShardInfo, UnservedRuns } from '../../store/index.js';
import { RunGaugeSampler } from '../metrics.js';
import * as S from '../schemas.js';
import type { RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors, limitOf } from './shared.js';

/** How many (tenant, pool, handler) groups of unserved runs `GET /v1/status` lists (all are counted). */
export const STATUS_UNSERVED_GROUPS = 20;
/** Nodes per page of `GET /v1/status` when no `limit` is given (at most 500). */
export const DEFAULT_STATUS_NODES = 100;
/** How long `/readyz` reuses a readiness answer (measured from the start of its check), ms. */
export const READINESS_CACHE_MS = 1000;

type Readiness = { database: boolean; migrations: boolean };

export interface StatusOptions extends RouteOptions {
  /** Whether the database answers and migrations are current (for /readyz). */
  readiness: () => Promise<Readiness>;
  /** The run-gauge sample `/metrics` serves. Default: one of the route module's own. */
  runGauges?: RunGaugeSampler;
}

/**
 * `check` at most once per `intervalMs` of `clock`: a call while a check is in flight shares it; a
 * call within the interval after its start gets its answer. A check that throws answers not ready
 * (and is reused like any answer). A check still in flight is shared even past the interval. A
 * clock set back before the last start checks again.
 */
export function cachedReadiness(
  check: () => Promise<Readiness>,
  clock: Clock,
  intervalMs = READINESS_CACHE_MS,
): () => Promise<Readiness> {
  let last: { startMs: number; answer: Promise<Readiness>; inFlight: boolean } | null = null;
  return () => {
    const now = clock.nowMs();
    if (last && (last.inFlight || (now >= last.startMs && now - last.startMs < intervalMs)))
      return last.answer;
    const entry: { startMs: number; answer: Promise<Readiness>; inFlight: boolean } = {
      startMs: now,
      inFlight: true,
      answer: check()
        .catch(() => ({ database: false, migrations: false }))
        .finally(() => {
          entry.inFlight = false;
        }),
    };
    last = entry;
    return entry.answer;
  };
}

export const statusRoutes: RoutePlugin<StatusOptions> = async (app, o) => {
  const readiness = cachedReadiness(o.readiness, o.clock);
  const sampler = o.runGauges ?? new RunGaugeSampler({ store: o.store, clock: o.clock, metrics: o.metrics });
  statusRoute(app, o);

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const r = await readiness();
    const ready = r.database && r.migrations;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', ...r });
  });

  app.get(
    '/metrics',
    { config: { permission: 'cluster' }, schema: { hide: true } },
    async (request, reply) => {
      try {
        await sampler.refresh();
      } catch (err) {
        request.log.warn({ err }, 'metrics: could not sample run counts; serving the last sample');
      }
      return reply.type(o.metrics.registry.contentType).send(await o.metrics.registry.metrics());
    },
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
};

/** A node as `/v1/status` lists it: live by its own liveness window, with the shards it holds. */
function nodeJson(n: NodeInfo, shards: number, t: number) {
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
}

function unservedJson(unserved: UnservedRuns) {
  return {
    runs: unserved.runs,
    groups: unserved.groups,
    items: unserved.items.map((u) => ({
      tenant_id: u.tenantId,
      pool: u.pool,
      handler: u.handler,
      runs: u.runs,
      since: u.since.toISOString(),
    })),
  };
}

/** The shards under a live lease at `t`, by owner, and how many they are. */
function shardOwners(shards: readonly ShardInfo[], t: number) {
  const byOwner: Record<string, number[]> = {};
  let owned = 0;
  for (const s of shards) {
    if (s.owner === null || s.leaseExpiresAt === null || s.leaseExpiresAt.getTime() <= t) continue;
    owned += 1;
    const list = byOwner[s.owner] ?? [];
    list.push(s.shardId);
    byOwner[s.owner] = list;
  }
  return { byOwner, owned };
}

function statusRoute(app: RouteApp, { store, clock }: RouteOptions): void {
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
    async (request): Promise<Static<typeof S.StatusAnswer>> => {
      const t = clock.nowMs();
      const cluster = allows(request.principal.role, 'cluster');
      const tenantId = cluster ? null : request.principal.tenantId;
      const page = await store.listNodes({
        tenantId,
        limit: limitOf(request.query, DEFAULT_STATUS_NODES),
        cursor: request.query.cursor ?? null,
      });
      const unserved = await store.unservedRuns({ now: t, tenantId, limit: STATUS_UNSERVED_GROUPS });
      const head = { server_time: new Date(t).toISOString(), unserved: unservedJson(unserved) };
      if (!cluster) {
        return {
          ...head,
          scope: 'tenant',
          nodes: page.items.map((n) => nodeJson(n, 0, t)),
          next_cursor: page.nextCursor,
        };
      }
      const [shards, due, ready] = await Promise.all([
        store.listShards(),
        store.dueBacklog({ now: t }),
        store.readyDepth({ now: t }),
      ]);
      const { byOwner, owned } = shardOwners(shards, t);
      const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
      const queues = ready.slice(0, S.MAX_READY_QUEUES);
      return {
        ...head,
        scope: 'cluster',
        nodes: page.items.map((n) => nodeJson(n, byOwner[n.nodeId]?.length ?? 0, t)),
        next_cursor: page.nextCursor,
        shards: { count: shards.length, owned, unowned: shards.length - owned, by_owner: byOwner },
        backlog: {
          due_jobs: sum(due),
          ready_runs: ready.reduce((a, q) => a + q.ready, 0),
          queues: queues.map((q) => ({ pool: q.pool, priority: q.priority, ready: q.ready })),
          queues_more: ready.length - queues.length,
        },
      };
    },
  );
}
