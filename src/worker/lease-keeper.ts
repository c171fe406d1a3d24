/**
 * Keeps this worker's leases: every `checkMs` it looks at the leases it holds and, once any of them
 * is a third of the way through its length (10 s of a 30 s lease), or as soon as any handler has
 * reported progress or log lines not sent yet, renews all of them in one statement, which carries
 * those reports (written only under the live leases). The lease model it enforces: a run is ours
 * only while its lease is live. A lease the heartbeat reports lost, or one that could not be
 * renewed before it expired (a heartbeat failing through an outage), is presumed gone: the run
 * steps down rather than guess. Its handler is aborted and its result dropped, or, if it was only
 * held for a slot, it is forgotten unstarted.
 */
import type { Logger } from 'pino';
import {
  type Clock,
  type HeartbeatLease,
  type HeartbeatRunsAnswer,
  LeaseLostError,
  type LeaseSource,
  Periodic,
  type RunReport,
} from '../core/index.js';
import { type ActiveRun, type ActiveRuns, abortRun, type EmitEvent } from './active-run.js';
import { isDataError } from './completer.js';
import { FailureLog } from './failure-log.js';

export interface LeaseKeeperOptions {
  source: Pick<LeaseSource, 'heartbeatRuns'>;
  clock: Clock;
  logger: Logger;
  runs: ActiveRuns;
  emit: EmitEvent;
  /** How often the leases are checked, ms. */
  checkMs: number;
  /** A held run (never started) whose lease was lost: the producer forgets it. */
  forgetHeld: (a: ActiveRun) => void;
  /** Run after each check that did not fail (the node report); it handles its own errors. */
  afterCheck?: () => Promise<void>;
  /** Told of each failed check (after it is logged). */
  onError: (err: unknown) => void;
}

export class LeaseKeeper {
  private readonly loop: Periodic;
  private readonly failures: FailureLog;
  /** A heartbeat with reports was refused as data: they go only with results from then on. */
  private reportsRefused = false;

  constructor(private readonly o: LeaseKeeperOptions) {
    this.failures = new FailureLog({
      clock: o.clock,
      logger: o.logger,
      message: 'heartbeat failed; retrying',
      recovered: 'heartbeats work again',
    });
    this.loop = new Periodic({
      clock: o.clock,
      intervalMs: o.checkMs,
      step: async () => {
        try {
          await this.heartbeatOnce();
          this.failures.succeeded();
        } finally {
          this.dropExpired();
        }
        await o.afterCheck?.();
        return false;
      },
      onError: (err) => {
        this.failures.failed(err);
        o.onError(err);
      },
    });
  }

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /**
   * Once any held lease is a third of the way through, or any handler has reported something not
   * sent yet, renews every held lease in one statement (with those reports) and aborts the
   * handlers whose lease is gone. `force` renews regardless.
   */
  async heartbeatOnce(force = false): Promise<void> {
    const now = this.o.clock.nowMs();
    const live = [...this.o.runs.values()].filter((a) => a.dropped === null);
    const reports = !this.reportsRefused;
    const due = (a: ActiveRun) =>
      now >= a.renewedAt + a.leaseMs / 3 || (reports && a.report?.pending === true);
    if (!force && !live.some(due)) return;
    if (live.length === 0) return;
    const sent = new Map<ActiveRun, RunReport>();
    const leases = live.map((a): HeartbeatLease => {
      const report = reports ? (a.report?.take() ?? null) : null;
      if (report === null) return { runId: a.run.runId, leaseToken: a.run.leaseToken };
      sent.set(a, report);
      return { runId: a.run.runId, leaseToken: a.run.leaseToken, ...report };
    });
    // A run that ends meanwhile waits for this answer before it takes what is left of its report:
    // its result must carry the lines a failed heartbeat puts back, after these.
    let answered = () => {};
    const reporting = new Promise<void>((resolve) => {
      answered = resolve;
    });
    // (Behind one still in flight, from `extendLease`, when there is one.)
    for (const a of sent.keys()) {
      a.reporting = a.reporting === null ? reporting : Promise.all([a.reporting, reporting]).then(() => {});
    }
    let answer: HeartbeatRunsAnswer;
    try {
      answer = await this.renew(leases, now, sent.size > 0);
    } catch (err) {
      for (const [a, report] of sent) a.report?.putBack(report);
      throw err;
    } finally {
      for (const a of sent.keys()) if (a.reporting === reporting) a.reporting = null;
      answered();
    }
    for (const r of answer.renewed) {
      const a = this.o.runs.get(r.runId);
      if (a) {
        a.leaseExpiresAt = r.leaseExpiresAt.getTime();
        a.renewedAt = now;
      }
    }
    for (const runId of answer.lost) this.loseLease(runId, 'lease lost');
  }

  /**
   * One heartbeat. Refused as data with reports on it (a server that predates them), it is sent
   * again without them, and they are dropped (later reports go with the results only): a lease is
   * never lost over a progress report.
   */
  private async renew(
    leases: HeartbeatLease[],
    now: number,
    withReports: boolean,
  ): Promise<HeartbeatRunsAnswer> {
    try {
      return await this.o.source.heartbeatRuns({ leases, now });
    } catch (err) {
      if (!withReports || !isDataError(err)) throw err;
      this.reportsRefused = true;
      this.o.logger.warn(
        { err },
        'heartbeat with progress or log lines refused; sending heartbeats without them from now on',
      );
      const bare = leases.map((l) => ({ runId: l.runId, leaseToken: l.leaseToken }));
      return this.o.source.heartbeatRuns({ leases: bare, now });
    }
  }

  /** Renews every lease now; this run's new expiry, or `LeaseLostError` if it is gone. */
  async extendLease(a: ActiveRun): Promise<Date> {
    await this.heartbeatOnce(true);
    if (a.dropped !== null)
      throw new LeaseLostError(`the lease on run ${a.run.runId} is lost`, { run_id: a.run.runId });
    return new Date(a.leaseExpiresAt);
  }

  /** A lease we could not renew before its expiry is presumed lost: step down rather than guess. */
  dropExpired(): void {
    const now = this.o.clock.nowMs();
    for (const a of this.o.runs.values()) {
      if (a.dropped === null && a.leaseExpiresAt <= now)
        this.loseLease(a.run.runId, 'lease expired before renewal');
    }
  }

  private loseLease(runId: string, reason: string): void {
    const a = this.o.runs.get(runId);
    // A handler that already returned is past aborting: its result is being recorded under its
    // token, and the store's answer reports the loss (once) if there is one.
    if (!a || a.dropped !== null || a.finishing) return;
    a.dropped = reason;
    const { logger, emit } = this.o;
    if (!a.started) {
      // Held, never started: nothing to abort; it is simply no longer ours.
      this.o.forgetHeld(a);
      logger.warn({ run_id: runId, job_id: a.run.jobId }, `${reason} on a run held for a slot; not started`);
      emit('lease:lost', runId);
      emit('run:dropped', a.run, reason);
      return;
    }
    abortRun(a, new LeaseLostError(`${reason} on run ${runId}`, { run_id: runId }));
    logger.warn({ run_id: runId, job_id: a.run.jobId }, `${reason}; handler aborted, result will be dropped`);
    emit('lease:lost', runId);
  }
}
