/**
 * A batch of job definitions, validated at the edge (the API, a jobs file, the library facade)
 * before the store writes it in one statement: every job is checked first, and one bad job (or a
 * job id twice) refuses the whole batch with its index named, so nothing is written.
 */
import { ValidationError } from './errors.js';
import { type JobInput, type JobSpec, validateJob } from './job.js';
import type { Schedule } from './schedule/schedule.js';

/** Most jobs one batch (`upsertJobs`, `PUT /v1/jobs`) takes. */
export const MAX_BULK_JOBS = 1000;

/** A definition `validateJob` accepted, with its parsed schedule. */
export interface ValidJob {
  spec: JobSpec;
  schedule: Schedule;
  /**
   * Its place in the list a caller sent (`validateJobs` sets it): errors about this job then begin
   * `jobs[<index>]: `. Absent for a job sent on its own.
   */
  index?: number;
}

/** The prefix that names a job of a batch in a message, or none for a job on its own. */
function named(job: { index?: number }): string {
  return job.index === undefined ? '' : `jobs[${job.index}]: `;
}

/** A batch's size: 1 to `MAX_BULK_JOBS`. */
export function checkJobCount(count: number): void {
  if (count === 0) throw new ValidationError('jobs must be a non-empty list');
  if (count > MAX_BULK_JOBS)
    throw new ValidationError(`at most ${MAX_BULK_JOBS} jobs per request (got ${count})`);
}

/** A job id the batch already had is refused, naming the later one's index. */
function checkUnique(seen: Set<string>, spec: JobSpec, i: number): void {
  if (seen.has(spec.jobId))
    throw new ValidationError(`jobs[${i}]: job_id "${spec.jobId}" appears twice`, { index: i });
  seen.add(spec.jobId);
}

/**
 * Validates a batch: its size, each job (`jobs[i]: ` before the message, `index` in the details)
 * and that no job id appears twice. The answer keeps each job's index.
 */
export function validateJobs(inputs: readonly JobInput[]): ValidJob[] {
  if (!Array.isArray(inputs)) throw new ValidationError('jobs must be a non-empty list');
  checkJobCount(inputs.length);
  const seen = new Set<string>();
  return inputs.map((input, i) => {
    let checked: ReturnType<typeof validateJob>;
    try {
      checked = validateJob(input);
    } catch (err) {
      if (err instanceof ValidationError)
        throw new ValidationError(`jobs[${i}]: ${err.message}`, { ...err.details, index: i });
      throw err;
    }
    checkUnique(seen, checked.spec, i);
    // The same object, so that it stays one `validateJob` made (`isValidatedJob`).
    return Object.assign(checked, { index: i });
  });
}

/** The checks of `validateJobs` that concern the batch, for jobs validated one by one: size, unique ids. */
export function checkJobBatch(jobs: readonly ValidJob[]): void {
  if (!Array.isArray(jobs)) throw new ValidationError('jobs must be a non-empty list');
  checkJobCount(jobs.length);
  const seen = new Set<string>();
  for (const [i, job] of jobs.entries()) checkUnique(seen, job.spec, i);
}

/**
 * The refusal of a new one-shot whose instant has passed (re-applying the same instant to the job
 * that has it is not refused: it fired, or is firing).
 */
export function pastOneShotError(job: ValidJob, atMs: number): ValidationError {
  if (job.index === undefined)
    return new ValidationError(`@at instant ${new Date(atMs).toISOString()} is in the past`, {
      field: 'schedule',
    });
  return new ValidationError(`${named(job)}@at instant of job "${job.spec.jobId}" is in the past`, {
    field: 'schedule',
    index: job.index,
  });
}

/** The error for a job that names a limit its tenant has not defined (`PUT /v1/limits/{key}`). */
export function unknownLimitError(job: ValidJob, key: string): ValidationError {
  const i = job.spec.limits.indexOf(key);
  return new ValidationError(
    `${named(job)}limits[${i}]: no limit "${key}" is defined (PUT /v1/limits/${key} first)`,
    job.index === undefined ? { field: `limits[${i}]` } : { field: `limits[${i}]`, index: job.index },
  );
}
