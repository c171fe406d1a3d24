/**
 * The cluster as `GET /v1/status` tells it to this key: for a cluster-admin (and `tock dev`) every
 * node with its heartbeat, clock offset and shards, the shard ownership and the backlog; for
 * another operator its tenant's remote workers. Either way, the runs no live worker serves. A
 * reader key may not read the status (the API needs `operate`), so the page says so without
 * asking. Every key sees its tenant's scheduling delay over the last hour (`GET /v1/delay`, p50 and
 * p99 per minute of slots): of every pool, or of the pool chosen; one request per refresh.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api.js';
import { DelayChart } from '../delay-chart.js';
import { usePoll } from '../poll.js';
import type { Session } from '../session.js';
import type { DelayAnswer, Status } from '../types.js';
import { LoadError, When } from '../ui.js';

export function ClusterPage({ session }: { session: Session }) {
  return (
    <>
      <h1>Cluster</h1>
      {session.can('operate') ? (
        <ClusterStatus />
      ) : (
        <p class="notice">The cluster's status needs an operator, admin or cluster-admin key.</p>
      )}
      <TenantDelay />
    </>
  );
}

/** The tenant's delay, of one pool or all: one series, so one request per refresh however many pools. */
function TenantDelay() {
  const [pool, setPool] = useState('');
  const [typed, setTyped] = useState('');
  const delay = usePoll(() => api<DelayAnswer>(withQuery('/v1/delay', { pool: pool || undefined })), [pool]);
  return (
    <section aria-labelledby="delay">
      <h2 id="delay">Scheduling delay</h2>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setPool(typed.trim());
        }}
      >
        <label>
          Pool{' '}
          <input
            value={typed}
            placeholder="every pool"
            onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
          />
        </label>{' '}
        <button type="submit">Show</button>
      </form>
      <LoadError error={delay.error} />
      {delay.data && (
        <DelayChart
          caption={`Scheduling delay of ${pool ? `pool ${pool}` : 'every pool'}, the last hour`}
          answer={delay.data}
          stats={['p50', 'p99']}
          testId="cluster-delay"
        />
      )}
    </section>
  );
}

function ClusterStatus() {
  const status = usePoll(() => api<Status>('/v1/status'), []);
  const s = status.data;
  const now = Date.now();
  return (
    <>
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
          {s.backlog && <QueuesTable backlog={s.backlog} />}
          <UnservedTable items={s.unserved?.items ?? []} now={now} />
          <NodesTable s={s} now={now} />
        </>
      )}
    </>
  );
}

/** The ready runs by pool and priority class, the deepest first. */
function QueuesTable({ backlog }: { backlog: NonNullable<Status['backlog']> }) {
  if (backlog.queues.length === 0) return null;
  return (
    <div class="table-wrap">
      <table data-table="queues">
        <caption>
          Runs ready to claim by pool and priority class, the deepest first
          {backlog.queues_more > 0 && ` (and ${backlog.queues_more} more)`}
        </caption>
        <thead>
          <tr>
            <th scope="col">Pool</th>
            <th scope="col">Priority</th>
            <th scope="col">Ready</th>
          </tr>
        </thead>
        <tbody>
          {backlog.queues.map((q) => (
            <tr key={`${q.pool}/${q.priority}`}>
              <td>{q.pool}</td>
              <td>{q.priority}</td>
              <td>{q.ready}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
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
