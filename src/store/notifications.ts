/**
 * Webhook notifications in the database: a tenant's definitions (`notifications`), their outbox
 * and delivery log (`notification_deliveries`), the notifier's claim of due deliveries and the
 * record of each attempt, and the scan for late runs. Every read and write an API caller makes is
 * the tenant's; the secret is written, never read back but by the notifier's claim.
 */
import {
  ConflictError,
  type Delivery,
  MAX_NOTIFICATIONS_PER_TENANT,
  NotFoundError,
  type Notification,
  type NotificationEvent,
  nextDeliveryTurn,
  type ValidNotification,
  validateNotificationName,
} from '../core/index.js';
import { checkInstant, checkLimit } from './checks.js';
import { decodeCursor, encodeCursor, notIssued } from './cursor.js';
import * as N from './queries/notifications.js';
import type { Queryable, Row } from './rows.js';
import type { DeliveryClaim, DeliveryOutcome, DueDelivery, NotificationKey, Page } from './types.js';

function toNotification(r: Row): Notification {
  return {
    tenantId: r.tenant_id,
    name: r.name,
    url: r.url,
    events: r.events,
    lateAfterSeconds: r.late_after_seconds,
    hasSecret: r.has_secret,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toDelivery(r: Row): Delivery {
  return {
    deliveryId: r.delivery_id,
    event: r.event,
    state: r.state,
    attempts: r.attempts,
    lastStatus: r.last_status,
    lastError: r.last_error,
    data: r.data,
    createdAt: r.created_at,
    lastAttemptAt: r.last_attempt_at,
    nextAttemptAt: r.next_attempt_at,
    finishedAt: r.finished_at,
  };
}

const missing = (name: string) => new NotFoundError(`notification "${name}" does not exist`, { name });

/**
 * Creates or replaces the tenant's notification `name` (already checked by `validateNotification`),
 * inside a transaction (`db` a client in it); `ConflictError` when a new one would pass
 * `MAX_NOTIFICATIONS_PER_TENANT`.
 */
export async function putNotification(
  db: Queryable,
  p: { tenantId: string; name: string; notification: ValidNotification; now: number },
): Promise<{ notification: Notification; created: boolean }> {
  const name = validateNotificationName(p.name);
  const n = p.notification;
  await db.query(N.notificationTenantLock, [p.tenantId]);
  const { rows } = await db.query(N.notificationPut, [
    p.tenantId,
    name,
    n.url,
    n.events,
    n.lateAfterSeconds,
    n.secret,
    checkInstant(p.now, 'now'),
    MAX_NOTIFICATIONS_PER_TENANT,
  ]);
  const row = rows[0] as Row | undefined;
  if (!row)
    throw new ConflictError(
      `the tenant has ${MAX_NOTIFICATIONS_PER_TENANT} notifications, the most it may hold: delete one first`,
      { max: MAX_NOTIFICATIONS_PER_TENANT },
    );
  return { notification: toNotification(row), created: row.created === true };
}

export async function getNotification(
  db: Queryable,
  p: { tenantId: string; name: string },
): Promise<Notification> {
  const name = validateNotificationName(p.name);
  const { rows } = await db.query(N.notificationGet, [p.tenantId, name]);
  if (!rows[0]) throw missing(name);
  return toNotification(rows[0]);
}

/** The tenant's notifications by name, one page. */
export async function listNotifications(
  db: Queryable,
  p: { tenantId: string; limit: number; cursor?: string | null },
): Promise<Page<Notification>> {
  const limit = checkLimit(p.limit);
  let after: string | null = null;
  if (p.cursor) {
    const [name] = decodeCursor(p.cursor);
    if (typeof name !== 'string') throw notIssued();
    after = name;
  }
  const { rows } = await db.query(N.notificationList, [p.tenantId, after, limit + 1]);
  const items = rows.slice(0, limit).map(toNotification);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor([last.name]) : null };
}

/** Deletes the notification and its delivery log; `NotFoundError` when the tenant has none by that name. */
export async function deleteNotification(
  db: Queryable,
  p: { tenantId: string; name: string },
): Promise<void> {
  const name = validateNotificationName(p.name);
  const { rowCount } = await db.query(N.notificationDelete, [p.tenantId, name]);
  if (!rowCount) throw missing(name);
}

/** A notification's deliveries, newest first, one page; `NotFoundError` when it does not exist. */
export async function listDeliveries(
  db: Queryable,
  p: { tenantId: string; name: string; limit: number; cursor?: string | null },
): Promise<Page<Delivery>> {
  const limit = checkLimit(p.limit);
  await getNotification(db, p);
  let before: string | null = null;
  if (p.cursor) {
    const [id] = decodeCursor(p.cursor);
    if (typeof id !== 'string' || !/^[1-9][0-9]{0,17}$/.test(id)) throw notIssued();
    before = id;
  }
  const { rows } = await db.query(N.deliveryList, [p.tenantId, p.name, before, limit + 1]);
  const items = rows.slice(0, limit).map(toDelivery);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor([last.deliveryId]) : null };
}

/** Notifications a claim walks at most when not told (`DeliveryClaim.walk`). */
export const DELIVERY_WALK = 1000;

/** Picks and claims at most this many times in one `claimDeliveries`. */
const CLAIM_ROUNDS = 3;

/**
 * The due deliveries a claim would take now, in turns across notifications and tenants
 * (`deliveryDuePick`, read only), leaving out `exclude`; and where the next claim's walk starts
 * (`nextDeliveryTurn`).
 */
export async function pickDeliveries(
  db: Queryable,
  p: DeliveryClaim & { exclude?: readonly string[] },
): Promise<{ picked: Row[]; next: NotificationKey | null }> {
  const now = checkInstant(p.now, 'now');
  const limit = checkLimit(p.limit, 10_000);
  const walk = checkLimit(p.walk ?? DELIVERY_WALK, 100_000);
  const busy = p.busy ?? [];
  const { rows } = await db.query(N.deliveryDuePick, [
    now,
    p.after?.tenantId ?? null,
    p.after?.name ?? null,
    walk,
    busy.map((b) => b.tenantId),
    busy.map((b) => b.name),
    busy.map((b) => b.count),
    p.perNotification ?? limit,
    p.perTenant ?? limit,
    limit,
    p.exclude ?? [],
  ]);
  const picked = rows.filter((r: Row) => r.delivery_id !== null);
  const summary = rows[0] as Row | undefined;
  const next = nextDeliveryTurn({
    picked: picked.map((r: Row) => ({ tenantId: r.tenant_id, name: r.name, step: r.step })),
    limit,
    walked: summary?.walked ?? 0,
    walk,
    lastWalked: summary?.last_tenant ? { tenantId: summary.last_tenant, name: summary.last_name } : null,
  });
  return { picked, next };
}

/**
 * Claims up to `limit` due deliveries for `leaseMs`, by turns across notifications and tenants
 * (`pickDeliveries`, then `deliveryClaimIds`). A pick reads without locking, so another node
 * claiming at the same moment picks the same first deliveries and takes them first; this node then
 * picks again without those (and with what it took counted as in flight, so the caps hold), at most
 * CLAIM_ROUNDS picks in all: two nodes claiming at once split the due deliveries rather than one
 * of them coming away with none. `next`: where the next claim's walk starts (the first pick's).
 */
export async function claimDeliveries(
  db: Queryable,
  p: DeliveryClaim,
): Promise<{ deliveries: DueDelivery[]; next: NotificationKey | null }> {
  const now = checkInstant(p.now, 'now');
  const limit = checkLimit(p.limit, 10_000);
  const deliveries: DueDelivery[] = [];
  const busy = [...(p.busy ?? [])];
  const exclude: string[] = [];
  let next: NotificationKey | null = null;
  for (let round = 0; round < CLAIM_ROUNDS && deliveries.length < limit; round++) {
    const pick = await pickDeliveries(db, { ...p, limit: limit - deliveries.length, busy, exclude });
    if (round === 0) next = pick.next;
    if (pick.picked.length === 0) break;
    const ids = pick.picked.map((r: Row) => r.delivery_id as string);
    const claimed = await db.query(N.deliveryClaimIds, [now, ids, p.leaseMs]);
    for (const r of claimed.rows as Row[]) {
      deliveries.push({
        deliveryId: r.delivery_id,
        tenantId: r.tenant_id,
        name: r.name,
        event: r.event as NotificationEvent,
        data: r.data,
        createdAt: r.created_at,
        attempt: r.attempts,
        url: r.url,
        secret: r.secret,
      });
      busy.push({ tenantId: r.tenant_id, name: r.name, count: 1 });
    }
    // Every pick taken: no other node was there first.
    if (claimed.rows.length === ids.length) break;
    exclude.push(...ids);
  }
  return { deliveries, next };
}

/** Records an attempt's outcome; false when the row had moved on (another node's attempt). */
export async function finishDelivery(db: Queryable, p: DeliveryOutcome): Promise<boolean> {
  const { rowCount } = await db.query(N.deliveryFinish, [
    p.deliveryId,
    p.attempt,
    p.state,
    p.status,
    p.error,
    p.nextAttemptAt === null ? null : new Date(p.nextAttemptAt),
    checkInstant(p.now, 'now'),
  ]);
  return (rowCount ?? 0) > 0;
}

/** Deletes up to `limit` finished deliveries that ended before `before`; how many. */
export async function pruneDeliveries(db: Queryable, p: { before: number; limit: number }): Promise<number> {
  const { rowCount } = await db.query(N.deliveryPrune, [checkInstant(p.before, 'before'), p.limit]);
  return rowCount ?? 0;
}

/**
 * One step of the scan for late runs, inside a transaction (`db` a client in it): up to
 * `notifications` of the notifications that want `run.late`, after `after` (null: from the first),
 * locked; for each, up to `runs` of its tenant's queued runs late at `now` get a delivery, and the
 * scan's mark moves past them (to now − late_after when fewer were found). `next`: where the next
 * step starts (null: every notification was seen).
 */
export async function scanLateRuns(
  db: Queryable,
  p: { now: number; after: { tenantId: string; name: string } | null; notifications: number; runs: number },
): Promise<{ written: number; next: { tenantId: string; name: string } | null }> {
  const now = checkInstant(p.now, 'now');
  const { rows } = await db.query(N.notificationsLateLock, [
    p.after?.tenantId ?? null,
    p.after?.name ?? null,
    p.notifications,
  ]);
  let written = 0;
  for (const n of rows) {
    const cutoff = new Date(p.now - n.late_after_seconds * 1000);
    const r = await db.query(N.lateDeliveries, [
      n.tenant_id,
      n.name,
      n.late_from,
      n.late_run,
      cutoff,
      p.runs,
      now,
    ]);
    const row = r.rows[0] as Row;
    written += row.written;
    // A full batch: go on after its last run; otherwise every late run before the cutoff is seen.
    const full = row.scanned >= p.runs;
    const mark = full ? [row.last_at, row.last_run] : [cutoff, null];
    // Never move back (a shorter late_after since the last scan would).
    if (n.late_from === null || (mark[0] as Date).getTime() >= (n.late_from as Date).getTime())
      await db.query(N.notificationLateMark, [n.tenant_id, n.name, ...mark]);
  }
  const last = rows.at(-1);
  return {
    written,
    next: rows.length >= p.notifications && last ? { tenantId: last.tenant_id, name: last.name } : null,
  };
}
