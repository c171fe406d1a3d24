/**
 * The bodies and answers of the notification routes (`routes/notifications.ts`) as TypeBox
 * schemas: strict bodies, a description on every field for the OpenAPI document and
 * docs/http-api.md. The secret is taken, never answered (`secret_set` says whether one is).
 */
import { Type } from 'typebox';
import { MAX_NOTIFICATION_SECRET, MAX_NOTIFICATION_URL, NOTIFICATION_EVENTS } from '../core/index.js';
import { Id, Instant } from './schemas.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

const [DEAD, MISFIRED, LATE, LOST] = NOTIFICATION_EVENTS;
const Event = Type.Union(
  [Type.Literal(DEAD), Type.Literal(MISFIRED), Type.Literal(LATE), Type.Literal(LOST)],
  {
    description:
      'run.dead: a run was dead-lettered; job.misfired: the tick dropped slots of a job (misfire policy); run.late: a queued run waited past its available_at longer than late_after; worker.lost: the reaper took back the runs of a worker that stopped heartbeating',
  },
);

export const NotificationParams = Type.Object({ name: Id('the notification') });

/** `PUT /v1/notifications/{name}`: the whole definition (a field not given is unset: PUT replaces). */
export const NotificationBody = Type.Object(
  {
    url: Type.String({
      maxLength: MAX_NOTIFICATION_URL,
      description:
        "where each event is POSTed: an http(s) URL under the server's notification allow-list (--notify-allow)",
    }),
    events: Type.Array(Event, { minItems: 1, maxItems: 10, description: 'the events to send' }),
    late_after: Type.Optional(
      Nullable(
        Type.String({
          maxLength: 32,
          description:
            'with run.late (required there, refused otherwise): how long past its available_at a queued run is late, 1s to 7d (e.g. 10m)',
        }),
      ),
    ),
    secret: Type.Optional(
      Nullable(
        Type.String({
          maxLength: MAX_NOTIFICATION_SECRET,
          description: `16 to ${MAX_NOTIFICATION_SECRET} characters: each delivery then carries X-Tock-Signature: sha256=<hex HMAC-SHA256 of "<X-Tock-Timestamp>.<body>">; unset: unsigned. Never answered back`,
        }),
      ),
    ),
  },
  { additionalProperties: false },
);

export const Notification = Type.Object({
  name: Type.String(),
  url: Type.String(),
  events: Type.Array(Event),
  late_after: Nullable(Type.String({ description: 'when a queued run is late (run.late); null without it' })),
  secret_set: Type.Boolean({ description: 'whether deliveries are signed (the secret is never answered)' }),
  created_at: Instant('created'),
  updated_at: Instant('last replaced'),
});

export const NotificationList = Type.Object({
  notifications: Type.Array(Notification, { description: "the tenant's notifications by name" }),
  next_cursor: Nullable(Type.String()),
});

export const Delivery = Type.Object({
  delivery_id: Type.String({ description: "the X-Tock-Delivery header and the body's id" }),
  event: Event,
  state: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')], {
    description:
      'pending: to be tried (again); delivered: answered 2xx; failed: attempts or age spent, or refused',
  }),
  attempts: Type.Integer({ description: 'attempts made' }),
  last_status: Nullable(Type.Integer({ description: "the last attempt's HTTP status; null: no answer" })),
  last_error: Nullable(
    Type.String({ description: 'why the last attempt did not deliver; null when it did' }),
  ),
  data: Type.Object({}, { additionalProperties: true, description: "the event's data, as sent" }),
  created_at: Instant('when the event happened'),
  last_attempt_at: Nullable(Instant('the last attempt')),
  next_attempt_at: Nullable(Instant('the next attempt (pending only)')),
  finished_at: Nullable(Instant('when it was delivered or given up')),
});

export const DeliveryList = Type.Object({
  deliveries: Type.Array(Delivery, { description: 'newest first; kept 7 days after they end' }),
  next_cursor: Nullable(Type.String()),
});
