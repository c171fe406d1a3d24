/**
 * The Tock library: the store, the scheduler loops, the worker, the clocks and the errors.
 */
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
export { type Handler, type RunContext, Worker, type WorkerOptions } from './worker/index.js';
