/**
 * The per-job gauges, read from run history (`Store.recentJobDelays`) by the `RunGaugeSampler`
 * with the other gauges, so every server shows the same and the database sees one read per sample
 * interval whatever the scrape rate. Bounded: each is a top N over a recent window of slots, not a
 * series per job. `tock_job_scheduling_delay_seconds` has the `topJobs` jobs with the largest
 * delay in the window; `tock_job_dead_runs` the `topJobs` jobs with the most dead runs there (only
 * jobs with one); `tock_job_misfired_slots` and `tock_job_last_misfire_timestamp_seconds` the
 * `topJobs` jobs with the latest misfire in the window (from `jobs`, migration 0025). A job leaves
 * a series once it is out of its top N, or has nothing in the window; `tock_job_window_jobs` and
 * `tock_job_misfired_jobs` count the jobs the window had, so a reader sees when N cut some off.
 *
 * `tock_job_last_success_timestamp_seconds` has the `topJobs` enabled jobs whose last success is
 * OLDEST among the jobs that have ever succeeded (`Store.jobLastSuccesses`, from `job_successes`,
 * migration 0029): the ones an alert on "has not succeeded for X" fires for, the same on every
 * server and across restarts (it used to be what each process had seen succeed). A job that never
 * succeeded has no series (its runs' dead ones are in `tock_job_dead_runs`); a job leaves it when a
 * success makes it newer than the N oldest. `tock_job_last_success_jobs` counts the jobs with a
 * recorded success, so a reader sees how many N left out.
 */
import { Gauge, type Registry } from 'prom-client';
import { DEFAULT_JOB_WINDOW_MS, DEFAULT_TOP_JOBS, MAX_TOP_JOBS } from '../core/index.js';
import type { JobDelay, JobMisfire, JobSuccess } from '../store/index.js';

export interface JobGaugeOptions {
  /** The jobs in each top N, 1 to MAX_TOP_JOBS. Default DEFAULT_TOP_JOBS (20). */
  topJobs?: number;
  /** The window of slots the per-job gauges read, ms (at least 1 s). Default DEFAULT_JOB_WINDOW_MS (5 min). */
  windowMs?: number;
}

export class JobGauges {
  readonly topJobs: number;
  readonly windowMs: number;
  readonly delay: Gauge;
  readonly deadRuns: Gauge;
  readonly windowJobs: Gauge;
  readonly misfiredSlots: Gauge;
  readonly lastMisfire: Gauge;
  readonly misfiredJobs: Gauge;
  readonly lastSuccess: Gauge;
  readonly lastSuccessJobs: Gauge;

  constructor(registry: Registry, o: JobGaugeOptions = {}) {
    this.topJobs = o.topJobs ?? DEFAULT_TOP_JOBS;
    this.windowMs = o.windowMs ?? DEFAULT_JOB_WINDOW_MS;
    if (!Number.isInteger(this.topJobs) || this.topJobs < 1 || this.topJobs > MAX_TOP_JOBS)
      throw new RangeError(`topJobs must be an integer from 1 to ${MAX_TOP_JOBS}`);
    if (!Number.isInteger(this.windowMs) || this.windowMs < 1000)
      throw new RangeError('windowMs must be a whole number of ms, at least 1000');
    const window = `the last ${this.windowMs / 1000} s of slots`;
    this.delay = new Gauge({
      name: 'tock_job_scheduling_delay_seconds',
      help: `Largest scheduling delay of a job's runs with a slot in ${window}, from run history: ended runs (start minus when due, as tock_scheduling_delay_seconds) and queued runs (the wait so far); only the ${this.topJobs} jobs with the largest`,
      labelNames: ['tenant', 'job'],
      registers: [registry],
    });
    this.deadRuns = new Gauge({
      name: 'tock_job_dead_runs',
      help: `Dead runs of a job with a slot in ${window}, from run history; only the ${this.topJobs} jobs with the most (and at least one)`,
      labelNames: ['tenant', 'job'],
      registers: [registry],
    });
    this.windowJobs = new Gauge({
      name: 'tock_job_window_jobs',
      help: `Jobs with a started or queued run whose slot is in ${window} (those past the top ${this.topJobs} have no tock_job_* series)`,
      registers: [registry],
    });
    this.misfiredSlots = new Gauge({
      name: 'tock_job_misfired_slots',
      help: `Slots a job's misfire policy dropped since it was created (where countable), from the jobs table; only the ${this.topJobs} jobs with the latest misfire, if in the last ${this.windowMs / 1000} s`,
      labelNames: ['tenant', 'job'],
      registers: [registry],
    });
    this.lastMisfire = new Gauge({
      name: 'tock_job_last_misfire_timestamp_seconds',
      help: `When a tick last found the job behind and dropped slots (Unix seconds), from the jobs table; only the ${this.topJobs} jobs with the latest misfire, if in the last ${this.windowMs / 1000} s`,
      labelNames: ['tenant', 'job'],
      registers: [registry],
    });
    this.misfiredJobs = new Gauge({
      name: 'tock_job_misfired_jobs',
      help: `Jobs whose last misfire is in the last ${this.windowMs / 1000} s (those past the top ${this.topJobs} have no misfire series)`,
      registers: [registry],
    });
    this.lastSuccess = new Gauge({
      name: 'tock_job_last_success_timestamp_seconds',
      help: `When a run of the job last succeeded (Unix seconds), from the database (the same on every server): only the ${this.topJobs} enabled jobs whose last success is oldest among the jobs that have succeeded; a success is recorded by the metrics sample when its run's slot is in the last hour`,
      labelNames: ['tenant', 'job'],
      registers: [registry],
    });
    this.lastSuccessJobs = new Gauge({
      name: 'tock_job_last_success_jobs',
      help: `Jobs with a recorded success (counted up to 100000); the ${this.topJobs} whose last success is oldest have a tock_job_last_success_timestamp_seconds series`,
      registers: [registry],
    });
  }

  /** A new sample: the jobs out of it lose their series. */
  set(
    sample: { jobs: readonly JobDelay[]; seen: number },
    misfires: { jobs: readonly JobMisfire[]; seen: number },
    successes: { jobs: readonly JobSuccess[]; seen: number } = { jobs: [], seen: 0 },
  ): void {
    for (const g of [this.delay, this.deadRuns, this.misfiredSlots, this.lastMisfire, this.lastSuccess])
      g.reset();
    this.lastSuccessJobs.set(successes.seen);
    for (const j of successes.jobs)
      this.lastSuccess.set({ tenant: j.tenantId, job: j.jobId }, j.at.getTime() / 1000);
    this.windowJobs.set(sample.seen);
    for (const j of sample.jobs) {
      const labels = { tenant: j.tenantId, job: j.jobId };
      if (j.late) this.delay.set(labels, j.delayMs / 1000);
      if (j.dying) this.deadRuns.set(labels, j.dead);
    }
    this.misfiredJobs.set(misfires.seen);
    for (const j of misfires.jobs) {
      const labels = { tenant: j.tenantId, job: j.jobId };
      this.misfiredSlots.set(labels, j.slots);
      this.lastMisfire.set(labels, j.at.getTime() / 1000);
    }
  }
}
