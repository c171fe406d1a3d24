/**
 * The cluster as `GET /v1/status` tells it to this key: for a cluster-admin (and `tock dev`) every
 * node with its heartbeat, clock offset and shards, the shard ownership and the backlog; for
 * another operator its tenant's remote workers. Either way, the runs no live worker serves. A
 * reader key may not read it (the API needs `operate`), so the page says so without asking.
 */
import { api } from '../api.js';
import { usePoll } from '../poll.js';
import type { Session } from '../session.js';
import type { Status } from '../types.js';
import { LoadError, When } from '../ui.js';

export function ClusterPage({ session }: { session: Session }) {
  if (!session.can('operate'))
    return (
      <>
        <h1>Cluster</h1>
        <p class="notice">The cluster's status needs an operator, admin or cluster-admin key.</p>
      </>
    );
  return <ClusterStatus />;
}

function ClusterStatus() {
  const status = usePoll(() => api<Status>('/v1/status'), []);
  const s = status.data;
  const now = Date.now();
  return (
    <>
      <h1>Cluster</h1>
      <LoadError error={status.error} />
      {s && (
        <>
          <p class="muted">
            {s.scope === 'cluster' ? 'The whole cluster' : "Your tenant's remote workers"}, as the server saw
            it at <When iso={s.server_time} now={now} />.
          </p>
          <dl class="facts">
            {s.shards && (
              <>
                <dt>Shards</dt>
                <dd>
                  {s.shards.owned} of {s.shards.count} owned
                  {s.shards.unowned > 0 && <strong> ({s.shards.unowned} nobody ticks)</strong>}
                </dd>
              </>
            )}
            {s.backlog && (
              <>
                <dt>Backlog</dt>
                <dd>
                  {s.backlog.due_jobs} jobs due, {s.backlog.ready_runs} runs ready to claim
                </dd>
              </>
            )}
            {s.unserved && (
              <>
                <dt>Unserved runs</dt>
                <dd>
                  {s.unserved.runs === 0 ? 'none' : `${s.unserved.runs} claimable runs no live worker serves`}
                </dd>
              </>
            )}
          </dl>
          <UnservedTable items={s.unserved?.items ?? []} now={now} />
          <NodesTable s={s} now={now} />
        </>
      )}
    </>
  );
}

function UnservedTable({ items, now }: { items: NonNullable<Status['unserved']>['items']; now: number }) {
  if (items.length === 0) return null;
  return (
    <div class="table-wrap">
      <table>
        <caption>Claimable runs no live worker serves, longest waiting first</caption>
        <thead>
          <tr>
            <th scope="col">Tenant</th>
            <th scope="col">Pool</th>
            <th scope="col">Handler</th>
            <th scope="col">Runs</th>
            <th scope="col">Waiting since</th>
          </tr>
        </thead>
        <tbody>
          {items.map((u) => (
            <tr key={`${u.tenant_id}/${u.pool}/${u.handler}`}>
              <td>{u.tenant_id}</td>
              <td>{u.pool}</td>
              <td>{u.handler}</td>
              <td>{u.runs}</td>
              <td>
                <When iso={u.since} now={now} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function NodesTable({ s, now }: { s: Status; now: number }) {
  if (s.nodes.length === 0) return <p class="muted">No node has reported.</p>;
  return (
    <div class="table-wrap">
      <table>
        <caption>Nodes{s.next_cursor ? ' (the first page)' : ''}</caption>
        <thead>
          <tr>
            <th scope="col">Node</th>
            <th scope="col">Role</th>
            <th scope="col">Live</th>
            <th scope="col">Last seen</th>
            <th scope="col">Started</th>
            <th scope="col">Clock offset</th>
            <th scope="col">Shards</th>
          </tr>
        </thead>
        <tbody>
          {s.nodes.map((n) => (
            <tr key={n.node_id}>
              <td class="id">{n.node_id}</td>
              <td>{n.role}</td>
              <td>{n.live ? 'yes' : <strong>no</strong>}</td>
              <td>
                <When iso={n.last_seen_at} now={now} />
              </td>
              <td>
                <When iso={n.started_at} now={now} />
              </td>
              <td>{n.clock_offset_ms === null ? '—' : `${n.clock_offset_ms} ms`}</td>
              <td>{n.shards}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
