/** What a handler reported (`LeaseReport`) as the heartbeat bodies carry it (`client.ts`). */
import type { LeaseReport } from './types.js';

/** The report's fields in the API's snake_case: only those it has. */
export function reportJson(r: LeaseReport): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (r.progress != null) {
    out.progress =
      r.progress.message == null
        ? { value: r.progress.value }
        : { value: r.progress.value, message: r.progress.message };
  }
  if (r.logs !== undefined && r.logs.length > 0) out.logs = r.logs;
  if (r.logsDropped) out.logs_dropped = r.logsDropped;
  return out;
}
