/** Job files (YAML or JSON): `{ jobs: [ {job_id, schedule, handler, …}, … ] }` or a bare list. */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { type JobInput, jobInputFromApi, ValidationError, validateJob } from '../core/index.js';

/** Reads and validates every job in the file; a bad entry fails the whole file, naming it. */
export async function readJobsFile(path: string): Promise<JobInput[]> {
  let doc: unknown;
  try {
    doc = parse(await readFile(path, 'utf8'));
  } catch (err) {
    throw new ValidationError(
      `cannot read jobs file ${path}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const list = Array.isArray(doc) ? doc : (doc as { jobs?: unknown } | null)?.jobs;
  if (!Array.isArray(list)) throw new ValidationError(`jobs file ${path} has no "jobs" list`);
  const seen = new Set<string>();
  return list.map((entry, i) => {
    try {
      const input = jobInputFromApi(entry);
      validateJob(input);
      if (seen.has(input.jobId)) throw new ValidationError(`job_id "${input.jobId}" appears twice`);
      seen.add(input.jobId);
      return input;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new ValidationError(`jobs file ${path}, entry ${i + 1}: ${message}`);
    }
  });
}
