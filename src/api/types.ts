/**
 * What `app.ts`, the plugins and the route modules share: the app's options, the instance types,
 * and what the API adds to Fastify's request, route config and instance. A module of types only
 * (it imports types and declares nothing that runs), so every other module of the API may import it
 * and `app.ts` can register the routes without the routes importing `app.ts`.
 */
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Logger } from 'pino';
import type { Clock, Permission, Role } from '../core/index.js';
import type { Store } from '../store/index.js';
import type { HttpLimits } from './limits.js';
import type { LongPolls, Wakeups } from './long-poll.js';
import type { Metrics, RunGaugeSampler } from './metrics.js';

/** Who makes a request: its key's tenant and role (`keyId` null in open mode). */
export interface Principal {
  tenantId: string;
  role: Role;
  keyId: string | null;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route needs; routes without it are public (health, readiness, OpenAPI). */
    permission?: Permission;
  }
  interface FastifyRequest {
    /** Set by the auth plugin on every route that has a `permission`; undefined on public routes. */
    principal: Principal;
  }
  interface FastifyInstance {
    /** The waiting long-polls of `POST /v1/leases`, their caps and their wake-ups. */
    longPolls: LongPolls;
  }
}

export interface AppOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /**
   * `keys`: every /v1 request (and /metrics) needs `Authorization: Bearer <key>`. `open`: no keys,
   * every request acts as a cluster-admin of `openTenant` (only for `tock dev` on loopback, or
   * `--insecure`): the single user sees the whole cluster.
   */
  auth: 'keys' | 'open';
  /** Tenant of open mode. Default `default`. */
  openTenant?: string;
  /**
   * Requests per second each tenant may make (token bucket), and the burst. Default 200/s, 400.
   * Re-claims of waiting long-polls are counted in a second bucket of the same size.
   */
  quota?: { perSecond: number; burst: number };
  /** Whether the database answers and migrations are current (for /readyz). */
  readiness: () => Promise<{ database: boolean; migrations: boolean }>;
  /**
   * What waiting long-polls sleep on: the process's one listener for claimable runs
   * (`RunWakeups`). Default none: a waiting long-poll then re-claims every second
   * (`LONG_POLL_UNLISTENED_MS`).
   */
  wakeups?: Wakeups;
  /** Timeouts, connection and long-poll caps. Default `DEFAULT_HTTP_LIMITS` (see `limits.ts`). */
  limits?: Partial<HttpLimits>;
  /** The run-gauge sample `/metrics` serves (shared with a metrics listener). Default: the app's own. */
  runGauges?: RunGaugeSampler;
}

// biome-ignore lint/suspicious/noExplicitAny: the instance's generics (logger, type provider) vary by construction
export type App = FastifyInstance<any, any, any, any, any>;

/** What every route module is given: the store it answers from, the clock, the metrics it feeds. */
export type RouteOptions = Pick<AppOptions, 'store' | 'clock' | 'metrics'>;

/** A route module: a Fastify plugin whose request bodies, params and queries take their types from the TypeBox schemas. */
export type RoutePlugin<O extends RouteOptions = RouteOptions> = FastifyPluginAsyncTypebox<O>;

/** The instance a route module registers its routes on (what a {@link RoutePlugin} is given). */
export type RouteApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;
