/** The HTTP API: `buildApp` (not listening), its metrics and schemas. */
export { type App, type AppOptions, buildApp } from './app.js';
export { Metrics } from './metrics.js';
