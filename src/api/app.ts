/**
 * The HTTP API (`/v1`), built but not listening: the runtime calls `listen`. It owns the
 * contract of DESIGN.md's table: strict validation (TypeBox schemas, no coercion, unknown fields
 * refused), one error envelope `{error: {code, message}}` mapped from error codes, bearer keys
 * scoped to a tenant and a role, a per-tenant request quota, request logs without keys or
 * payloads, Prometheus metrics and the OpenAPI document. It also holds the server to the limits
 * of `limits.ts` (timeouts, connections, waiting long-polls) and answers a database it cannot reach
 * with 503 `unavailable`.
 *
 * `buildApp` is the wiring only: the cross-cutting parts are `plugins/` (auth, quota, errors,
 * request metrics; idempotency is called by the routes that take a key), added to the root
 * instance first; then each resource's routes, `routes/*.ts`, registered as encapsulated plugins
 * that inherit them, each given what it needs (the lease routes also the waiting long-polls, which
 * the app closes first when it closes). The order of registration is the order of the OpenAPI
 * document's paths. Last, the web console's static files (`routes/console.ts`), public like
 * `/healthz`: the console itself signs in with a key and uses only the `/v1` API.
 */
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController } from 'fastify';
import type { Logger } from 'pino';
import type { Clock } from '../core/index.js';
import type { Store } from '../store/index.js';
import { capConnectionsPerAddress, type HttpLimits, httpLimits, serverOptions } from './limits.js';
import { LongPolls, type Wakeups } from './long-poll.js';
import type { Metrics, RunGaugeSampler } from './metrics.js';
import { type AuthMode, addAuth } from './plugins/auth.js';
import { addErrorAnswers, answerClientError, answerFrameworkError } from './plugins/errors.js';
import { addRequestMetrics } from './plugins/metrics.js';
import { addTenantQuota, DEFAULT_QUOTA, DEFAULT_WORKER_QUOTA, TenantQuota } from './plugins/quota.js';
import { consoleRoutes } from './routes/console.js';
import { delayRoutes } from './routes/delay.js';
import { jobRoutes } from './routes/jobs.js';
import { keyRoutes } from './routes/keys.js';
import { leaseRoutes } from './routes/leases.js';
import { limitRoutes } from './routes/limits.js';
import { notificationRoutes } from './routes/notifications.js';
import { retentionRoutes } from './routes/retention.js';
import { runRoutes } from './routes/runs.js';
import { scheduleRoutes } from './routes/schedule.js';
import { sessionRoutes } from './routes/session.js';
import { statusRoutes } from './routes/status.js';
import { refuseUnstorableText } from './text-guard.js';
import type { App } from './types.js';

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
  auth: AuthMode;
  /** Tenant of open mode. Default `default`. */
  openTenant?: string;
  /**
   * Requests per second each tenant may make (token bucket), and the burst. Default 200/s, 400.
   * Re-claims of waiting long-polls are counted in a second bucket of the same size.
   */
  quota?: { perSecond: number; burst: number };
  /**
   * The bucket the tenant's lease requests (the routes of permission `work`: claims, heartbeats,
   * results, worker reports) are counted in, apart from `quota`, so that its workers and its other
   * callers cannot starve each other. A batch is one request. Default 1000/s, 2000.
   */
  workerQuota?: { perSecond: number; burst: number };
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
  /**
   * URL prefixes a webhook notification may send to (`--notify-allow`), as the HTTP executor's
   * allow-list (`https://hooks.example.com/`, `http://127.0.0.1:`). Default none: no notification
   * can be written.
   */
  notificationAllow?: readonly string[];
  /**
   * The web console at `/`: the directory of its built files, or `false` for none. Default the
   * package's `dist/console/` (`npm run build` writes it; without it `GET /` answers 503).
   */
  console?: string | false;
}

/** Longest path parameter the router accepts; the schemas then hold ids to 200 characters. */
const MAX_PARAM_LENGTH = 1000;

export async function buildApp(o: AppOptions): Promise<App> {
  const limits = httpLimits(o.limits);
  const app = Fastify({
    // Slow clients: the whole request must arrive in time (a long-poll's wait comes after it),
    // idle keep-alive connections close, a silent connection closes.
    ...serverOptions(limits),
    // What Node's parser refuses (an over-long request line, bad HTTP) gets the envelope too.
    clientErrorHandler: answerClientError,
    loggerInstance: o.logger,
    // Our own onResponse hook (plugins/metrics.ts) writes the one line per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 1024 * 1024,
    // Strict: nothing coerced, unknown fields refused (not silently removed).
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
    // Ids may be 200 characters (Fastify's default stops path parameters at 100 with a bare 414);
    // longer ones still reach the schemas, which answer 400 with the envelope.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: answerFrameworkError,
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

  const perSecond = o.quota?.perSecond ?? DEFAULT_QUOTA.perSecond;
  const burst = o.quota?.burst ?? DEFAULT_QUOTA.burst;
  // Re-claims of waiting long-polls have a bucket of their own, of the same size (long-poll.ts).
  const reclaims = new TenantQuota(o.clock, perSecond, burst);
  const longPolls = new LongPolls({ clock: o.clock, reclaims, limits, wakeups: o.wakeups });
  // Closing waits for requests in flight: waiting long-polls answer at once rather than hold it up to 30 s.
  app.addHook('preClose', async () => longPolls.close());

  addAuth(app, o);
  const work = o.workerQuota ?? DEFAULT_WORKER_QUOTA;
  addTenantQuota(app, {
    requests: new TenantQuota(o.clock, perSecond, burst),
    work: new TenantQuota(o.clock, work.perSecond, work.burst),
  });
  app.addHook('preValidation', refuseUnstorableText);
  addRequestMetrics(app, o.metrics);
  addErrorAnswers(app);

  const routes = { store: o.store, clock: o.clock, metrics: o.metrics };
  await app.register(jobRoutes, routes);
  await app.register(runRoutes, routes);
  await app.register(scheduleRoutes, routes);
  await app.register(delayRoutes, routes);
  await app.register(retentionRoutes, routes);
  await app.register(leaseRoutes, { ...routes, longPolls });
  await app.register(limitRoutes, routes);
  await app.register(notificationRoutes, { ...routes, allow: o.notificationAllow ?? [] });
  await app.register(keyRoutes, routes);
  await app.register(sessionRoutes, routes);
  await app.register(statusRoutes, { ...routes, readiness: o.readiness, runGauges: o.runGauges });
  if (o.console !== false) await app.register(consoleRoutes, { ...routes, dir: o.console });
  return app;
}
