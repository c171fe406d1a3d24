/** The `/v1` routes, plus health, readiness, metrics and the OpenAPI document; one module per resource. */
import type { App, AppOptions } from '../app.js';
import { registerJobRoutes } from './jobs.js';
import { registerKeyRoutes } from './keys.js';
import { registerOperationRoutes } from './operations.js';
import { registerRunRoutes } from './runs.js';
import { registerWorkerRoutes } from './workers.js';

export function registerRoutes(app: App, o: AppOptions): void {
  registerJobRoutes(app, o);
  registerRunRoutes(app, o);
  registerWorkerRoutes(app, o);
  registerKeyRoutes(app, o);
  registerOperationRoutes(app, o);
}
