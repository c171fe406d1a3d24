/** The store: the only code that speaks SQL. */
export { archiveFile, JsonlArchive, type RunArchive } from './archive.js';
export { createPool, inTransaction, type PoolOptions } from './db.js';
export type { JobDelay, JobMisfire, JobSuccess } from './delay.js';
export { DataDirInUseError, type EmbeddedDatabase, type EmbeddedOptions, startEmbedded } from './embedded.js';
export { loadMigrations, MIGRATIONS_DIR, migrate, pendingMigrations } from './migrate.js';
export type { NotificationStore } from './notification-store.js';
export {
  MAX_BULK_JOBS,
  MAX_CLAIM_AHEAD_MS,
  MAX_NODE_PAGE,
  PostgresStore,
  type PostgresStoreOptions,
} from './postgres-store.js';
export { HELD_SCAN } from './queries/limits.js';
export { EXACT_COUNT_BELOW } from './run-reads.js';
export type { Store } from './store.js';
export * from './types.js';
