/**
 * The node list's bounds for remote workers (workers that reach Tock only through the HTTP API).
 * Cluster nodes (scheduler nodes, workers on the database) are rows without a tenant; a remote
 * worker is a row of its tenant, named `<tenant>/<worker_id>`. No id may contain a `/`, so that
 * name can never be a cluster node's or another tenant's, and nothing an API caller sends can
 * touch a row it does not own or count as a live scheduler.
 */

/** A node whose `info` has no `live_ms` of its own is live this long after its last heartbeat, ms. */
export const DEFAULT_NODE_LIVE_MS = 30_000;

/** How long a remote worker counts as live after its last claim or heartbeat, ms (its `live_ms`). */
export const REMOTE_WORKER_LIVE_MS = 60_000;

/** A remote worker silent this long is forgotten (five of its liveness windows), ms. */
export const REMOTE_WORKER_FORGET_MS = 5 * REMOTE_WORKER_LIVE_MS;

/**
 * At most this many remote-worker rows per tenant. When a tenant is at the cap, a new worker is
 * still recorded and its least recently seen row gives way: the list shows the workers that are
 * alive, and a key that invents worker ids churns only its own tenant's rows.
 */
export const MAX_REMOTE_WORKERS_PER_TENANT = 1000;

/** A remote worker's node id: its tenant, a `/` (allowed in no id), its worker id. */
export function remoteNodeId(tenantId: string, workerId: string): string {
  return `${tenantId}/${workerId}`;
}
