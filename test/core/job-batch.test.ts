/** `validateJobs`: a batch checked at the edge, each job's index in its messages, and the refusals that name one. */
import { describe, expect, it } from 'vitest';
import {
  checkJobBatch,
  MAX_BULK_JOBS,
  pastOneShotError,
  validateJob,
  validateJobs,
} from '../../src/core/index.js';
import { refusal } from '../setup/refusal.js';

const job = (jobId: string, extra: Record<string, unknown> = {}) => ({
  jobId,
  schedule: '@every 10s',
  handler: 'h',
  ...extra,
});

describe('validateJobs', () => {
  it('validates each job as validateJob does, keeping its index', () => {
    const out = validateJobs([job('a'), job('b', { priority: 5 })]);
    expect(out).toEqual([
      { ...validateJob(job('a')), index: 0 },
      { ...validateJob(job('b', { priority: 5 })), index: 1 },
    ]);
  });

  it('names the bad job: jobs[i] before the message, index in the details', () => {
    const err = refusal(() => validateJobs([job('a'), job('b', { priority: 101 })]));
    const alone = refusal(() => validateJob(job('b', { priority: 101 })));
    expect(err.message).toBe(`jobs[1]: ${alone.message}`);
    expect(err.details).toEqual({ ...alone.details, index: 1 });
  });

  it('refuses a job id twice, an empty list and more than MAX_BULK_JOBS', () => {
    const twice = refusal(() => validateJobs([job('a'), job('b'), job('a')]));
    expect(twice.message).toBe('jobs[2]: job_id "a" appears twice');
    expect(twice.details).toEqual({ index: 2 });
    expect(refusal(() => validateJobs([])).message).toBe('jobs must be a non-empty list');
    const many = Array.from({ length: MAX_BULK_JOBS + 1 }, (_, i) => job(`j${i}`));
    expect(refusal(() => validateJobs(many)).message).toBe(
      `at most ${MAX_BULK_JOBS} jobs per request (got ${MAX_BULK_JOBS + 1})`,
    );
  });

  it('checks jobs in order: a bad job before a duplicate is the one named', () => {
    const err = refusal(() => validateJobs([job('a'), job('b', { handler: 'x y' }), job('a')]));
    expect(err.message).toMatch(/^jobs\[1\]: handler/);
  });
});

describe('checkJobBatch', () => {
  it('checks the size and the ids of jobs validated one by one', () => {
    const a = validateJob(job('a'));
    expect(() => checkJobBatch([a, validateJob(job('b'))])).not.toThrow();
    expect(refusal(() => checkJobBatch([a, a])).message).toBe('jobs[1]: job_id "a" appears twice');
    expect(refusal(() => checkJobBatch([])).message).toBe('jobs must be a non-empty list');
  });
});

describe('pastOneShotError', () => {
  const at = Date.UTC(2020, 0, 1);
  const once = validateJob(job('once', { schedule: '@at 2020-01-01T00:00:00Z' }));

  it('a job on its own: the instant, field schedule', () => {
    const err = pastOneShotError(once, at);
    expect(err.message).toBe('@at instant 2020-01-01T00:00:00.000Z is in the past');
    expect(err.details).toEqual({ field: 'schedule' });
  });

  it('a job of a batch: its index and id', () => {
    const err = pastOneShotError({ ...once, index: 3 }, at);
    expect(err.message).toBe('jobs[3]: @at instant of job "once" is in the past');
    expect(err.details).toEqual({ field: 'schedule', index: 3 });
  });
});
