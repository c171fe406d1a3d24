/**
 * The Tock library: the HTTP client, the store, the scheduler loops, the worker, the clocks and
 * the errors. The API's JSON shapes are the `Api` namespace (`Api.Job`, `Api.Run`), apart from the
 * store's camelCase `Job` and `Run`.
 */
export {
  type ClaimOptions,
  type CompleteOptions,
  HttpLeaseSource,
  type HttpLeaseSourceOptions,
  HttpLeaseStore,
  type HttpLeaseStoreOptions,
  type ListRunsOptions,
  type PageOptions,
  TockApiError,
  TockClient,
  type TockClientOptions,
  TockConnectionError,
  type TriggerOptions,
} from './client/index.js';
export type * as Api from './client/types.js';
export * from './core/index.js';
export { Reaper, type ReaperOptions, TickLoop, type TickLoopOptions } from './scheduler/index.js';
export {
  createPool,
  type EmbeddedDatabase,
  type EmbeddedOptions,
  migrate,
  PostgresStore,
  type PostgresStoreOptions,
  pendingMigrations,
  startEmbedded,
} from './store/index.js';
export type * from './store/types.js';
// The worker, its handler types, the built-in executors and the configuration file declaring them.
export {
  type ExecExecutorConfig,
  execExecutor,
  type Handler,
  type HttpExecutorConfig,
  httpExecutor,
  parseWorkerConfig,
  type RunContext,
  readWorkerConfig,
  Worker,
  type WorkerOptions,
} from './worker/index.js';
