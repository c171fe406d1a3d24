/**
 * `tock jobs put`: creates or replaces one job from flags, or applies every job of a YAML/JSON
 * file (validated whole before the first is sent), and prints what changed.
 */
import type { Command } from 'commander';
import { type JobBody, TockApiError, type TockClient, type UpsertedJob } from '../../client/index.js';
import { jobInputToApi } from '../../core/index.js';
import { type ApiOptions, apiAction, apiMessage, clientOf, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { changeSummary, changeTable } from '../format/jobs.js';
import { checkJobId } from '../options/parsers.js';

type PutOptions = OptionsFor<'jobs put'>;

/** The job-definition flags of `tock jobs put`, and the body field each one sets. */
const JOB_FIELDS = {
  schedule: 'schedule',
  handler: 'handler',
  timezone: 'timezone',
  payload: 'payload',
  payloadSchema: 'payload_schema',
  priority: 'priority',
  maxAttempts: 'max_attempts',
  misfire: 'misfire',
  catchUpLimit: 'catch_up_limit',
  pool: 'pool',
  lease: 'lease_seconds',
  jitter: 'jitter_seconds',
  runTimeout: 'timeout_seconds',
  misfireThreshold: 'misfire_threshold_seconds',
  backoffBase: 'backoff_base_seconds',
  backoffCap: 'backoff_cap_seconds',
} as const satisfies Partial<Record<keyof PutOptions, string>>;

async function applyFile(client: TockClient, file: string, o: ApiOptions): Promise<void> {
  // The whole file is validated first: a bad entry applies nothing.
  const { readJobsFile } = await import('../../runtime/jobs-file.js');
  const inputs = await readJobsFile(file);
  const answers: UpsertedJob[] = [];
  for (const [i, input] of inputs.entries()) {
    try {
      answers.push(
        await client.putJob(input.jobId, jobInputToApi(input, { withId: false }) as unknown as JobBody),
      );
    } catch (err) {
      if (!o.json && answers.length > 0) write(changeTable(answers));
      const reason = err instanceof TockApiError ? apiMessage(err, Boolean(o.key)) : String(err);
      throw new Error(
        `job "${input.jobId}" (entry ${i + 1} of ${inputs.length}): ${reason}; ${answers.length} applied before it`,
      );
    }
  }
  if (o.json) return printJson({ jobs: answers });
  write((answers.length > 0 ? changeTable(answers) : '') + changeSummary(answers));
}

async function put(jobId: string | undefined, o: PutOptions): Promise<void> {
  const flags = Object.keys(JOB_FIELDS) as (keyof typeof JOB_FIELDS)[];
  const given = flags.filter((flag) => o[flag] !== undefined);
  const client = clientOf(o);
  if (o.file !== undefined) {
    if (jobId !== undefined || given.length > 0) {
      throw new Error('give either --file or a job_id with flags, not both');
    }
    await applyFile(client, o.file, o);
    return;
  }
  if (jobId === undefined) throw new Error('give a job_id (with --schedule and --handler) or --file');
  checkJobId(jobId);
  if (o.schedule === undefined) throw new Error('--schedule is required');
  if (o.handler === undefined) throw new Error('--handler is required');
  const body: Record<string, unknown> = {};
  for (const flag of given) body[JOB_FIELDS[flag]] = o[flag];
  const answer = await client.putJob(jobId, body as unknown as JobBody);
  if (o.json) return printJson(answer);
  write(changeTable([answer]) + changeSummary([answer]));
}

export function registerJobsPut(jobs: Command): void {
  defineCommand(
    jobs,
    'jobs put',
    'create or replace a job from flags (unset fields take their defaults), or apply every job of a YAML/JSON file; prints whether each was created, updated or unchanged',
    [['[job_id]', 'the job to create or replace (not with --file)']],
  ).action(apiAction(put));
}
