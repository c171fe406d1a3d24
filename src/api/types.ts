/**
 * What `app.ts`, the plugins and the route modules share: the instance types, what every route
 * module is given, and what the API adds to Fastify's request and route config. Types only, and it
 * imports no module of the API that imports it back (no `app.ts`, no route, no plugin), so any of
 * them may import it: `app.ts` registers the routes without the routes importing `app.ts`.
 */
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Clock, Permission, Role } from '../core/index.js';
import type { Store } from '../store/index.js';
import type { Metrics } from './metrics.js';

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
}

// biome-ignore lint/suspicious/noExplicitAny: the instance's generics (logger, type provider) vary by construction
export type App = FastifyInstance<any, any, any, any, any>;

/** What every route module is given: the store it answers from, the clock, the metrics it feeds. */
export interface RouteOptions {
  store: Store;
  clock: Clock;
  metrics: Metrics;
}

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
