/**
 * A run this worker holds a lease on, and the worker's register of them: what the producer (which
 * claims and starts runs), the executor (which runs one handler), the lease keeper (which renews
 * and loses leases) and the stop share. A run enters the register when it is claimed and leaves it
 * when its handler has ended and its result is settled, when its lease is lost before it started,
 * or when a stop gives it back. While it is in the register its lease is renewed.
 *
 * The invariant the parts keep on each run: once `dropped` is set the run is not ours any more and
 * nothing is written under its token (a result already being written, `finishing`, is the one
 * exception: the store's answer says whether the lease was still live).
 */
import type { ClaimedRun } from '../core/index.js';
import type { ReportBuffer } from './run-report.js';

export interface ActiveRun {
  run: ClaimedRun;
  /** Made when the handler first reads `signal`, or when the run is aborted first (most never are). */
  controller: AbortController | null;
  leaseExpiresAt: number;
  /** Length of this run's lease, ms, and when it was last renewed. */
  leaseMs: number;
  renewedAt: number;
  /** Set once the run is no longer ours: its result must not be written. */
  dropped: string | null;
  /** The handler has returned: its result is being recorded, so shutdown must not release it. */
  finishing: boolean;
  /** Its handler has been called (false while it is held, waiting for a slot or its instant). */
  started: boolean;
  /** When its handler was called (epoch ms, the worker's clock): the attempt's `started_at`. */
  startedAt: number | null;
  /** What its handler reported and no write carried yet; made on its first report (most make none). */
  report: ReportBuffer | null;
  /** Settles when the heartbeat carrying part of its report has been answered (or has failed). */
  reporting: Promise<void> | null;
  done: Promise<void>;
}

/** What a worker tells its listeners about the runs it holds. */
export interface WorkerEvents {
  'run:started': [run: ClaimedRun];
  'run:succeeded': [run: ClaimedRun];
  'run:failed': [run: ClaimedRun, result: { state: 'pending' | 'dead'; error: string }];
  /** The lease was lost or the worker shut down: the handler's result was not recorded. */
  'run:dropped': [run: ClaimedRun, reason: string];
  'lease:lost': [runId: string];
  error: [err: unknown];
}

/** Emits one of the worker's events (the parts emit through the `Worker`). */
export type EmitEvent = <E extends keyof WorkerEvents>(event: E, ...args: WorkerEvents[E]) => void;

/** The abort reason of a timer whose wait is no longer needed (a run finished, a wake moved). */
export const FINISHED = Symbol('finished');

/** A claimed run, leased to us from `sentAt` (when the claim was sent), not started yet. */
export function heldRun(run: ClaimedRun, sentAt: number): ActiveRun {
  return {
    run,
    controller: null,
    leaseExpiresAt: run.leaseExpiresAt.getTime(),
    leaseMs: Math.max(1000, run.leaseExpiresAt.getTime() - sentAt),
    renewedAt: sentAt,
    dropped: null,
    finishing: false,
    started: false,
    startedAt: null,
    report: null,
    reporting: null,
    done: Promise.resolve(),
  };
}

/** Aborts a run's handler; a handler that has not read its signal yet finds it aborted when it does. */
export function abortRun(a: ActiveRun, reason: unknown): void {
  a.controller ??= new AbortController();
  a.controller.abort(reason);
}

/** Every run this worker holds a lease on: held for a slot, running, or having its result recorded. */
export class ActiveRuns {
  private readonly byId = new Map<string, ActiveRun>();
  /** Runs whose handler has returned (their result is being written). */
  private finishingCount = 0;

  /** Runs held, running or being recorded. */
  get size(): number {
    return this.byId.size;
  }

  /** Runs whose handler has returned and whose result is being recorded: their slots are free. */
  get finishing(): number {
    return this.finishingCount;
  }

  has(runId: string): boolean {
    return this.byId.has(runId);
  }

  get(runId: string): ActiveRun | undefined {
    return this.byId.get(runId);
  }

  values(): IterableIterator<ActiveRun> {
    return this.byId.values();
  }

  add(a: ActiveRun): void {
    this.byId.set(a.run.runId, a);
  }

  /** Forgets a run that never started (given back, or its lease lost while held). */
  remove(a: ActiveRun): void {
    this.byId.delete(a.run.runId);
  }

  /** Its handler returned: the run's slot is free while its result is recorded. */
  finished(a: ActiveRun): void {
    a.finishing = true;
    this.finishingCount += 1;
  }

  /** A started run is over: its result is settled (recorded, lost or dropped). */
  ended(a: ActiveRun): void {
    if (a.finishing) this.finishingCount -= 1;
    this.byId.delete(a.run.runId);
  }
}
