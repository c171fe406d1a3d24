/**
 * Operations: the status, health, readiness, metrics and the OpenAPI document. `/metrics` needs a
 * key with the `cluster` permission (a cluster-admin key; open in `tock dev`), and reads the
 * database at most once per METRICS_SAMPLE_MS whatever the scrape rate.
 */
import type { App, AppOptions } from '../app.js';
import { RunGaugeSampler } from '../metrics.js';
import { registerStatusRoute } from './status.js';

export function registerOperationRoutes(app: App, o: AppOptions): void {
  const sampler = o.runGauges ?? new RunGaugeSampler({ store: o.store, clock: o.clock, metrics: o.metrics });
  registerStatusRoute(app, o);

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const r = await o.readiness().catch(() => ({ database: false, migrations: false }));
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
}
