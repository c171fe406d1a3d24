/**
 * The store's contract for webhook notifications (part of `Store`): the definitions a tenant
 * writes, the delivery log it reads, and what the notifier needs (the scan for late runs, the
 * claim of due deliveries, the record of each attempt, the pruning of the log). The events of dead
 * runs, lost workers and misfires are written by `failRun`, `reapExpired` and `tick` themselves.
 */
import type { Delivery, Notification, ValidNotification } from '../core/index.js';
import type { DeliveryClaim, DeliveryOutcome, DueDelivery, NotificationKey, Page } from './types.js';

export interface NotificationStore {
  /** Creates or replaces (every field) the tenant's notification `name`, checked by `validateNotification`. */
  putNotification(p: {
    tenantId: string;
    name: string;
    notification: ValidNotification;
    now: number;
  }): Promise<{ notification: Notification; created: boolean }>;
  /** One notification of the tenant (`NotFoundError` when it has none by that name). */
  getNotification(p: { tenantId: string; name: string }): Promise<Notification>;
  /** The tenant's notifications by name, one page (`limit` 1 to 500). */
  listNotifications(p: {
    tenantId: string;
    limit: number;
    cursor?: string | null;
  }): Promise<Page<Notification>>;
  /** Deletes a notification with its delivery log (`NotFoundError` when absent). */
  deleteNotification(p: { tenantId: string; name: string }): Promise<void>;
  /** A notification's deliveries, newest first, one page (`NotFoundError` when it does not exist). */
  listDeliveries(p: {
    tenantId: string;
    name: string;
    limit: number;
    cursor?: string | null;
  }): Promise<Page<Delivery>>;
  /**
   * One step of the scan for late runs (all tenants): up to `notifications` notifications that want
   * `run.late` after `after`, each locked while scanned, up to `runs` late runs each. `next`: where
   * the next step starts; null when the scan is through.
   */
  scanLateRuns(p: {
    now: number;
    after: { tenantId: string; name: string } | null;
    notifications: number;
    runs: number;
  }): Promise<{ written: number; next: { tenantId: string; name: string } | null }>;
  /**
   * Claims up to `limit` due deliveries for `leaseMs`, counting the attempt, taken by turns across
   * notifications (see `DeliveryClaim`); `next` is where the next claim's turn starts.
   */
  claimDeliveries(p: DeliveryClaim): Promise<{ deliveries: DueDelivery[]; next: NotificationKey | null }>;
  /** Records an attempt's outcome; false when the delivery had moved past `attempt`. */
  finishDelivery(p: DeliveryOutcome): Promise<boolean>;
  /** Deletes up to `limit` delivered or failed deliveries that ended before `before`; how many. */
  pruneDeliveries(p: { before: number; limit: number }): Promise<number>;
}
