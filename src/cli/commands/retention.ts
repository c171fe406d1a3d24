/**
 * `tock retention …` (show and set how long the tenant's finished runs are kept, by state) and
 * `tock runs prune` (delete the runs past it now, or count them with --dry-run), over the HTTP API.
 */
import type { Command } from 'commander';
import type { PruneAnswer, RetentionBody, RetentionState, TenantRetention } from '../../client/index.js';
import { RETENTION_STATES } from '../../core/index.js';
import { type ApiOptions, apiAction, clientOf, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';

/** One line per state: in force, and whether the tenant set it or it is the default. */
function retentionLines(r: TenantRetention): string {
  const width = Math.max(...RETENTION_STATES.map((s) => s.length));
  return RETENTION_STATES.map((s) => {
    const source = r.set[s] !== undefined ? 'set' : 'default';
    return `${s.padEnd(width)}  ${r.retention[s].padEnd(8)}  (${source})\n`;
  }).join('');
}

async function show(o: ApiOptions): Promise<void> {
  const r = await clientOf(o).getRetention();
  if (o.json) return printJson(r);
  write(retentionLines(r));
}

async function set(o: OptionsFor<'retention set'>): Promise<void> {
  // Every state given is sent; PUT replaces, so a state not given goes back to its default.
  const body: RetentionBody = {};
  for (const s of RETENTION_STATES) if (o[s] !== undefined) body[s] = o[s];
  const r = await clientOf(o).putRetention(body);
  if (o.json) return printJson(r);
  write(`retention replaced\n${retentionLines(r)}`);
}

const sum = (runs: Record<RetentionState, number>) => Object.values(runs).reduce((a, b) => a + b, 0);

async function prune(o: OptionsFor<'runs prune'>): Promise<void> {
  const client = clientOf(o);
  const dry = o.dryRun === true;
  const total: Record<RetentionState, number> = { succeeded: 0, dead: 0, cancelled: 0, skipped: 0 };
  let scanned = 0;
  let cursor: string | undefined;
  let last: PruneAnswer;
  do {
    last = await client.pruneRuns({ dry_run: dry, cursor });
    scanned += last.scanned;
    for (const s of RETENTION_STATES) total[s] += last.runs[s];
    cursor = last.cursor ?? undefined;
    // Progress on stderr while it goes on: a tenant's history can take many calls.
    if (cursor !== undefined && !o.json)
      process.stderr.write(
        `looked at ${scanned} runs; ${sum(total)} ${dry ? 'would go' : 'deleted'} so far\n`,
      );
  } while (cursor !== undefined);
  if (o.json) return printJson({ dry_run: dry, runs: total, scanned, horizon: last.horizon });
  if (last.horizon === null) return write('every run is kept forever: nothing to prune\n');
  const counts = RETENTION_STATES.map((s) => `${s} ${total[s]}`).join(', ');
  const verb = dry ? 'would delete' : 'deleted';
  write(`${verb} ${sum(total)} runs (${counts}) of ${scanned} scheduled before ${last.horizon}\n`);
}

export function registerRetention(program: Command): void {
  const retention = program
    .command('retention')
    .description("show and set how long the tenant's finished runs are kept, by state (over the HTTP API)");
  defineCommand(
    retention,
    'retention get',
    "show the tenant's retention by state: in force, and whether it was set or is the default",
  ).action(apiAction(show));
  defineCommand(
    retention,
    'retention set',
    "replace the tenant's retention (admin key): a state not given goes back to its default",
  ).action(apiAction(set));
}

/** `tock runs prune`, under `tock runs`. */
export function registerPrune(runs: Command): void {
  defineCommand(
    runs,
    'runs prune',
    'delete the finished runs past their retention now, with their attempts (admin key); the scheduler also does it every --prune-interval',
  ).action(apiAction(prune));
}
