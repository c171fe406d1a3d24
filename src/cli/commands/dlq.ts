/** `tock dlq …`: the dead-letter list, and replaying a dead run, over the HTTP API. */
import type { Command } from 'commander';
import { type ApiOptions, apiAction, clientOf, moreHint, pages, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { runTable } from '../format/runs.js';
import { checkJobId } from '../options/parsers.js';

async function list(o: OptionsFor<'dlq list'>): Promise<void> {
  const client = clientOf(o);
  if (o.job !== undefined) checkJobId(o.job);
  const page = await pages(o.all, o.cursor, async (cursor) => {
    const p = await client.listRuns({ state: 'dead', jobId: o.job, limit: o.limit, cursor });
    return { items: p.runs, next_cursor: p.next_cursor };
  });
  if (o.json) return printJson({ runs: page.items, next_cursor: page.next_cursor });
  write(runTable(page.items, 'no dead runs'));
  moreHint('tock dlq list', page.next_cursor);
}

async function replay(runId: string, o: ApiOptions): Promise<void> {
  const run = await clientOf(o).replayRun(runId);
  if (o.json) return printJson(run);
  write(
    `replayed run ${run.run_id} of job ${run.job_id}: ${run.state}, claimable from ${run.available_at}\n`,
  );
}

export function registerDlq(program: Command): void {
  const dlq = program
    .command('dlq')
    .description('the dead-letter list: runs that spent their attempts or failed permanently');
  defineCommand(dlq, 'dlq list', 'list dead runs, newest slot first').action(apiAction(list));
  defineCommand(
    dlq,
    'dlq replay',
    'requeue a dead run (a fresh set of attempts, numbered on from its last); a run in any other state is a 409',
    [['<run_id>', 'the dead run']],
  ).action(apiAction(replay));
}
