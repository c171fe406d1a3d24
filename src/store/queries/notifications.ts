/**
 * Statements on `notifications` (a tenant's webhooks) and `notification_deliveries` (the outbox and
 * delivery log). The events of dead runs and lost workers are written by `runFail` and `runReap`
 * themselves (`deadDeliveries`, `lostWorkerDeliveries`, CTEs of those statements), a misfire's by
 * the tick's transaction (`misfireDeliveries`), late runs' by the notifier's scan
 * (`lateDeliveries`): each joins `notifications` on the tenant and writes nothing when no
 * notification wants the event.
 */

const NOTIFICATION_COLUMNS = `tenant_id, name, url, events, late_after_seconds, (secret IS NOT NULL) AS has_secret,
  created_at, updated_at`;

const DELIVERY_INSERT = `INSERT INTO notification_deliveries
  (tenant_id, name, event, dedupe, data, created_at, next_attempt_at)`;

/** $1 tenant. Serialises the tenant's notification writes (the cap of `notificationPut`), to the transaction's end. */
export const notificationTenantLock = `SELECT pg_advisory_xact_lock(hashtext('tock.notifications.' || current_schema() || '.' || $1::text))`;

/**
 * $1 tenant, $2 name, $3 url, $4 events, $5 late_after_seconds, $6 secret, $7 now, $8 the most
 * notifications a tenant may hold. Creates or replaces (every field; where its last scan for late
 * runs stopped is kept). `created`: the row is new. No row: a new one would pass the cap (run it
 * after `notificationTenantLock`, so concurrent creates cannot both pass).
 */
export const notificationPut = `
INSERT INTO notifications AS n (tenant_id, name, url, events, late_after_seconds, secret, created_at, updated_at)
SELECT $1::text, $2::text, $3::text, $4::text[], $5::integer, $6::text, $7, $7
WHERE (SELECT count(*) FROM notifications WHERE tenant_id = $1 AND name <> $2) < $8::integer
  OR EXISTS (SELECT 1 FROM notifications WHERE tenant_id = $1 AND name = $2)
ON CONFLICT (tenant_id, name) DO UPDATE SET
  url = EXCLUDED.url, events = EXCLUDED.events, late_after_seconds = EXCLUDED.late_after_seconds,
  secret = EXCLUDED.secret, updated_at = EXCLUDED.updated_at
RETURNING ${NOTIFICATION_COLUMNS}, (xmax = 0) AS created`;

/** $1 tenant, $2 name. */
export const notificationGet = `SELECT ${NOTIFICATION_COLUMNS} FROM notifications WHERE tenant_id = $1 AND name = $2`;

/** $1 tenant, $2 after this name (null: from the first), $3 rows. */
export const notificationList = `
SELECT ${NOTIFICATION_COLUMNS} FROM notifications
WHERE tenant_id = $1 AND ($2::text IS NULL OR name > $2) ORDER BY name LIMIT $3`;

/** $1 tenant, $2 name. Its deliveries go with it (the foreign key cascades). No row: none by that name. */
export const notificationDelete = `DELETE FROM notifications WHERE tenant_id = $1 AND name = $2 RETURNING name`;

/** $1 tenant, $2 name, $3 before this delivery id (null: from the newest), $4 rows. Newest first. */
export const deliveryList = `
SELECT delivery_id::text, event, state, attempts, last_status, last_error, data, created_at, last_attempt_at,
  CASE WHEN state = 'pending' THEN next_attempt_at END AS next_attempt_at, finished_at
FROM notification_deliveries
WHERE tenant_id = $1 AND name = $2 AND ($3::bigint IS NULL OR delivery_id < $3)
ORDER BY delivery_id DESC LIMIT $4`;

/** The most of a dead run's error a `run.dead` delivery carries (a run's error may be 64 KiB; the run keeps it whole). */
export const DEAD_ERROR_CHARS = 1000;

/**
 * A CTE: the `run.dead` deliveries of the runs a CTE `src` ended dead (its rows carry `tenant_id`,
 * `run_id`, `job_id`, `state`, `ended_attempt`, `error`), one per notification of the run's tenant
 * that wants them, at `now` (SQL). Once per run and attempt; the error cut to `DEAD_ERROR_CHARS`.
 */
export const deadDeliveries = (src: string, now: string) => `
  dead_deliveries AS (
    ${DELIVERY_INSERT}
    SELECT e.tenant_id, n.name, 'run.dead', 'dead:' || e.run_id || ':' || e.ended_attempt,
      jsonb_build_object('run_id', e.run_id, 'job_id', e.job_id, 'attempt', e.ended_attempt,
        'error', left(e.error, ${DEAD_ERROR_CHARS})),
      ${now}, ${now}
    FROM ${src} e JOIN notifications n ON n.tenant_id = e.tenant_id AND 'run.dead' = ANY(n.events)
    WHERE e.state = 'dead'
    ON CONFLICT (tenant_id, name, dedupe) DO NOTHING
  )`;

/**
 * A CTE: one `worker.lost` delivery per tenant and worker whose runs a CTE `src` took back (rows
 * with `reaped`, `tenant_id`, `lease_owner`, `run_id`), with the runs, to each notification of the
 * tenant that wants it.
 */
export const lostWorkerDeliveries = (src: string, now: string) => `
  lost_deliveries AS (
    ${DELIVERY_INSERT}
    SELECT w.tenant_id, n.name, 'worker.lost', NULL,
      jsonb_build_object('worker_id', w.lease_owner, 'run_ids', w.run_ids), ${now}, ${now}
    FROM (SELECT tenant_id, lease_owner, jsonb_agg(run_id ORDER BY run_id) AS run_ids
          FROM ${src} WHERE reaped GROUP BY tenant_id, lease_owner) w
    JOIN notifications n ON n.tenant_id = w.tenant_id AND 'worker.lost' = ANY(n.events)
  )`;

/**
 * $1 tenants, $2 jobs, $3 slots dropped, $4 now. The `job.misfired` deliveries of a tick's jobs
 * whose misfire policy dropped slots (the tick runs it only when some did).
 */
export const misfireDeliveries = `
${DELIVERY_INSERT}
SELECT m.tenant_id, n.name, 'job.misfired', NULL,
  jsonb_build_object('job_id', m.job_id, 'dropped_slots', m.dropped), $4, $4
FROM unnest($1::text[], $2::text[], $3::integer[]) AS m(tenant_id, job_id, dropped)
JOIN notifications n ON n.tenant_id = m.tenant_id AND 'job.misfired' = ANY(n.events)`;

/**
 * $1 after this tenant, $2 and this name (null: from the first), $3 rows. The notifications that
 * want `run.late`, locked (`SKIP LOCKED`: a node scanning one keeps the others off it). `NO KEY`:
 * the lock must not hold up the deliveries other statements write meanwhile (their foreign key
 * takes `KEY SHARE` on the row: a dead letter of the tenant would wait for the scan).
 */
export const notificationsLateLock = `
SELECT tenant_id, name, late_after_seconds, late_from, late_run FROM notifications
WHERE 'run.late' = ANY(events) AND late_after_seconds IS NOT NULL
  AND ($1::text IS NULL OR (tenant_id, name) > ($1, $2::text))
ORDER BY tenant_id, name LIMIT $3
FOR NO KEY UPDATE SKIP LOCKED`;

/**
 * $1 tenant, $2 name, $3 from this available_at, $4 after this run at it (null: from $3 on, or
 * from the oldest when $3 is null), $5 before this available_at (now − late_after), $6 rows, $7 now.
 * Writes a `run.late` delivery for each of the tenant's queued runs (the first $6 after $3/$4 in
 * (available_at, run_id) order) available before $5, once per run and `available_at`. Read down
 * `run_queue_late (tenant_id, available_at, run_id)` (migration 0029): at most $6 index entries
 * and their rows, all the tenant's, however many runs are late, the tenant has queued, or other
 * tenants have (one row comparison, no `OR`: a generic plan keeps it in the index condition).
 * `scanned` and the last run read (`last_at`, `last_run`): where the next scan starts.
 */
export const lateDeliveries = `
WITH late AS (
  SELECT q.run_id, q.job_id, q.available_at FROM run_queue q
  WHERE q.tenant_id = $1 AND q.available_at < $5
    AND (q.available_at, q.run_id)
      > (coalesce($3::timestamptz, '-infinity'), coalesce($4::uuid, '00000000-0000-0000-0000-000000000000'))
  ORDER BY q.available_at, q.run_id LIMIT $6
), written AS (
  ${DELIVERY_INSERT}
  SELECT $1, $2, 'run.late', 'late:' || run_id || ':' || (extract(epoch FROM available_at) * 1000)::bigint,
    jsonb_build_object('run_id', run_id, 'job_id', job_id, 'available_at', available_at,
      'late_seconds', floor(extract(epoch FROM ($7::timestamptz - available_at)))::bigint),
    $7, $7
  FROM late
  ON CONFLICT (tenant_id, name, dedupe) DO NOTHING
  RETURNING 1
), last AS (SELECT run_id, available_at FROM late ORDER BY available_at DESC, run_id DESC LIMIT 1)
SELECT (SELECT count(*) FROM written)::int AS written, (SELECT count(*) FROM late)::int AS scanned,
  (SELECT available_at FROM last) AS last_at, (SELECT run_id FROM last) AS last_run`;

/** $1 tenant, $2 name, $3 late_from, $4 late_run. Where the next scan for late runs starts. */
export const notificationLateMark = `
UPDATE notifications SET late_from = $3, late_run = $4 WHERE tenant_id = $1 AND name = $2`;

/**
 * $1 now, $2 after this tenant, $3 and this name (null: from the first), $4 most notifications
 * walked, $5/$6/$7 deliveries in flight on the caller's node (tenant, name, count), $8 most of one
 * notification in flight, $9 most of one tenant in flight, $10 rows, $11 deliveries to leave out
 * (ids). Read only: the due deliveries
 * a fair claim takes (`deliveryClaimIds` claims them). The notifications with pending deliveries
 * are walked in (tenant, name) order from after $2/$3 by a skip scan of
 * `notification_deliveries_pending` (one probe each, at most $4); each gives its oldest due
 * deliveries, at most $8 less its own in flight, a tenant at most $9 less its own in flight; then
 * the first of every notification, the second of every notification, and so on (by the walk's
 * order within each turn), up to $10. So a notification with thousands due gives as many to a
 * claim as one with a single delivery, and a slow receiver's deliveries in flight keep only its
 * own out. Reads at most $4 probes and $4 × $8 rows (no tie-break past `next_attempt_at`: the
 * deliveries one statement wrote share it, and a tie-break would read all of them to sort). One row per delivery picked, each with the
 * walk's length and last notification (`walked`, `last_tenant`, `last_name`; one row with null
 * `delivery_id` when none is picked).
 */
export const deliveryDuePick = `
WITH RECURSIVE walk AS (
  (SELECT d.tenant_id, d.name, 1 AS step FROM notification_deliveries d
   WHERE d.state = 'pending' AND (d.tenant_id, d.name) > (coalesce($2::text, ''), coalesce($3::text, ''))
   ORDER BY d.tenant_id, d.name LIMIT 1)
  UNION ALL
  SELECT x.tenant_id, x.name, w.step + 1 FROM walk w CROSS JOIN LATERAL (
    SELECT d.tenant_id, d.name FROM notification_deliveries d
    WHERE d.state = 'pending' AND (d.tenant_id, d.name) > (w.tenant_id, w.name)
    ORDER BY d.tenant_id, d.name LIMIT 1
  ) x
  WHERE w.step < $4::int
), busy AS (
  SELECT * FROM unnest($5::text[], $6::text[], $7::int[]) AS b(tenant_id, name, n)
), picked AS (
  SELECT c.delivery_id, w.tenant_id, w.name, w.step, c.turn FROM walk w CROSS JOIN LATERAL (
    SELECT d.delivery_id, row_number() OVER (ORDER BY d.next_attempt_at) AS turn
    FROM notification_deliveries d
    WHERE d.state = 'pending' AND d.tenant_id = w.tenant_id AND d.name = w.name AND d.next_attempt_at <= $1
      AND NOT (d.delivery_id = ANY($11::bigint[]))
    ORDER BY d.next_attempt_at
    LIMIT greatest(0, $8::int - coalesce(
      (SELECT sum(b.n) FROM busy b WHERE b.tenant_id = w.tenant_id AND b.name = w.name), 0))
  ) c
), fair AS (
  SELECT p.*, row_number() OVER (PARTITION BY p.tenant_id ORDER BY p.turn, p.step) AS tenant_turn FROM picked p
), chosen AS (
  SELECT f.delivery_id, f.tenant_id, f.name, f.step FROM fair f
  WHERE f.tenant_turn <= $9::int - coalesce((SELECT sum(b.n) FROM busy b WHERE b.tenant_id = f.tenant_id), 0)
  ORDER BY f.turn, f.step LIMIT $10
)
SELECT s.walked, s.last_tenant, s.last_name, c.delivery_id::text, c.tenant_id, c.name, c.step
FROM (SELECT count(*)::int AS walked, (array_agg(tenant_id ORDER BY step DESC))[1] AS last_tenant,
        (array_agg(name ORDER BY step DESC))[1] AS last_name FROM walk) s
LEFT JOIN chosen c ON true`;

/**
 * $1 now, $2 delivery ids (from `deliveryDuePick`), $3 lease ms. Claims those still pending and
 * due (`SKIP LOCKED`: another node may have taken one since the pick), counts the attempt and moves
 * `next_attempt_at` $3 ahead, so no other node tries it while this one does; a node that dies
 * mid-attempt leaves it due again then (at least once). With the notification's URL and secret.
 */
export const deliveryClaimIds = `
WITH due AS (
  SELECT delivery_id FROM notification_deliveries
  WHERE delivery_id = ANY($2::bigint[]) AND state = 'pending' AND next_attempt_at <= $1
  FOR UPDATE SKIP LOCKED
)
UPDATE notification_deliveries d
SET attempts = d.attempts + 1, last_attempt_at = $1,
  next_attempt_at = $1::timestamptz + $3::integer * interval '1 millisecond'
FROM due, notifications n
WHERE d.delivery_id = due.delivery_id AND n.tenant_id = d.tenant_id AND n.name = d.name
RETURNING d.delivery_id::text, d.tenant_id, d.name, d.event, d.data, d.created_at, d.attempts, n.url, n.secret`;

/**
 * $1 delivery, $2 its attempt, $3 state, $4 HTTP status, $5 error, $6 next attempt (pending), $7 now.
 * Records an attempt's outcome, only while the row is still at that attempt (no row: another node
 * took it after this one's claim ran out).
 */
export const deliveryFinish = `
UPDATE notification_deliveries SET state = $3, last_status = $4::integer, last_error = $5::text,
  next_attempt_at = coalesce($6::timestamptz, next_attempt_at),
  finished_at = CASE WHEN $3 <> 'pending' THEN $7::timestamptz END
WHERE delivery_id = $1::bigint AND attempts = $2 AND state = 'pending'`;

/** $1 finished before, $2 rows. Deletes delivered and failed rows of the log older than $1. */
export const deliveryPrune = `
DELETE FROM notification_deliveries WHERE delivery_id IN (
  SELECT delivery_id FROM notification_deliveries WHERE state <> 'pending' AND finished_at < $1 LIMIT $2
)`;
