/**
 * Operations: the status, health, readiness, metrics and the OpenAPI document. `/metrics` needs a
 * key with the `cluster` permission (a cluster-admin key; open in `tock dev`), and reads the
 * database at most once per METRICS_SAMPLE_MS whatever the scrape rate. `/readyz` needs no key, so
 * it runs the readiness check at most once per READINESS_CACHE_MS whatever the call rate:
 * concurrent calls share one check in flight, and later calls within the interval get its answer.
 */
import type { Clock } from '../../core/index.js';
import type { App, AppOptions } from '../app.js';
import { RunGaugeSampler } from '../metrics.js';
import { registerStatusRoute } from './status.js';

/** How long `/readyz` reuses a readiness answer (measured from the start of its check), ms. */
export const READINESS_CACHE_MS = 1000;

type Readiness = { database: boolean; migrations: boolean };

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

export function registerOperationRoutes(app: App, o: AppOptions): void {
  const readiness = cachedReadiness(o.readiness, o.clock);
  const sampler = o.runGauges ?? new RunGaugeSampler({ store: o.store, clock: o.clock, metrics: o.metrics });
  registerStatusRoute(app, o);

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
}
