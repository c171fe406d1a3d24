/**
 * `tock status` as an operator reads it: a summary of shards and backlog (or the scope a tenant
 * key sees), the runs no live worker serves, then one line per node.
 */
import type * as Api from '../../client/index.js';
import { counted, formatTable } from './table.js';

/** `1.2s ago`, `350ms ago`. */
function ago(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms ago`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)}s ago`;
  return `${Math.round(ms / 60_000)}m ago`;
}

/** `a, b, c` — at most STATUS_LIST_ITEMS names, then how many more. */
function list(values: readonly unknown[]): string {
  const shown = values.slice(0, STATUS_LIST_ITEMS).map(String).join(',');
  return values.length > STATUS_LIST_ITEMS ? `${shown},… (${values.length})` : shown;
}

/** Most handler or tenant names a worker's line of `tock status` shows (`--json` has them all). */
const STATUS_LIST_ITEMS = 5;

/** `+1.2ms ±0.4ms`: a node's clock offset to the database's, and how certain it is. */
function offset(n: Api.StatusNode): string {
  return n.clock_offset_ms === null
    ? '-'
    : `${n.clock_offset_ms >= 0 ? '+' : ''}${n.clock_offset_ms.toFixed(1)}ms ±${(n.clock_uncertainty_ms ?? 0).toFixed(1)}ms`;
}

/** The ready runs by pool and priority class (`ready    default p0: 5, mail p10: 2`), if any. */
function queueLine(b: NonNullable<Api.StatusAnswer['backlog']>): string[] {
  if (b.queues.length === 0) return [];
  const more = b.queues_more > 0 ? `, and ${b.queues_more} more` : '';
  return [`ready    ${b.queues.map((q) => `${q.pool} p${q.priority}: ${q.ready}`).join(', ')}${more}`];
}

/** What a node's role says about it: a scheduler's backlog and API, a worker's pool and load. */
function detail(n: Api.StatusNode): string {
  const i = n.info;
  if (n.role === 'scheduler') return `backlog ${i.backlog ?? '-'}${i.url ? `, api ${i.url}` : ''}`;
  if (n.role === 'worker') {
    const handlers = Array.isArray(i.handlers) ? list(i.handlers) : 'any';
    const tenants = Array.isArray(i.tenants) ? `, tenants ${list(i.tenants)}` : '';
    return `pool ${i.pool ?? '-'}, ${i.in_flight ?? '-'}/${i.concurrency ?? '-'} running, handlers ${handlers}${tenants}`;
  }
  return '';
}

/** The runs waiting for a handler no live worker serves, by tenant, pool and handler; none: no lines. */
function unservedLines(s: Api.StatusAnswer, t: number): string[] {
  if (!s.unserved || s.unserved.runs === 0) return [];
  const u = s.unserved;
  const lines = [
    '',
    `unserved ${counted(u.runs, 'run')} wait${u.runs === 1 ? 's' : ''} for a handler no live worker serves (start a worker with that pool and handler${s.scope === 'cluster' ? ', for that tenant' : ''}):`,
    formatTable(
      ['TENANT', 'POOL', 'HANDLER', 'RUNS', 'WAITING'],
      u.items.map((g) => [
        g.tenant_id,
        g.pool,
        g.handler,
        g.runs,
        ago(t - Date.parse(g.since)).replace(/ ago$/, ''),
      ]),
    ).trimEnd(),
  ];
  const more = u.groups - u.items.length;
  if (more > 0) lines.push(`… and ${counted(more, 'more group')} of runs`);
  return lines;
}

/** The status answer as an operator reads it: a summary, then one line per node. */
export function formatStatus(s: Api.StatusAnswer): string {
  const t = Date.parse(s.server_time);
  const rows = s.nodes.map((n) => [
    n.node_id,
    n.role,
    n.live ? 'yes' : 'NO',
    ago(t - Date.parse(n.last_seen_at)),
    offset(n),
    n.role === 'scheduler' ? n.shards : '',
    detail(n),
  ]);
  const summary =
    s.shards && s.backlog
      ? [
          `shards   ${s.shards.count}: ${s.shards.owned} under a live lease, ${s.shards.unowned} not${s.shards.unowned > 0 ? ' (nobody ticks those now)' : ''}`,
          `backlog  ${counted(s.backlog.due_jobs, 'job')} due and not materialised, ${counted(s.backlog.ready_runs, 'run')} waiting for a worker`,
          ...queueLine(s.backlog),
        ]
      : ["scope    this tenant's remote workers (a cluster-admin key shows the cluster)"];
  const lines = [
    ...summary,
    ...unservedLines(s, t),
    '',
    s.nodes.length === 0
      ? 'no nodes have registered'
      : formatTable(['NODE', 'ROLE', 'LIVE', 'LAST SEEN', 'CLOCK OFFSET', 'SHARDS', 'DETAIL'], rows),
  ];
  return `${lines.join('\n').trimEnd()}\n`;
}
