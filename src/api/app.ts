/**
 * The HTTP API (`/v1`), built but not listening: the runtime calls `listen`. It owns the
 * contract of DESIGN.md's table: strict validation (TypeBox schemas, no coercion, unknown fields
 * refused), one error envelope `{error: {code, message}}` mapped from error codes, bearer keys
 * scoped to a tenant and a role, a per-tenant request quota, request logs without keys or
 * payloads, Prometheus metrics and the OpenAPI document. It also holds the server to the limits
 * of `limits.ts` (timeouts, connections, waiting long-polls) and answers a database it cannot reach
 * with 503 `unavailable`.
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
import { allows, type Clock, keyOfRole, type Permission, type Role } from '../core/index.js';
import type { Store } from '../store/index.js';
import { answerClientError, answerError, envelope } from './errors.js';
import { capConnectionsPerAddress, type HttpLimits, httpLimits, serverOptions } from './limits.js';
import { LongPolls, type Wakeups } from './long-poll.js';
import type { Metrics, RunGaugeSampler } from './metrics.js';
import { TenantQuota } from './quota.js';
import { registerRoutes } from './routes/index.js';
import { refuseUnstorableText } from './text-guard.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route needs; routes without it are public (health, readiness, OpenAPI). */
    permission?: Permission;
  }
  interface FastifyRequest {
    principal: { tenantId: string; role: Role; keyId: string | null };
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

/** Longest path parameter the router accepts; the schemas then hold ids to 200 characters. */
const MAX_PARAM_LENGTH = 1000;

/** What each permission lets a key do, for the 403 message. */
const DOING: Record<Permission, string> = {
  read: 'read',
  operate: 'operate',
  work: 'work runs',
  admin: 'manage API keys',
  cluster: 'read cluster-wide facts (a cluster-admin key is needed)',
};

export async function buildApp(o: AppOptions): Promise<App> {
  const limits = httpLimits(o.limits);
  const app = Fastify({
    // Slow clients: the whole request must arrive in time (a long-poll's wait comes after it),
    // idle keep-alive connections close, a silent connection closes.
    ...serverOptions(limits),
    // What Node's parser refuses (an over-long request line, bad HTTP) gets the envelope too.
    clientErrorHandler: answerClientError,
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

  // Connections past the cap are closed as they arrive.
  app.server.maxConnections = limits.maxConnections;
  capConnectionsPerAddress(app.server, limits.maxConnectionsPerAddress);
  app.server.headersTimeout = limits.headersTimeoutMs;

  app.decorateRequest('principal', undefined as unknown as FastifyRequest['principal']);
  const quota = new TenantQuota(o.clock, o.quota?.perSecond ?? 200, o.quota?.burst ?? 400);
  // Re-claims of waiting long-polls have a bucket of their own, of the same size (long-poll.ts).
  const reclaims = new TenantQuota(o.clock, o.quota?.perSecond ?? 200, o.quota?.burst ?? 400);
  app.decorate('longPolls', new LongPolls({ clock: o.clock, reclaims, limits, wakeups: o.wakeups }));
  // Closing waits for requests in flight: waiting long-polls answer at once rather than hold it up to 30 s.
  app.addHook('preClose', async () => app.longPolls.close());
  // A caller refused for its key may still be sending a body: close the connection rather than
  // read (and wait for) the rest of it.
  const refuse = (reply: FastifyReply, status: 401 | 403, code: string, message: string) =>
    reply.code(status).header('connection', 'close').send(envelope(code, message));

  app.addHook('onRequest', async (request, reply) => {
    const permission = request.routeOptions.config.permission;
    if (!permission) return;
    if (o.auth === 'open') {
      request.principal = { tenantId: o.openTenant ?? 'default', role: 'cluster-admin', keyId: null };
    } else {
      const header = request.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer ([^\s]+)$/i.exec(header) : null;
      if (!match) {
        return refuse(reply, 401, 'unauthorized', 'an API key is required: Authorization: Bearer <key>');
      }
      const key = await o.store.authenticate(match[1]!);
      if (!key) return refuse(reply, 401, 'unauthorized', 'the API key is unknown or revoked');
      request.principal = { tenantId: key.tenantId, role: key.role, keyId: key.keyId };
    }
    if (!allows(request.principal.role, permission)) {
      return refuse(
        reply,
        403,
        'forbidden',
        `${keyOfRole(request.principal.role)} may not ${DOING[permission]}`,
      );
    }
    const wait = quota.take(request.principal.tenantId);
    if (wait > 0) {
      return reply
        .code(429)
        .header('retry-after', String(Math.ceil(wait / 1000)))
        .send(envelope('rate_limited', 'the tenant request quota is spent; retry later'));
    }
  });

  app.addHook('preValidation', refuseUnstorableText);

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

  app.setErrorHandler(answerError);

  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(envelope('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)),
  );

  registerRoutes(app, o);
  return app;
}
