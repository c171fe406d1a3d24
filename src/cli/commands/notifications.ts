/**
 * `tock notifications …`: define (`set`, an admin key), inspect (`get`, `list`), delete the tenant's
 * webhook notifications and read one's delivery log (`deliveries`), over the HTTP API.
 */
import type { Command } from 'commander';
import type { NotificationBody, NotificationEvent } from '../../client/index.js';
import { type ApiOptions, apiAction, clientOf, moreHint, pages, printJson, write } from '../api-command.js';
import { defineCommand, type OptionsFor } from '../command.js';
import { deliveryTable, notificationFields, notificationTable } from '../format/notifications.js';
import { checkJobId } from '../options/parsers.js';

/** A notification's name: an id, as a job's (checked before any request). */
const checkName = checkJobId;

async function set(name: string, o: OptionsFor<'notifications set'>): Promise<void> {
  // Every field is sent: PUT replaces the definition, so a flag not given unsets its field.
  const body: NotificationBody = {
    url: o.webhook,
    events: o.events as NotificationEvent[],
    late_after: o.lateAfter ?? null,
    secret: o.secret ?? null,
  };
  const { created, ...n } = await clientOf(o).putNotification(checkName(name), body);
  if (o.json) return printJson(n);
  write(`${created ? 'created' : 'replaced'} notification ${n.name}\n${notificationFields(n)}`);
}

async function get(name: string, o: ApiOptions): Promise<void> {
  const n = await clientOf(o).getNotification(checkName(name));
  if (o.json) return printJson(n);
  write(notificationFields(n));
}

async function list(o: OptionsFor<'notifications list'>): Promise<void> {
  const client = clientOf(o);
  const page = await pages(o.all, o.cursor, async (cursor) => {
    const p = await client.listNotifications({ limit: o.limit, cursor });
    return { items: p.notifications, next_cursor: p.next_cursor };
  });
  if (o.json) return printJson({ notifications: page.items, next_cursor: page.next_cursor });
  write(notificationTable(page.items));
  moreHint('tock notifications list', page.next_cursor);
}

async function remove(name: string, o: ApiOptions): Promise<void> {
  await clientOf(o).deleteNotification(checkName(name));
  if (o.json) return printJson({ name, deleted: true });
  write(`deleted notification ${name}\n`);
}

async function deliveries(name: string, o: OptionsFor<'notifications deliveries'>): Promise<void> {
  const client = clientOf(o);
  const checked = checkName(name);
  const page = await pages(o.all, o.cursor, async (cursor) => {
    const p = await client.listDeliveries(checked, { limit: o.limit, cursor });
    return { items: p.deliveries, next_cursor: p.next_cursor };
  });
  if (o.json) return printJson({ deliveries: page.items, next_cursor: page.next_cursor });
  write(deliveryTable(page.items));
  moreHint(`tock notifications deliveries ${checked}`, page.next_cursor);
}

export function registerNotifications(program: Command): void {
  const notifications = program
    .command('notifications')
    .description(
      'webhook notifications: POST dead runs, misfires, late runs and lost workers to a URL, signed (over the HTTP API)',
    );
  const name = [['<name>', 'the notification: 1-200 characters of A-Z a-z 0-9 . _ : -']] as const;
  defineCommand(
    notifications,
    'notifications set',
    'create or replace a notification (a flag not given is unset, the secret included); needs an admin key',
    name,
  ).action(apiAction(set));
  defineCommand(
    notifications,
    'notifications get',
    'show one notification (whether it is signed; never the secret)',
    name,
  ).action(apiAction(get));
  defineCommand(notifications, 'notifications list', "list the tenant's notifications, by name").action(
    apiAction(list),
  );
  defineCommand(
    notifications,
    'notifications delete',
    'delete a notification with its delivery log; needs an admin key',
    name,
  ).action(apiAction(remove));
  defineCommand(
    notifications,
    'notifications deliveries',
    "a notification's recent deliveries, newest first: event, state, attempts, last status and error",
    name,
  ).action(apiAction(deliveries));
}
