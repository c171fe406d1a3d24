/** `tock status`: the cluster's nodes, shards and backlog (or a tenant's remote workers). */
import type { Command } from 'commander';
import { type ApiOptions, apiAction, clientOf, printJson, write } from '../api-command.js';
import { defineCommand } from '../command.js';
import { formatStatus } from '../format/status.js';

/** Nodes per request of `tock status` (the API's largest page). */
const STATUS_PAGE = 500;

async function status(o: ApiOptions): Promise<void> {
  // Every page of nodes, in one answer: a tenant has at most 1000 remote workers.
  const client = clientOf(o);
  const answer = await client.status({ limit: STATUS_PAGE });
  let next = answer.next_cursor;
  while (next !== null) {
    const page = await client.status({ limit: STATUS_PAGE, cursor: next });
    answer.nodes.push(...page.nodes);
    next = page.next_cursor;
  }
  answer.next_cursor = null;
  if (o.json) return printJson(answer);
  write(formatStatus(answer));
}

export function registerStatus(program: Command): void {
  defineCommand(
    program,
    'status',
    "the cluster (with a cluster-admin key): scheduler and worker nodes with their last heartbeat and clock offset, shard ownership, and the backlog; with another operator or admin key, the tenant's remote workers",
  ).action(apiAction(status));
}
