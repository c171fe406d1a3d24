/**
 * The notification routes: create or replace, read, list and delete the caller's tenant's webhook
 * notifications (`PUT/GET/DELETE /v1/notifications/{name}`, `GET /v1/notifications`), and read one's
 * delivery log (`GET /v1/notifications/{name}/deliveries`). Reading needs `read`, writing `admin`
 * (a notification sends the tenant's events to a URL). A URL must fall under the server's
 * notification allow-list (`--notify-allow`), checked before anything is written; the secret is
 * written, never answered.
 */
import { type Delivery, formatDuration, type Notification, validateNotification } from '../../core/index.js';
import * as N from '../notification-schemas.js';
import * as S from '../schemas.js';
import type { RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors, limitOf } from './shared.js';

export interface NotificationRouteOptions extends RouteOptions {
  /** URL prefixes a notification may send to. */
  allow: readonly string[];
}

/** The notification routes, in the order the OpenAPI document lists them. */
export const notificationRoutes: RoutePlugin<NotificationRouteOptions> = async (app, o) => {
  putNotification(app, o);
  readNotifications(app, o);
  deleteNotification(app, o);
  readDeliveries(app, o);
};

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

export function notificationJson(n: Notification) {
  return {
    name: n.name,
    url: n.url,
    events: n.events,
    late_after: n.lateAfterSeconds === null ? null : formatDuration(n.lateAfterSeconds * 1000),
    secret_set: n.hasSecret,
    created_at: n.createdAt.toISOString(),
    updated_at: n.updatedAt.toISOString(),
  };
}

function deliveryJson(d: Delivery) {
  return {
    delivery_id: d.deliveryId,
    event: d.event,
    state: d.state,
    attempts: d.attempts,
    last_status: d.lastStatus,
    last_error: d.lastError,
    data: d.data,
    created_at: d.createdAt.toISOString(),
    last_attempt_at: iso(d.lastAttemptAt),
    next_attempt_at: iso(d.nextAttemptAt),
    finished_at: iso(d.finishedAt),
  };
}

function putNotification(app: RouteApp, { store, clock, allow }: NotificationRouteOptions): void {
  app.put(
    '/v1/notifications/:name',
    {
      config: { permission: 'admin' },
      schema: {
        summary:
          'Create or replace a webhook notification (201 when created, 200 when replaced); needs an admin key',
        tags: ['notifications'],
        params: N.NotificationParams,
        body: N.NotificationBody,
        response: { 200: N.Notification, 201: N.Notification, ...errors },
      },
    },
    async (request, reply) => {
      const { url, events, late_after, secret } = request.body;
      const notification = validateNotification({ url, events, lateAfter: late_after, secret }, allow);
      const r = await store.putNotification({
        tenantId: request.principal.tenantId,
        name: request.params.name,
        notification,
        now: clock.nowMs(),
      });
      return reply.code(r.created ? 201 : 200).send(notificationJson(r.notification));
    },
  );
}

function readNotifications(app: RouteApp, { store }: RouteOptions): void {
  app.get(
    '/v1/notifications',
    {
      config: { permission: 'read' },
      schema: {
        summary: "List the tenant's webhook notifications, by name",
        tags: ['notifications'],
        querystring: S.ListQuery,
        response: { 200: N.NotificationList, ...errors },
      },
    },
    async (request) => {
      const page = await store.listNotifications({
        tenantId: request.principal.tenantId,
        limit: limitOf(request.query),
        cursor: request.query.cursor ?? null,
      });
      return { notifications: page.items.map(notificationJson), next_cursor: page.nextCursor };
    },
  );

  app.get(
    '/v1/notifications/:name',
    {
      config: { permission: 'read' },
      schema: {
        summary: 'One webhook notification (whether a secret is set, never the secret)',
        tags: ['notifications'],
        params: N.NotificationParams,
        response: { 200: N.Notification, ...errors },
      },
    },
    async (request) =>
      notificationJson(
        await store.getNotification({ tenantId: request.principal.tenantId, name: request.params.name }),
      ),
  );
}

function deleteNotification(app: RouteApp, { store }: RouteOptions): void {
  app.delete(
    '/v1/notifications/:name',
    {
      config: { permission: 'admin' },
      schema: {
        summary:
          'Delete a webhook notification with its delivery log (pending deliveries are not sent); needs an admin key',
        tags: ['notifications'],
        params: N.NotificationParams,
        response: { 204: S.NoContent, ...errors },
      },
    },
    async (request, reply) => {
      await store.deleteNotification({ tenantId: request.principal.tenantId, name: request.params.name });
      return reply.code(204).send(null);
    },
  );
}

function readDeliveries(app: RouteApp, { store }: RouteOptions): void {
  app.get(
    '/v1/notifications/:name/deliveries',
    {
      config: { permission: 'read' },
      schema: {
        summary:
          "A notification's recent deliveries, newest first: event, attempts, last status and error, times",
        tags: ['notifications'],
        params: N.NotificationParams,
        querystring: S.ListQuery,
        response: { 200: N.DeliveryList, ...errors },
      },
    },
    async (request) => {
      const page = await store.listDeliveries({
        tenantId: request.principal.tenantId,
        name: request.params.name,
        limit: limitOf(request.query),
        cursor: request.query.cursor ?? null,
      });
      return { deliveries: page.items.map(deliveryJson), next_cursor: page.nextCursor };
    },
  );
}
