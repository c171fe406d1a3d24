/**
 * `tock limits …`: define (`put`), inspect (`get`, `list`) and delete the tenant's named limits
 * and its own limit (`tenant:<tenant>`, an admin key's) over the HTTP API.
 */
import type { Command } from 'commander';
import type { LimitBody } from '../../client/index.js';
import { type ApiOptions, apiAction, clientOf, moreHint, pages, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { limitFields, limitTable } from '../format/limits.js';
import { checkLimitKey } from '../options/parsers.js';

async function put(key: string, o: OptionsFor<'limits put'>): Promise<void> {
  // Every field is sent: PUT replaces the definition, so a flag not given unsets its field.
  const body: LimitBody = {
    rate: o.rate ?? null,
    burst: o.burst ?? null,
    max_concurrency: o.maxConcurrency ?? null,
  };
  const { created, ...limit } = await clientOf(o).putLimit(checkLimitKey(key), body);
  if (o.json) return printJson(limit);
  write(`${created ? 'created' : 'replaced'} limit ${limit.key}\n${limitFields(limit)}`);
}

async function get(key: string, o: ApiOptions): Promise<void> {
  const limit = await clientOf(o).getLimit(checkLimitKey(key));
  if (o.json) return printJson(limit);
  write(limitFields(limit));
}

async function list(o: OptionsFor<'limits list'>): Promise<void> {
  const client = clientOf(o);
  const page = await pages(o.all, o.cursor, async (cursor) => {
    const p = await client.listLimits({ limit: o.limit, cursor });
    return { items: p.limits, next_cursor: p.next_cursor };
  });
  if (o.json) return printJson({ limits: page.items, next_cursor: page.next_cursor });
  write(limitTable(page.items));
  moreHint('tock limits list', page.next_cursor);
}

async function remove(key: string, o: ApiOptions): Promise<void> {
  await clientOf(o).deleteLimit(checkLimitKey(key));
  // The API answers 204 without a body; --json still prints one document.
  if (o.json) return printJson({ key, deleted: true });
  write(`deleted limit ${key}\n`);
}

export function registerLimits(program: Command): void {
  const limits = program
    .command('limits')
    .description('define and inspect rate and concurrency limits that jobs name (over the HTTP API)');
  const key = [
    ['<key>', 'the limit: a name jobs list in `limits` (e.g. payments-api), or tenant:<your tenant>'],
  ] as const;
  defineCommand(
    limits,
    'limits put',
    'create or replace a limit: --rate with --burst, --max-concurrency, or both (a flag not given is unset); tenant:<tenant> needs an admin key',
    key,
  ).action(apiAction(put));
  defineCommand(limits, 'limits get', 'show one limit, with its tokens now and the slots in use', key).action(
    apiAction(get),
  );
  defineCommand(limits, 'limits list', "list the tenant's limits, by key").action(apiAction(list));
  defineCommand(
    limits,
    'limits delete',
    'delete a limit (refused while a job lists it); runs holding its slots keep them until they end',
    key,
  ).action(apiAction(remove));
}
