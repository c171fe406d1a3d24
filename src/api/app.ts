/**
 * The HTTP API (`/v1`), built but not listening: the runtime calls `listen`. It owns the
 * contract of DESIGN.md's table: strict validation (TypeBox schemas, no coercion, unknown fields
 * refused), one error envelope `{error: {code, message}}` mapped from error codes, bearer keys
 * scoped to a tenant and a role, a per-tenant request quota, request logs without keys or
 * payloads, Prometheus metrics and the OpenAPI document.
 */
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import { allows, type Clock, type Permission, type Role, TockError } from '../core/index.js';
import type { Store } from '../store/index.js';
import type { Metrics, RunGaugeSampler } from './metrics.js';
import { TenantQuota } from './quota.js';
import { registerRoutes } from './routes/index.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route needs; routes without it are public (health, readiness, OpenAPI). */
    permission?: Permission;
  }
  interface FastifyRequest {
    principal: { tenantId: string; role: Role; keyId: string | null };
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
  /** Requests per second each tenant may make (token bucket), and the burst. Default 200/s, 400. */
  quota?: { perSecond: number; burst: number };
  /** Whether the database answers and migrations are current (for /readyz). */
  readiness: () => Promise<{ database: boolean; migrations: boolean }>;
  /** How long a long-poll for leases waits between claims, ms. Default 200. */
  leasePollMs?: number;
  /** The run-gauge sample `/metrics` serves (shared with a metrics listener). Default: the app's own. */
  runGauges?: RunGaugeSampler;
}

// biome-ignore lint/suspicious/noExplicitAny: the instance's generics (logger, type provider) vary by construction
export type App = FastifyInstance<any, any, any, any, any>;

function envelope(code: string, message: string, extra: Record<string, unknown> = {}) {
  return { error: { code, message, ...extra } };
}

/** Longest path parameter the router accepts; the schemas then hold ids to 200 characters. */
const MAX_PARAM_LENGTH = 1000;

const STATUS: Record<string, number> = {
  validation_error: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  lease_lost: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_mismatch: 422,
  rate_limited: 429,
};

/** What each permission lets a key do, for the 403 message. */
const DOING: Record<Permission, string> = {
  read: 'read',
  operate: 'operate',
  work: 'work runs',
  admin: 'admin',
  cluster: 'read cluster-wide facts (a cluster-admin key is needed)',
};

export async function buildApp(o: AppOptions): Promise<App> {
  const app = Fastify({
    loggerInstance: o.logger,
    // Our own onResponse hook writes the one line per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 1024 * 1024,
    // Strict: nothing coerced, unknown fields refused (not silently removed).
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
    // Ids may be 200 characters (Fastify's default stops path parameters at 100 with a bare 414);
    // longer ones still reach the schemas, which answer 400 with the envelope.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // A path the router cannot take apart (bad percent-encoding, a parameter past the limit
    // above) is bad input too: the envelope, not Fastify's own error shape.
    frameworkErrors: (err: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
      reply.code(400).send(envelope('validation_error', `the request path is invalid (${err.code})`));
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // JSON only: without this, Fastify would read text/plain bodies as strings.
  app.removeContentTypeParser('text/plain');

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Tock', description: 'A distributed job scheduler on PostgreSQL', version: '1' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });

  app.decorateRequest('principal', undefined as unknown as FastifyRequest['principal']);
  const quota = new TenantQuota(o.clock, o.quota?.perSecond ?? 200, o.quota?.burst ?? 400);

  app.addHook('onRequest', async (request, reply) => {
    const permission = request.routeOptions.config.permission;
    if (!permission) return;
    if (o.auth === 'open') {
      request.principal = { tenantId: o.openTenant ?? 'default', role: 'cluster-admin', keyId: null };
    } else {
      const header = request.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer ([^\s]+)$/i.exec(header) : null;
      if (!match) {
        return reply
          .code(401)
          .send(envelope('unauthorized', 'an API key is required: Authorization: Bearer <key>'));
      }
      const key = await o.store.authenticate(match[1]!);
      if (!key) return reply.code(401).send(envelope('unauthorized', 'the API key is unknown or revoked'));
      request.principal = { tenantId: key.tenantId, role: key.role, keyId: key.keyId };
    }
    if (!allows(request.principal.role, permission)) {
      return reply
        .code(403)
        .send(envelope('forbidden', `a ${request.principal.role} key may not ${DOING[permission]}`));
    }
    const wait = quota.take(request.principal.tenantId);
    if (wait > 0) {
      return reply
        .code(429)
        .header('retry-after', String(Math.ceil(wait / 1000)))
        .send(envelope('rate_limited', 'the tenant request quota is spent; retry later'));
    }
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unknown';
    o.metrics.requestDuration.observe(
      { method: request.method, route, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    // One line per request; never the Authorization header, never a body.
    request.log.info(
      {
        method: request.method,
        route,
        status: reply.statusCode,
        ms: Number(reply.elapsedTime.toFixed(1)),
        tenant: request.principal?.tenantId,
      },
      'request',
    );
  });

  app.setErrorHandler((err, request, reply) => {
    if (err instanceof TockError) {
      const status = STATUS[err.code] ?? 400;
      const extra = typeof err.details.run_id === 'string' ? { run_id: err.details.run_id } : {};
      return reply.code(status).send(envelope(err.code, err.message, extra));
    }
    const e = err as { validation?: unknown; statusCode?: number; code?: string; message: string };
    if (e.validation) return reply.code(400).send(envelope('validation_error', e.message));
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send(envelope('payload_too_large', 'the request body is larger than 1 MiB'));
    }
    if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return reply
        .code(415)
        .send(envelope('unsupported_media_type', 'send JSON: Content-Type: application/json'));
    }
    if (e.statusCode !== undefined && e.statusCode >= 400 && e.statusCode < 500) {
      return reply.code(e.statusCode).send(envelope('validation_error', e.message));
    }
    request.log.error({ err }, 'request failed');
    return reply.code(500).send(envelope('internal', 'internal error; see the server log'));
  });

  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(envelope('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)),
  );

  registerRoutes(app, o);
  return app;
}
