/**
 * What one run's handler reported (`ctx.progress`, `ctx.log`) and no write has carried yet. The lease
 * keeper takes it for the next heartbeat (and puts it back when the heartbeat fails); what is left
 * when the handler ends goes with its result. Bounded as the store keeps it: the latest progress,
 * and the last `LOG_LINES_MAX` lines, older ones dropped and counted, so a handler logging in a
 * tight loop costs a fixed amount of memory. Text is cut and sanitised here, so the API never
 * refuses a heartbeat over what a handler wrote.
 */
import {
  checkProgressValue,
  LOG_LINES_MAX,
  logLine,
  type ProgressReport,
  progressMessage,
  type RunReport,
} from '../core/index.js';

export class ReportBuffer {
  private latest: ProgressReport | null = null;
  private lines: string[] = [];
  private dropped = 0;

  /** Whether something is waiting to be sent. */
  get pending(): boolean {
    return this.latest !== null || this.lines.length > 0 || this.dropped > 0;
  }

  /** Replaces the unsent progress (the latest wins). A value that is not a finite number throws. */
  progress(value: number, message?: string | null): void {
    this.latest = { value: checkProgressValue(value), message: progressMessage(message) };
  }

  /** Adds a line, dropping the oldest unsent one past `LOG_LINES_MAX`. */
  log(line: string): void {
    this.lines.push(logLine(line));
    this.trim();
  }

  /** What is unsent, leaving the buffer empty; null when there is nothing. */
  take(): RunReport | null {
    if (!this.pending) return null;
    const report: RunReport = {};
    if (this.latest !== null) report.progress = this.latest;
    if (this.lines.length > 0) report.logs = this.lines;
    if (this.dropped > 0) report.logsDropped = this.dropped;
    this.latest = null;
    this.lines = [];
    this.dropped = 0;
    return report;
  }

  /** Puts back a report `take` gave that could not be sent, before what was reported since. */
  putBack(r: RunReport): void {
    this.latest ??= r.progress ?? null;
    if (r.logs !== undefined && r.logs.length > 0) this.lines = [...r.logs, ...this.lines];
    this.dropped += r.logsDropped ?? 0;
    this.trim();
  }

  private trim(): void {
    const over = this.lines.length - LOG_LINES_MAX;
    if (over <= 0) return;
    this.lines.splice(0, over);
    this.dropped += over;
  }
}
