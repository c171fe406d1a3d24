/** `tock runs …`: list runs, show one with its attempts, and cancel one, over the HTTP API. */
import type { Command } from 'commander';
import { type ApiOptions, apiAction, clientOf, moreHint, pages, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { runTable, runWithAttempts } from '../format/runs.js';
import { checkJobId } from '../options/parsers.js';
import { registerPrune } from './retention.js';

async function list(o: OptionsFor<'runs list'>): Promise<void> {
  const client = clientOf(o);
  if (o.job !== undefined) checkJobId(o.job);
  const page = await pages(o.all, o.cursor, async (cursor) => {
    const p = await client.listRuns({ jobId: o.job, state: o.state, limit: o.limit, cursor });
    return { items: p.runs, next_cursor: p.next_cursor };
  });
  if (o.json) return printJson({ runs: page.items, next_cursor: page.next_cursor });
  write(runTable(page.items, 'no runs'));
  moreHint('tock runs list', page.next_cursor);
}

async function show(runId: string, o: ApiOptions): Promise<void> {
  const run = await clientOf(o).getRun(runId);
  if (o.json) return printJson(run);
  write(runWithAttempts(run));
}

async function cancel(runId: string, o: ApiOptions): Promise<void> {
  const run = await clientOf(o).cancelRun(runId);
  if (o.json) return printJson(run);
  // A run cancelled while it ran ended that attempt as `cancelled`; one taken from the queue ended none.
  const ended = run.attempts.at(-1);
  const revoked =
    ended?.outcome === 'cancelled'
      ? `; attempt ${ended.attempt}'s lease revoked from ${ended.worker_id}`
      : '';
  write(`cancelled run ${run.run_id} of job ${run.job_id}${revoked}\n`);
}

export function registerRuns(program: Command): void {
  const runs = program
    .command('runs')
    .description('inspect runs and their attempts, and cancel runs (over the HTTP API)');
  defineCommand(runs, 'runs list', 'list runs, newest slot first').action(apiAction(list));
  defineCommand(
    runs,
    'runs show',
    "show a run and its attempts, with their errors' stacks and the handlers' output",
    [['<run_id>', 'the run']],
  ).action(apiAction(show));
  defineCommand(
    runs,
    'runs cancel',
    "cancel a pending or running run (a running one's lease is revoked, its handler aborted); a finished run is a 409",
    [['<run_id>', 'the run']],
  ).action(apiAction(cancel));
  registerPrune(runs);
}
