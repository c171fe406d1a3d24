/**
 * What every answered request leaves behind: its duration in `tock_http_request_duration_seconds`
 * (by method, route pattern and status: the route, not the URL, so ids make no new series) and one
 * log line, which never holds the Authorization header or a body. The `/metrics` endpoint itself is
 * a route (routes/status.ts); the metrics registry is `metrics.ts`.
 *
 * Added to the root instance (not an encapsulated plugin) so that every route module inherits it.
 */
import type { Metrics } from '../metrics.js';
import type { App } from '../types.js';

/** Adds the `onResponse` hook that records each request's duration and logs it. */
export function addRequestMetrics(app: App, metrics: Metrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unknown';
    metrics.requestDuration.observe(
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
}
