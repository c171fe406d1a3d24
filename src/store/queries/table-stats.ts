/**
 * The storage of Tock's own tables as the server's statistics see it: live and dead tuples,
 * updates and how many of them were HOT, size on disk, last autovacuum. One read of
 * `pg_stat_user_tables` (counters the server keeps in memory; no table is scanned) and of each
 * table's files, for the tables of `TOCK_TABLES` in the current schema alone: the schema the pool
 * pins, the one `migrate` wrote into. Another application's tables in a shared schema are not
 * read, nor are Tock's tables in other schemas of the same database.
 */

/**
 * Every table Tock's migrations create (views excluded). test/store/table-stats.test.ts fails when
 * a migration adds or drops one without this list following.
 */
export const TOCK_TABLES = [
  'api_keys',
  'attempt_progress',
  'attempts',
  'idempotency_keys',
  'job_successes',
  'jobs',
  'limit_credits',
  'limit_releases',
  'limits',
  'maintenance_leases',
  'nodes',
  'notification_deliveries',
  'notifications',
  'run_claims',
  'run_queue',
  'runs',
  'shards',
  'tenant_retention',
  'tock_migrations',
] as const;

/**
 * $1 table names (text[]). One row per table of them in the current schema, by name: its tuple
 * counts, its updates (`n_tup_upd`, of which HOT `n_tup_hot_upd`, since the statistics were last
 * reset), its size with indexes and TOAST (`pg_total_relation_size`: a few `stat` calls per
 * relation, and an ACCESS SHARE lock, so it waits only behind an ACCESS EXCLUSIVE one such as a
 * migration's), and when the autovacuum last vacuumed it (null: never, since the reset).
 */
export const tableStatsRead = `
SELECT s.relname AS table_name, s.n_live_tup AS live, s.n_dead_tup AS dead, s.n_tup_upd AS updates,
  s.n_tup_hot_upd AS hot_updates, pg_total_relation_size(s.relid) AS bytes, s.last_autovacuum
FROM pg_stat_user_tables s
WHERE s.schemaname = current_schema() AND s.relname = ANY($1::text[])
ORDER BY s.relname`;
