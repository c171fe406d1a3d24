/**
 * Notifications: the tenant's webhooks (`GET /v1/notifications`, cursor pages) with the events each
 * sends, and for one its delivery log (`GET /v1/notifications/{name}/deliveries`, newest first,
 * cursor pages): each delivery's event, state, attempts, last status and error, last and next
 * attempt. Read-only (`tock notifications set|delete` change them). Polled while the tab is visible.
 */
import { api, seg, withQuery } from '../api.js';
import { json } from '../format.js';
import { usePoll } from '../poll.js';
import { notificationHref } from '../routes.js';
import { IdLink, LoadError, Pager, StateBadge, usePager, When } from '../ui.js';

/** Notifications a page, and deliveries a page. */
export const NOTIFICATIONS_PAGE = 50;

interface Notification {
  name: string;
  url: string;
  events: string[];
  late_after: string | null;
  secret_set: boolean;
  created_at: string;
  updated_at: string;
}

interface Delivery {
  delivery_id: string;
  event: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  data: Record<string, unknown>;
  created_at: string;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  finished_at: string | null;
}

export function NotificationsPage() {
  const pager = usePager();
  const list = usePoll(
    () =>
      api<{ notifications: Notification[]; next_cursor: string | null }>(
        withQuery('/v1/notifications', { limit: NOTIFICATIONS_PAGE, cursor: pager.cursor }),
      ),
    [pager.cursor],
  );
  const now = Date.now();
  const rows = list.data?.notifications ?? [];
  return (
    <>
      <h1>Notifications</h1>
      <p class="muted">
        Webhooks for dead runs, misfires, late runs and lost workers. Open one for its delivery log.
      </p>
      <LoadError error={list.error} />
      {list.data === null ? (
        !list.error && <p class="muted">Loading notifications…</p>
      ) : rows.length === 0 ? (
        <p class="muted">No notifications yet (tock notifications set defines one).</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption>Notifications, by name</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">Late after</th>
                <th scope="col">Signed</th>
                <th scope="col">Changed</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((n) => (
                <tr key={n.name} data-notification={n.name}>
                  <td>
                    <IdLink href={notificationHref(n.name)} id={n.name} />
                  </td>
                  <td class="id">{n.url}</td>
                  <td>{n.events.join(', ')}</td>
                  <td>{n.late_after ?? <span class="muted">—</span>}</td>
                  <td>{n.secret_set ? 'yes' : 'no'}</td>
                  <td>
                    <When iso={n.updated_at} now={now} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager
        pager={pager}
        nextCursor={list.data?.next_cursor}
        what="notifications"
        labels={['First', 'Previous', 'Next']}
      />
    </>
  );
}

export function NotificationPage({ name }: { name: string }) {
  const pager = usePager();
  const one = usePoll(() => api<Notification>(`/v1/notifications/${seg(name)}`), [name]);
  const log = usePoll(
    () =>
      api<{ deliveries: Delivery[]; next_cursor: string | null }>(
        withQuery(`/v1/notifications/${seg(name)}/deliveries`, {
          limit: NOTIFICATIONS_PAGE,
          cursor: pager.cursor,
        }),
      ),
    [name, pager.cursor],
  );
  const now = Date.now();
  const n = one.data;
  return (
    <>
      <p class="crumbs">
        <a href="#/notifications">Notifications</a> /
      </p>
      <h1>
        Notification <span class="id">{name}</span>
      </h1>
      <LoadError error={one.error} />
      {n && (
        <dl class="facts">
          <dt>URL</dt>
          <dd class="id">{n.url}</dd>
          <dt>Events</dt>
          <dd>{n.events.join(', ')}</dd>
          <dt>Late after</dt>
          <dd>{n.late_after ?? '—'}</dd>
          <dt>Signed</dt>
          <dd>{n.secret_set ? 'yes (X-Tock-Signature)' : 'no'}</dd>
        </dl>
      )}
      {one.error?.code !== 'not_found' && (
        <section aria-labelledby="deliveries">
          <h2 id="deliveries">Deliveries, newest first</h2>
          <LoadError error={log.error} />
          {log.data &&
            (log.data.deliveries.length === 0 ? (
              <p class="muted">No delivery yet.</p>
            ) : (
              <DeliveriesTable name={name} page={pager.page} deliveries={log.data.deliveries} now={now} />
            ))}
          <Pager pager={pager} nextCursor={log.data?.next_cursor} what="deliveries" />
        </section>
      )}
    </>
  );
}

function DeliveriesTable({
  name,
  page,
  deliveries,
  now,
}: {
  name: string;
  page: number;
  deliveries: Delivery[];
  now: number;
}) {
  return (
    <div class="table-wrap">
      <table>
        <caption>
          Deliveries of {name}, page {page}
        </caption>
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">State</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last status</th>
            <th scope="col">Last error</th>
            <th scope="col">Happened</th>
            <th scope="col">Last attempt</th>
            <th scope="col">Next attempt</th>
            <th scope="col">Data</th>
          </tr>
        </thead>
        <tbody>
          {deliveries.map((d) => (
            <tr key={d.delivery_id} data-delivery={d.delivery_id}>
              <td>{d.event}</td>
              <td>
                <StateBadge state={d.state} />
              </td>
              <td>{d.attempts}</td>
              <td>{d.last_status ?? <span class="muted">none</span>}</td>
              <td class="error-text">{d.last_error ?? ''}</td>
              <td>
                <When iso={d.created_at} now={now} />
              </td>
              <td>
                <When iso={d.last_attempt_at} now={now} />
              </td>
              <td data-testid="next-attempt">
                <When iso={d.next_attempt_at} now={now} empty={d.state === 'pending' ? 'now' : '—'} />
              </td>
              <td>
                <details>
                  <summary>JSON</summary>
                  <pre>{json(d.data)}</pre>
                </details>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
