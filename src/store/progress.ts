/**
 * What handlers report (progress, log lines) as the store's statements take it: one jsonb
 * parameter of the reports of a batch (`writeReports` in `queries/progress.ts`), checked, bounded and
 * sanitised here — the last line of defence, so that no report a worker or an API caller sends can
 * make a heartbeat or a result fail as data (a lease lost over a log line).
 */
import {
  checkProgressValue,
  hasReport,
  type LeaseRef,
  LOG_LINES_MAX,
  logLine,
  logTail,
  progressMessage,
  type RunReport,
  ValidationError,
} from '../core/index.js';

interface ReportRow {
  run_id: string;
  lease_token: string;
  progress: number | null;
  message: string | null;
  logs: string[];
  dropped: number;
}

/** A worker's count of dropped lines: a non-negative integer (bounded to what JSON carries exactly). */
function droppedOf(n: number | undefined): number {
  if (n === undefined) return 0;
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new ValidationError('logs_dropped must be a non-negative integer', { field: 'logs_dropped' });
  }
  return n;
}

/**
 * The reports of `leases` (the well-formed ones, as `checkLeases` keeps them) as the statements'
 * jsonb parameter, null when none reports anything. Two reports of one lease are merged (the later
 * progress wins, lines in order): the statement writes each (run, token) once.
 */
export function reportsParam(leases: readonly (LeaseRef & RunReport)[]): string | null {
  const byLease = new Map<string, ReportRow>();
  for (const l of leases) {
    if (!hasReport(l)) continue;
    const progress = l.progress == null ? null : checkProgressValue(l.progress.value);
    const lines = (l.logs ?? []).map(logLine);
    // As uuids compare: one (run, token) pair in two spellings is one row of the upsert.
    const key = `${l.runId.toLowerCase()} ${l.leaseToken.toLowerCase()}`;
    const row = byLease.get(key);
    if (row) {
      if (progress !== null) {
        row.progress = progress;
        row.message = progressMessage(l.progress?.message);
      }
      row.logs.push(...lines);
      row.dropped += droppedOf(l.logsDropped);
    } else {
      byLease.set(key, {
        run_id: l.runId,
        lease_token: l.leaseToken,
        progress,
        message: progress === null ? null : progressMessage(l.progress?.message),
        logs: lines,
        dropped: droppedOf(l.logsDropped),
      });
    }
  }
  if (byLease.size === 0) return null;
  const rows = [...byLease.values()].map((r) => {
    if (r.logs.length <= LOG_LINES_MAX) return r;
    const { logs, dropped } = logTail(r.logs);
    return { ...r, logs, dropped: r.dropped + dropped };
  });
  return JSON.stringify(rows);
}
