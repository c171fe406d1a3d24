/** `tock dlq …`: the dead-letter list, and replaying a dead run, over the HTTP API. */
import type { Command } from 'commander';
import { apiAction, clientOf, moreHint, pages, printJson, write } from '../api-command.js';
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

async function replay(runId: string | undefined, o: OptionsFor<'dlq replay'>): Promise<void> {
  const filtered = o.job !== undefined || o.error !== undefined || o.from !== undefined || o.to !== undefined;
  if (o.all) {
    if (runId !== undefined) throw new Error('give a <run_id> or --all, not both');
    return replayAll(o);
  }
  if (runId === undefined) throw new Error('give the <run_id> of a dead run, or --all');
  if (filtered || o.dryRun) throw new Error('--job, --error, --from, --to and --dry-run go with --all');
  const run = await clientOf(o).replayRun(runId);
  if (o.json) return printJson(run);
  write(
    `replayed run ${run.run_id} of job ${run.job_id}: ${run.state}, claimable from ${run.available_at}\n`,
  );
}

/** `--all`: the count (`--dry-run`), or every matching dead run, a batch of 500 a request. */
async function replayAll(o: OptionsFor<'dlq replay'>): Promise<void> {
  const client = clientOf(o);
  if (o.job !== undefined) checkJobId(o.job);
  const filter = { jobId: o.job, errorContains: o.error, slotFrom: o.from, slotTo: o.to };
  if (o.dryRun) {
    const counted = await client.replayDeadRuns({ ...filter, dryRun: true });
    if (o.json) return printJson(counted);
    const n = `${counted.more_matching ? 'more than ' : ''}${counted.matching}`;
    return write(`${n} dead run${counted.matching === 1 ? '' : 's'} match; none replayed (--dry-run)\n`);
  }
  const total = { dry_run: false, matching: 0, replayed: 0, skipped: 0, replayed_run_ids: [] as string[] };
  let cursor: string | null = null;
  do {
    const done = await client.replayDeadRuns({ ...filter, cursor });
    total.matching += done.matching;
    total.replayed += done.replayed;
    total.skipped += done.skipped;
    total.replayed_run_ids.push(...done.replayed_run_ids);
    cursor = done.next_cursor;
  } while (cursor !== null);
  if (o.json) return printJson(total);
  const skipped = total.skipped > 0 ? ` (${total.skipped} skipped: no longer dead)` : '';
  write(`replayed ${total.replayed} dead run${total.replayed === 1 ? '' : 's'}${skipped}\n`);
}

export function registerDlq(program: Command): void {
  const dlq = program
    .command('dlq')
    .description('the dead-letter list: runs that spent their attempts or failed permanently');
  defineCommand(dlq, 'dlq list', 'list dead runs, newest slot first').action(apiAction(list));
  defineCommand(
    dlq,
    'dlq replay',
    'requeue a dead run (a fresh set of attempts, numbered on from its last; a run in any other state is a 409), or with --all every dead run the filters pick (--dry-run counts them first)',
    [['[run_id]', 'the dead run (without --all)']],
  ).action(apiAction(replay));
}
