/** The HTTP API in-process on a free loopback port, on a test database's store. */
import pino from 'pino';
import { type App, type AppOptions, buildApp, Metrics } from '../../src/api/index.js';
import type { TestDatabase } from './database.js';

export interface Api {
  app: App;
  metrics: Metrics;
  /** `http://127.0.0.1:<port>` */
  base: string;
  close(): Promise<void>;
}

/**
 * Builds the app as the brief fixes it (keys, silent logs, ready), then listens on a loopback port:
 * `port`, or a free one.
 */
export async function startApi(
  db: TestDatabase,
  overrides: Partial<AppOptions> = {},
  port = 0,
): Promise<Api> {
  const metrics = overrides.metrics ?? new Metrics({ processMetrics: false });
  const app = await buildApp({
    store: db.store,
    clock: db.clock,
    logger: pino({ level: 'silent' }),
    metrics,
    auth: 'keys',
    readiness: async () => ({ database: true, migrations: true }),
    ...overrides,
  });
  await app.listen({ host: '127.0.0.1', port });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('the app is not listening on TCP');
  return { app, metrics, base: `http://127.0.0.1:${address.port}`, close: () => app.close() };
}
