/** The HTTP API: `buildApp` (not listening), its metrics and schemas. */
export { type AppOptions, buildApp } from './app.js';
export { type JobGaugeOptions, JobGauges } from './job-metrics.js';
export { DEFAULT_HTTP_LIMITS, type HttpLimits } from './limits.js';
export { listenForRuns, RunWakeups, type Wakeups } from './long-poll.js';
export {
  MAX_POOL_LABELS,
  METRICS_SAMPLE_MS,
  Metrics,
  OTHER_POOL_LABEL,
  RunGaugeSampler,
  schedulingDelayMs,
} from './metrics.js';
export type { App } from './types.js';
