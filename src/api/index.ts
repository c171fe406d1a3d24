/** The HTTP API: `buildApp` (not listening), its metrics and schemas. */
export { type App, type AppOptions, buildApp } from './app.js';
export { DEFAULT_HTTP_LIMITS, type HttpLimits } from './limits.js';
export { listenForRuns, RunWakeups, type Wakeups } from './long-poll.js';
export { Metrics } from './metrics.js';
