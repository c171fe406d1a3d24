/**
 * `tock jobs …`: define (`put`, in jobs-put.ts), inspect (`get`, `list`), pause, resume, delete,
 * trigger and backfill jobs over the HTTP API.
 */
import type { Command } from 'commander';
import { type ApiOptions, apiAction, clientOf, moreHint, pages, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { backfillLine, jobFields, jobTable, triggeredRunFields } from '../format/jobs.js';
import { checkJobId } from '../options/parsers.js';
import { registerJobsPut } from './jobs-put.js';

async function get(jobId: string, o: ApiOptions): Promise<void> {
  const job = await clientOf(o).getJob(checkJobId(jobId));
  if (o.json) return printJson(job);
  write(jobFields(job));
}

async function list(o: OptionsFor<'jobs list'>): Promise<void> {
  const client = clientOf(o);
  const page = await pages(o.all, o.cursor, async (cursor) => {
    const p = await client.listJobs({
      limit: o.limit,
      cursor,
      q: o.prefix,
      state: o.state,
      pool: o.pool,
      handler: o.handler,
    });
    return { items: p.jobs, next_cursor: p.next_cursor };
  });
  if (o.json) return printJson({ jobs: page.items, next_cursor: page.next_cursor });
  write(jobTable(page.items));
  // The next page is of the same listing: the hint repeats the filters.
  const filters = (['prefix', 'state', 'pool', 'handler'] as const).flatMap((k) =>
    o[k] === undefined ? [] : [`--${k} ${shellWord(o[k])}`],
  );
  moreHint(['tock jobs list', ...filters].join(' '), page.next_cursor);
}

/** A word the shell reads back as `text`: single-quoted unless it is only safe characters. */
function shellWord(text: string): string {
  return /^[A-Za-z0-9._:/-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

async function pause(jobId: string, o: ApiOptions): Promise<void> {
  const job = await clientOf(o).pauseJob(checkJobId(jobId));
  if (o.json) return printJson(job);
  // A paused job keeps its next_run_at, but nothing is materialised until it resumes.
  write(`paused job ${job.job_id}\n`);
}

async function resume(jobId: string, o: ApiOptions): Promise<void> {
  const job = await clientOf(o).resumeJob(checkJobId(jobId));
  if (o.json) return printJson(job);
  write(`resumed job ${job.job_id}; next run ${job.next_run_at ?? 'none'}\n`);
}

async function remove(jobId: string, o: ApiOptions): Promise<void> {
  await clientOf(o).deleteJob(checkJobId(jobId));
  // The API answers 204 without a body; --json still prints one document.
  if (o.json) return printJson({ job_id: jobId, deleted: true });
  write(`deleted job ${jobId}\n`);
}

async function trigger(jobId: string, o: OptionsFor<'jobs trigger'>): Promise<void> {
  const run = await clientOf(o).triggerRun(checkJobId(jobId), {
    scheduledFor: o.at,
    payload: o.payload,
    idempotencyKey: o.idempotencyKey,
  });
  if (o.json) return printJson(run);
  write(triggeredRunFields(run));
}

async function backfill(jobId: string, o: OptionsFor<'jobs backfill'>): Promise<void> {
  const done = await clientOf(o).backfillJob(checkJobId(jobId), {
    from: o.from,
    to: o.to,
    idempotencyKey: o.idempotencyKey,
  });
  if (o.json) return printJson(done);
  write(`${backfillLine(done)}\n`);
}

export function registerJobs(program: Command): void {
  const jobs = program
    .command('jobs')
    .description('define, inspect, pause, trigger and backfill jobs (over the HTTP API)');
  registerJobsPut(jobs);
  const job = [['<job_id>', 'the job']] as const;
  defineCommand(jobs, 'jobs get', 'show one job', job).action(apiAction(get));
  defineCommand(
    jobs,
    'jobs list',
    'list the jobs, by job id; --prefix, --state, --pool and --handler keep only the matching ones (on the server)',
  ).action(apiAction(list));
  defineCommand(
    jobs,
    'jobs pause',
    'stop materialising new runs of a job (runs already materialised still run)',
    job,
  ).action(apiAction(pause));
  defineCommand(jobs, 'jobs resume', 'schedule a paused job again, from its next slot after now', job).action(
    apiAction(resume),
  );
  defineCommand(
    jobs,
    'jobs delete',
    'delete a job; its pending runs are cancelled and its history is kept',
    job,
  ).action(apiAction(remove));
  defineCommand(
    jobs,
    'jobs trigger',
    'create a run of a job now (or for --at); a slot that already has a run is a 409 naming it',
    job,
  ).action(apiAction(trigger));
  defineCommand(
    jobs,
    'jobs backfill',
    "create the run of every slot of a job's schedule from --from (included) to --to (excluded) that has none",
    job,
  ).action(apiAction(backfill));
}
