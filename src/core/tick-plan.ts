/**
 * What one tick writes for one due job: the runs of the slots the misfire rule keeps (each
 * available at its slot plus the job's jitter, queued at its priority's `sort_key`) and the job's
 * new `next_run_at`. A stored schedule that no longer evaluates (a runtime without its timezone)
 * parks the job: no runs, `next_run_at` null, and the reason, rather than heading the due scan
 * forever. Pure: the store reads the due jobs and writes what this returns.
 */
import { jitterOffsetMs } from './jitter.js';
import { type MisfirePolicy, planSlots } from './misfire.js';
import { sortKey } from './priority.js';
import { parseSchedule, type Schedule } from './schedule/schedule.js';

/** A due job as the tick's scan reads it. */
export interface DueJob {
  tenantId: string;
  jobId: string;
  schedule: string;
  timezone: string;
  /** Epoch ms: the earliest slot not yet materialised. */
  nextRunAt: number;
  misfire: MisfirePolicy;
  catchUpLimit: number;
  priority: number;
  jitterSeconds: number;
  /** The job's own misfire threshold; null: `TickPlanInput.misfireThresholdMs`. */
  misfireThresholdSeconds: number | null;
}

export interface TickPlanInput {
  job: DueJob;
  now: number;
  lookaheadMs: number;
  /** The threshold of jobs that set none, ms. */
  misfireThresholdMs: number;
  agingStepMs: number;
  /** Parses the stored schedule; a cache can stand in. Default `parseSchedule`. */
  parse?: (source: string, timezone: string) => Schedule;
}

/** One run to insert, epoch ms. */
export interface PlannedRun {
  scheduledFor: number;
  availableAt: number;
  sortKey: number;
}

export interface TickPlan {
  runs: PlannedRun[];
  /** Slots the misfire policy dropped, where countable (else 0). */
  dropped: number;
  /** The policy dropped slots: `dropped` of them, or more than could be counted (a long cron backlog). */
  misfired: boolean;
  /** The job's new `next_run_at`; null when exhausted or parked. */
  nextRunAt: number | null;
  /** Why the job was parked (its schedule could not be evaluated), or null. */
  parked: string | null;
}

/** Plans one due job's rows for a tick at `now`. */
export function planTick(input: TickPlanInput): TickPlan {
  const { job } = input;
  try {
    const plan = planSlots({
      schedule: (input.parse ?? parseSchedule)(job.schedule, job.timezone),
      nextRunAt: job.nextRunAt,
      now: input.now,
      lookaheadMs: input.lookaheadMs,
      misfireThresholdMs:
        job.misfireThresholdSeconds === null ? input.misfireThresholdMs : job.misfireThresholdSeconds * 1000,
      policy: job.misfire,
      catchUpLimit: job.catchUpLimit,
    });
    const jitter = jitterOffsetMs(job.tenantId, job.jobId, job.jitterSeconds);
    const runs = plan.slots.map((slot) => ({
      scheduledFor: slot,
      availableAt: slot + jitter,
      sortKey: sortKey(slot + jitter, job.priority, input.agingStepMs),
    }));
    return {
      runs,
      dropped: plan.dropped ?? 0,
      misfired: plan.dropped !== 0,
      nextRunAt: plan.nextRunAt,
      parked: null,
    };
  } catch (err) {
    return {
      runs: [],
      dropped: 0,
      misfired: false,
      nextRunAt: null,
      parked: err instanceof Error ? err.message : String(err),
    };
  }
}
