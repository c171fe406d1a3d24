/**
 * Webhook notifications: what a tenant may ask to be told (`NOTIFICATION_EVENTS`), the checks a
 * definition passes before anything is written (`validateNotification`), and when a delivery
 * that failed is tried again (`decideDelivery`): exponential backoff, at most `maxAttempts`
 * attempts and no later than `maxAgeMs` after the event, then the delivery is `failed` in its log.
 * Pure: the store writes the definitions and the outbox, the notifier (scheduler) sends.
 */
import { formatDuration, parseDuration } from './duration.js';
import { ValidationError } from './errors.js';
import { validateId } from './job.js';
import { badCharIn } from './text.js';
import { checkAllowedUrl } from './url-allow.js';

/**
 * `run.dead`: a run was dead-lettered (its last attempt failed, or its lease ran out on the last).
 * `job.misfired`: the tick dropped slots of a job under its misfire policy.
 * `run.late`: a queued run has waited past its `available_at` longer than `late_after`.
 * `worker.lost`: the reaper took back the runs of a worker whose lease ran out (it stopped
 * heartbeating: crashed, frozen or cut off).
 */
export const NOTIFICATION_EVENTS = ['run.dead', 'job.misfired', 'run.late', 'worker.lost'] as const;
export type NotificationEvent = (typeof NOTIFICATION_EVENTS)[number];

/** Longest URL and secret a notification may hold, characters. */
export const MAX_NOTIFICATION_URL = 2000;
export const MAX_NOTIFICATION_SECRET = 200;
/**
 * Most notifications a tenant may hold. Each dead letter, reap and misfire writes one delivery per
 * notification that wants it, in the statement that makes the change: the cap bounds that fan-out.
 */
export const MAX_NOTIFICATIONS_PER_TENANT = 50;
/** Shortest and longest `late_after`, ms: 1 s to 7 d. */
export const MIN_LATE_AFTER_MS = 1000;
export const MAX_LATE_AFTER_MS = 7 * 24 * 3600 * 1000;

/** A notification as written: the API's body, not yet checked. */
export interface NotificationInput {
  url: unknown;
  events: unknown;
  /** Required with `run.late`, refused without it: a duration such as `10m`. */
  lateAfter?: unknown;
  /** Signs each delivery (HMAC-SHA256) when set; null or absent: unsigned. */
  secret?: unknown;
}

/** A notification checked: canonical events (in `NOTIFICATION_EVENTS`' order), `late_after` in whole seconds. */
export interface ValidNotification {
  url: string;
  events: NotificationEvent[];
  lateAfterSeconds: number | null;
  secret: string | null;
}

/** A notification as the store answers it: never the secret, only whether one is set. */
export interface Notification {
  tenantId: string;
  name: string;
  url: string;
  events: NotificationEvent[];
  lateAfterSeconds: number | null;
  hasSecret: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export type DeliveryState = 'pending' | 'delivered' | 'failed';

/** One row of a notification's delivery log. */
export interface Delivery {
  deliveryId: string;
  event: NotificationEvent;
  state: DeliveryState;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  data: Record<string, unknown>;
  createdAt: Date;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  finishedAt: Date | null;
}

function invalid(field: string, message: string): ValidationError {
  return new ValidationError(message, { field });
}

/** A notification's name: an id (1-200 of A-Z a-z 0-9 . _ : -). */
export function validateNotificationName(name: unknown): string {
  return validateId(name, 'name');
}

/**
 * Checks a definition against `allow` (the server's URL allow-list, as the HTTP executor's):
 * an http(s) URL under it, 1 to 4 known events, `late_after` with `run.late` only, a secret of 16
 * to 200 characters PostgreSQL can store. Throws a `ValidationError` naming the field.
 */
export function validateNotification(input: NotificationInput, allow: readonly string[]): ValidNotification {
  if (typeof input.url !== 'string' || input.url.length > MAX_NOTIFICATION_URL)
    throw invalid('url', `url must be a URL of at most ${MAX_NOTIFICATION_URL} characters`);
  const url = checkAllowedUrl(input.url, allow, 'url', "the server's notification").href;
  if (!Array.isArray(input.events) || input.events.length === 0)
    throw invalid('events', `events must list one or more of ${NOTIFICATION_EVENTS.join(', ')}`);
  for (const e of input.events) {
    if (!NOTIFICATION_EVENTS.includes(e as NotificationEvent))
      throw invalid('events', `events: "${String(e)}" is not one of ${NOTIFICATION_EVENTS.join(', ')}`);
  }
  const events = NOTIFICATION_EVENTS.filter((e) => (input.events as unknown[]).includes(e));
  return { url, events, lateAfterSeconds: lateAfter(input.lateAfter, events), secret: secret(input.secret) };
}

function lateAfter(value: unknown, events: readonly NotificationEvent[]): number | null {
  const wanted = events.includes('run.late');
  if (value === undefined || value === null) {
    if (wanted) throw invalid('late_after', 'late_after (such as "10m") is required with run.late');
    return null;
  }
  if (!wanted) throw invalid('late_after', 'late_after is only for run.late');
  if (typeof value !== 'string') throw invalid('late_after', 'late_after must be a duration such as "10m"');
  const ms = parseDuration(value, 'late_after');
  if (ms < MIN_LATE_AFTER_MS || ms > MAX_LATE_AFTER_MS || ms % 1000 !== 0)
    throw invalid(
      'late_after',
      `late_after must be whole seconds from ${formatDuration(MIN_LATE_AFTER_MS)} to ${formatDuration(MAX_LATE_AFTER_MS)}`,
    );
  return ms / 1000;
}

function secret(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length < 16 || value.length > MAX_NOTIFICATION_SECRET)
    throw invalid('secret', `secret must be 16 to ${MAX_NOTIFICATION_SECRET} characters`);
  const bad = badCharIn(value);
  if (bad)
    throw invalid('secret', `secret holds ${bad === 'nul' ? 'a NUL character' : 'an unpaired surrogate'}`);
  return value;
}

/** How deliveries are retried. */
export interface DeliveryPolicy {
  /** Wait after the first failed attempt, ms; it doubles after each. Default 10000. */
  baseMs: number;
  /** Longest wait between attempts, ms. Default 3600000 (1 h). */
  capMs: number;
  /** Attempts before the delivery is marked failed. Default 8. */
  maxAttempts: number;
  /** No attempt starts later than this after the event, ms. Default 86400000 (24 h). */
  maxAgeMs: number;
}

export const DEFAULT_DELIVERY_POLICY: Readonly<DeliveryPolicy> = Object.freeze({
  baseMs: 10_000,
  capMs: 3_600_000,
  maxAttempts: 8,
  maxAgeMs: 86_400_000,
});

/**
 * What follows an attempt (`attempt` from 1): a 2xx answer is `delivered`; anything else is tried
 * again after `baseMs × 2^(attempt−1)` (capped), unless that was the last attempt or the next would
 * start past `maxAgeMs` after the event (`createdAt`): then `failed`.
 */
export function decideDelivery(p: {
  attempt: number;
  status: number | null;
  now: number;
  createdAt: number;
  policy: DeliveryPolicy;
}): { state: DeliveryState; nextAttemptAt: number | null } {
  if (p.status !== null && p.status >= 200 && p.status < 300)
    return { state: 'delivered', nextAttemptAt: null };
  const wait = Math.min(p.policy.capMs, p.policy.baseMs * 2 ** Math.min(p.attempt - 1, 30));
  const next = p.now + wait;
  if (p.attempt >= p.policy.maxAttempts || next > p.createdAt + p.policy.maxAgeMs)
    return { state: 'failed', nextAttemptAt: null };
  return { state: 'pending', nextAttemptAt: next };
}

/**
 * Where the next claim of deliveries starts its walk of the notifications (after the key returned;
 * null: from the first), so that claims take turns: when the claim was full (`picked` reached
 * `limit`), after the last notification it served, so those past it go first next time; when the
 * walk was cut off at `walk` notifications without filling the claim, after the last it looked at;
 * otherwise the walk reached the end, and the next starts again from the first. `step` is a
 * notification's place in the walk (from 1).
 */
export function nextDeliveryTurn(p: {
  picked: readonly { tenantId: string; name: string; step: number }[];
  limit: number;
  walked: number;
  walk: number;
  lastWalked: { tenantId: string; name: string } | null;
}): { tenantId: string; name: string } | null {
  if (p.picked.length >= p.limit) {
    const last = p.picked.reduce<(typeof p.picked)[number] | null>(
      (a, d) => (a === null || d.step > a.step ? d : a),
      null,
    );
    if (last !== null) return { tenantId: last.tenantId, name: last.name };
  }
  if (p.walked >= p.walk && p.lastWalked !== null) return { ...p.lastWalked };
  return null;
}
