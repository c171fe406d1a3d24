/**
 * The storage figures of Tock's tables (`Store.tableStats`): what the `tock_table_*` gauges show,
 * read from the server's statistics in one statement (`queries/table-stats.ts`).
 */
import { TOCK_TABLES, tableStatsRead } from './queries/table-stats.js';
import type { Queryable } from './rows.js';
import type { TableStats } from './types.js';

export async function tableStats(db: Queryable): Promise<TableStats[]> {
  const { rows } = await db.query(tableStatsRead, [TOCK_TABLES]);
  // bigint counters come back as strings; a table's counts stay far below 2^53.
  return rows.map((r) => ({
    table: r.table_name as string,
    liveTuples: Number(r.live),
    deadTuples: Number(r.dead),
    updates: Number(r.updates),
    hotUpdates: Number(r.hot_updates),
    bytes: Number(r.bytes),
    lastAutovacuumAt: (r.last_autovacuum as Date | null) ?? null,
  }));
}
