/**
 * `tock delay`: the tenant's scheduling delay over the last `--since`, one line per `--step` of
 * slots (count, median, 99th percentile, largest), from run history over the HTTP API
 * (`GET /v1/delay`). The range ends at this machine's now.
 */
import type { Command } from 'commander';
import type { DelayAnswer } from '../../client/index.js';
import { SystemClock } from '../../core/index.js';
import { apiAction, clientOf, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { formatTable } from '../format/table.js';
import { checkJobId } from '../options/parsers.js';

/** Seconds as people read them: `0.012s`, `4.5s`; `-` without runs. */
const seconds = (s: number | null) => (s === null ? null : `${Number(s.toFixed(3))}s`);

/** One line per bucket: its start, its runs and their delays. */
export function delayTable(d: DelayAnswer): string {
  const rows = d.buckets.map((b) => [b.start, b.runs, seconds(b.p50), seconds(b.p99), seconds(b.max)]);
  const total = d.buckets.reduce((n, b) => n + b.runs, 0);
  const scope = [d.job_id === null ? null : `job ${d.job_id}`, d.pool === null ? null : `pool ${d.pool}`]
    .filter((x) => x !== null)
    .join(', ');
  const head = `${total} ended runs with a slot from ${d.from} to ${d.to}${scope === '' ? '' : ` (${scope})`}\n`;
  return head + formatTable(['start', 'runs', 'p50', 'p99', 'max'], rows);
}

async function delay(o: OptionsFor<'delay'>): Promise<void> {
  if (o.job !== undefined) checkJobId(o.job);
  const now = new SystemClock().nowMs();
  const answer = await clientOf(o).delay({
    from: new Date(now - o.since).toISOString(),
    to: new Date(now).toISOString(),
    step: `${o.step}ms`,
    pool: o.pool,
    jobId: o.job,
  });
  if (o.json) return printJson(answer);
  write(delayTable(answer));
}

export function registerDelay(program: Command): void {
  defineCommand(
    program,
    'delay',
    "the tenant's scheduling delay from run history: per step of slots, the ended runs and their median, 99th percentile and largest delay (start minus when due)",
  ).action(apiAction(delay));
}
