/**
 * What handlers report (`attempt_progress`, migration 0019): the fragment that the heartbeat's, the
 * completion's and the failure's statements share to write it. It writes only for the (run, token)
 * pairs of a CTE its caller has fenced (the leases that statement found live, of the caller's tenant),
 * so a lost lease writes nothing.
 */
import { LOG_LINES_MAX } from '../../core/index.js';

/** The last LOG_LINES_MAX elements of a text[] expression. */
const tail = (arr: string) => `(${arr})[greatest(cardinality(${arr}) - ${LOG_LINES_MAX - 1}, 1):]`;

/** How many elements of a text[] expression fall outside the last LOG_LINES_MAX. */
const over = (arr: string) => `greatest(cardinality(${arr}) - ${LOG_LINES_MAX}, 0)`;

/**
 * A CTE named `reported`: upserts the reports in `param` (jsonb: an array of {run_id, lease_token,
 * progress, message, logs, dropped}, at most one per pair; null: none), each only when the CTE
 * `fenced` (run_id, lease_token) holds its pair. Progress replaces the attempt's (with its
 * message) when given; log lines are appended and the log trimmed to its last LOG_LINES_MAX lines,
 * the trimmed ones counted in logs_dropped.
 */
export const writeReports = (param: string, fenced: string, now: string) => `
  reported AS (
    INSERT INTO attempt_progress AS t (run_id, lease_token, progress, message, logs, logs_dropped, updated_at)
    SELECT p.run_id, p.lease_token, p.progress, p.message, ${tail('p.logs')}, p.dropped + ${over('p.logs')}, ${now}
    FROM jsonb_to_recordset(${param}::jsonb)
      AS p(run_id uuid, lease_token uuid, progress float8, message text, logs text[], dropped bigint)
    WHERE EXISTS (SELECT 1 FROM ${fenced} f WHERE f.run_id = p.run_id AND f.lease_token = p.lease_token)
    ON CONFLICT (run_id, lease_token) DO UPDATE SET
      progress = COALESCE(EXCLUDED.progress, t.progress),
      message = CASE WHEN EXCLUDED.progress IS NULL THEN t.message ELSE EXCLUDED.message END,
      logs = ${tail('t.logs || EXCLUDED.logs')},
      logs_dropped = t.logs_dropped + EXCLUDED.logs_dropped + ${over('t.logs || EXCLUDED.logs')},
      updated_at = EXCLUDED.updated_at
  )`;

/** The columns of `attempt_progress` a read of attempts adds, from its row aliased `p`. */
export const REPORT_COLUMNS =
  'p.progress, p.message AS progress_message, p.logs, p.logs_dropped, p.updated_at AS reported_at';
