/** Notifications as an operator reads them: `tock notifications get|list|set|deliveries`. */
import type * as Api from '../../client/index.js';
import { formatFields, formatTable, truncate } from './table.js';

/** One notification, a field a line; the secret is never shown (the API does not answer it). */
export function notificationFields(n: Api.Notification): string {
  return formatFields([
    ['name', n.name],
    ['url', n.url],
    ['events', n.events.join(', ')],
    ['late_after', n.late_after ?? 'none'],
    ['signed', n.secret_set ? 'yes (a secret is set)' : 'no'],
    ['created_at', n.created_at],
    ['updated_at', n.updated_at],
  ]);
}

/** Notifications a row each (`tock notifications list`). */
export function notificationTable(list: readonly Api.Notification[]): string {
  if (list.length === 0) return 'no notifications\n';
  return formatTable(
    ['NAME', 'EVENTS', 'URL', 'SIGNED', 'UPDATED'],
    list.map((n) => [n.name, n.events.join(','), n.url, n.secret_set ? 'yes' : 'no', n.updated_at]),
  );
}

/** Deliveries a row each, newest first (`tock notifications deliveries`). */
export function deliveryTable(list: readonly Api.Delivery[]): string {
  if (list.length === 0) return 'no deliveries\n';
  return formatTable(
    ['ID', 'EVENT', 'STATE', 'ATTEMPTS', 'STATUS', 'CREATED', 'LAST_ATTEMPT', 'ERROR'],
    list.map((d) => [
      d.delivery_id,
      d.event,
      d.state,
      d.attempts,
      d.last_status,
      d.created_at,
      d.last_attempt_at,
      d.last_error === null ? null : truncate(d.last_error, 60),
    ]),
  );
}
