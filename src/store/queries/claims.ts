/**
 * The claim statements: the plain claim while no limit exists (`runClaim`), the gated claim that
 * locks the limits its candidates pass (`runClaimGated`), and the claim paid by credits that does
 * not (`runClaimCredited`, migration 0017). The statements that find a claim by its claim id are in
 * `claim-ids.ts`; the heartbeat and the attempt's end in `runs.ts`.
 */

import { CLAIMED_COLUMNS } from './claimed.js';
import {
  CREDIT_BATCHES,
  CREDIT_GRAINS,
  CREDIT_LANES,
  creditedSlots,
  gateSet,
  pendingReleases,
  skipRuns,
} from './gates.js';
import { grainNow, roomNow, tokensNow, windowAfter } from './room.js';

export { claimAgain, claimRelease } from './claim-ids.js';

/**
 * The rows of `run_queue q` a claim may take: its pool, due (up to $8 ms ahead), its handlers and
 * tenants. The gated claim adds: none of whose gates is known to be exhausted (`exhausted e`, read
 * unlocked: a gate that filled since is caught by the locked check, one that freed since waits for
 * the next claim).
 */
const claimable = (
  gated: boolean,
) => `q.pool = $1 AND q.available_at <= $2::timestamptz + $8::int * interval '1 millisecond'
    AND ($6::text[] IS NULL OR q.handler = ANY($6::text[]))
    AND ($7::text IS NULL OR q.tenant_id = $7)
    AND ($10::text[] IS NULL OR q.tenant_id = ANY($10::text[]))${
      gated
        ? `
    AND (cardinality(e.gates) = 0 OR NOT (${gateSet('q')} && e.gates))`
        : `
    AND NOT (SELECT yes FROM limited)`
    }`;

/**
 * The columns of a candidate (a locked row of `run_queue q`), with its row's place (`qtid`, its
 * ctid): the row is locked by this statement, and queue rows are never updated, so that place holds
 * it until the claim commits, and `TAKE` deletes by it without probing the primary key per run.
 */
const CANDIDATE = 'q.run_id, q.tenant_id, q.job_id, q.gates, q.sort_key, q.available_at, q.ctid AS qtid';

/** The most tenants one claim looks at for their first ready run (the fair share's reach). */
export const MAX_FAIR_TENANTS = 1000;

/**
 * The first CTEs of both claims: the candidates, locked with SKIP LOCKED (the LIMIT … SKIP LOCKED
 * selects sit in CTEs, which run once, where a subquery in IN (…) may be re-run and take more): the
 * first ready run of each tenant (`heads`, a skip scan over run_queue_tenants, up to
 * MAX_FAIR_TENANTS tenants), $3 of them in turn (`rotation`: the tenants in id order, starting at
 * turn × $3 modulo their number, where each claim draws the next turn from a sequence, so that
 * consecutive claims cover every tenant with ready runs within ⌈tenants / $3⌉ of them), and the $3
 * first ready runs overall.
 * `from` is what else the scans read (the gated claim's `exhausted e`).
 */
const candidates = (gated: boolean) => {
  const from = gated ? 'run_queue q, exhausted e' : 'run_queue q';
  return `heads AS (
  (SELECT q.tenant_id, q.run_id, q.sort_key, 1 AS depth FROM ${from}
   WHERE ${claimable(gated)} ORDER BY q.tenant_id, q.sort_key LIMIT 1)
  UNION ALL
  SELECT n.tenant_id, n.run_id, n.sort_key, h.depth + 1 FROM heads h CROSS JOIN LATERAL (
    SELECT q.tenant_id, q.run_id, q.sort_key FROM ${from}
    WHERE ${claimable(gated)} AND q.tenant_id > h.tenant_id ORDER BY q.tenant_id, q.sort_key LIMIT 1
  ) n
  WHERE h.depth < ${MAX_FAIR_TENANTS}
), turn AS MATERIALIZED (
  SELECT nextval('tock_claim_turns') AS n
), rotation AS (
  SELECT r.run_id, (r.idx - (turn.n * $3) % r.tenants + r.tenants) % r.tenants AS place
  FROM (
    SELECT run_id, row_number() OVER (ORDER BY tenant_id) - 1 AS idx, count(*) OVER () AS tenants FROM heads
  ) r, turn
  ORDER BY place
  LIMIT $3
), first_of_tenants AS (
  SELECT ${CANDIDATE} FROM run_queue q
  WHERE q.run_id = ANY(ARRAY(SELECT run_id FROM rotation))
  FOR UPDATE SKIP LOCKED
), first_overall AS (
  SELECT ${CANDIDATE} FROM ${from}
  WHERE ${claimable(gated)}
  ORDER BY q.sort_key
  LIMIT $3
  FOR UPDATE OF q SKIP LOCKED
), first_pass AS (
  SELECT * FROM first_of_tenants UNION SELECT * FROM first_overall
)`;
};

/**
 * Fair order of the candidates (`pool`): a tenant's first before anyone's second; among the
 * firsts, the tenants in this claim's rotation order, then the others; then sort key.
 */
const fairOrder = (pool: string) => `ordered AS (
  SELECT c.*, row_number() OVER (ORDER BY c.turn, c.place NULLS LAST, c.sort_key, c.run_id) AS pos FROM (
    SELECT u.*, r.place, row_number() OVER (PARTITION BY u.tenant_id ORDER BY u.sort_key, u.run_id) AS turn
    FROM (${pool}) u LEFT JOIN rotation r ON r.run_id = u.run_id
  ) c
)`;

/**
 * The chosen runs leave the queue, by the places their candidates were locked at (a TID scan). As
 * a join, the planner may hash-join a scan of the whole queue.
 */
const TAKE = `
  DELETE FROM run_queue q WHERE q.ctid = ANY(ARRAY(SELECT qtid FROM chosen))
  RETURNING q.run_id, q.sort_key, q.tenant_id, q.job_id, q.gates, q.available_at`;

/** Per gate, how many of the candidates `from` (rows `o`) pass it; counted per distinct gate set. */
const WANTED = (from: string) => `
  SELECT g.gate, sum(s.n)::bigint AS wanted
  FROM (SELECT ${gateSet('o')} AS gs, count(*) AS n FROM ${from} GROUP BY 1) s CROSS JOIN LATERAL unnest(s.gs) AS g(gate)
  GROUP BY g.gate`;

/**
 * Per gate the gated claim locked (`lim`), how many of the runs taken (`taken`) pass it and the
 * latest of their starts (`busy`: the claim's now, or the run's slot if later); per distinct gate set.
 */
const TAKEN_GATES = `
  SELECT g.gate, sum(s.n)::integer AS n, max(s.busy) AS busy
  FROM (
    SELECT ${gateSet('t')} AS gs, count(*) AS n, max(GREATEST($2::timestamptz, t.available_at)) AS busy FROM taken t GROUP BY 1
  ) s CROSS JOIN LATERAL unnest(s.gs) AS g(gate)
  WHERE g.gate IN (SELECT gate FROM lim)
  GROUP BY g.gate`;

/**
 * For `spent`'s window (`windowAfter`'s `back`), the limit row `l` and its row `u`: the credits
 * granted for the sub-windows after now's (counted in their own, where the starts they pay for will
 * be, and meanwhile in every window that meets them), and the tokens swept credits give back at theirs.
 */
const AFTER_GRANT = `SELECT ${grainNow('$2')} + i, CASE WHEN l.rate IS NULL THEN 0 ELSE u.k END
        FROM generate_series(1, ${CREDIT_GRAINS - 1}) AS i
        UNION ALL SELECT d.grain, -d.tokens FROM swept d WHERE d.limit_id = l.id`;

/**
 * The gated claim's CTEs from the candidates to `chosen` (the runs that fit), `overlapped` and
 * `spent`. `saturated` reads slots in use as `limit_states` shows them (releases not folded yet
 * subtracted); `lim` locks the limits, `totals` reads their release totals, and `gates_now` is
 * each gate as it stands: slots in use less what was released since the last fold (`folded`), its
 * room (whole tokens and free slots) and how many candidates pass it (`wanted`). A claim whose
 * snapshot is older than the last fold's sees totals no larger than `limits.released`: it folds
 * nothing. Only the gates where the order of the candidates decides (less room than candidates,
 * or a `skip` job's) are expanded per candidate (`gate_rows`); every other count (`saturated`,
 * `wanted`, `taken_gates`) is taken per distinct gate set first (a batch of one job's runs is one
 * set), not per run and gate. `spent` writes the gates it took from or folded into.
 */
const GATES = `saturated AS MATERIALIZED (
  SELECT COALESCE(array_agg(l.gate), '{}') AS gates FROM (
    SELECT g.gate, sum(s.n) AS n FROM (SELECT ${gateSet('f')} AS gs, count(*) AS n FROM first_pass f GROUP BY 1) s
    CROSS JOIN LATERAL unnest(s.gs) AS g(gate) GROUP BY g.gate
  ) c JOIN limit_states l ON l.gate = c.gate
  WHERE c.n > LEAST(COALESCE(floor(${roomNow('l')}), 2147483647), COALESCE(l.max_concurrency - l.in_use, 2147483647))
), more AS (
  SELECT ${CANDIDATE} FROM run_queue q, exhausted e, saturated s
  WHERE (SELECT cardinality(gates) FROM saturated) > 0 AND ${claimable(true)} AND NOT (${gateSet('q')} && s.gates)
  ORDER BY q.sort_key
  LIMIT $3
  FOR UPDATE OF q SKIP LOCKED
), ${fairOrder('SELECT * FROM first_pass UNION SELECT * FROM more')}, wanted AS MATERIALIZED (${WANTED('ordered o')}
), lim AS MATERIALIZED (
  SELECT l.id, l.gate, l.rate, l.burst, l.max_concurrency, l.in_use, l.released, l.overlap, l.busy_from, l.freed_at,
    ${roomNow('l')} AS tokens
  FROM limits l WHERE l.gate IN (SELECT gate FROM wanted)
  ORDER BY l.gate
  FOR NO KEY UPDATE
), totals AS MATERIALIZED (
  SELECT r.limit_id, sum(r.released)::bigint AS released FROM limit_releases r
  WHERE r.limit_id IN (SELECT id FROM lim) GROUP BY r.limit_id
), swept AS (
  DELETE FROM limit_credits c USING (
    SELECT limit_id, lane, grain FROM limit_credits
    WHERE limit_id IN (SELECT id FROM lim) AND grain < ${grainNow('$2')}
    FOR UPDATE SKIP LOCKED
  ) d
  WHERE c.limit_id = d.limit_id AND c.lane = d.lane AND c.grain = d.grain
  RETURNING c.limit_id, c.grain, c.slots, c.tokens
), gates_now AS MATERIALIZED (
  SELECT n.*,
    LEAST(COALESCE(floor(n.tokens), 2147483647), COALESCE(n.max_concurrency - n.in_use, 2147483647)) AS room
  FROM (
    SELECT l.id, l.gate, l.rate, l.burst, l.max_concurrency, GREATEST(0, l.in_use - f.folded - f.swept) AS in_use,
      GREATEST(0, l.in_use - f.folded - ${creditedSlots('l')}) AS held, f.folded, f.swept, f.swept_tokens, GREATEST(l.released, t.released) AS released, l.overlap, l.busy_from, l.freed_at, l.tokens, w.wanted
    FROM lim l
    JOIN wanted w ON w.gate = l.gate
    LEFT JOIN totals t ON t.limit_id = l.id
    CROSS JOIN LATERAL (
      SELECT GREATEST(0, COALESCE(t.released, 0) - l.released)::integer AS folded,
        COALESCE((SELECT sum(d.slots) FROM swept d WHERE d.limit_id = l.id), 0)::integer AS swept,
        COALESCE((SELECT sum(d.tokens) FROM swept d WHERE d.limit_id = l.id), 0)::integer AS swept_tokens
    ) f
  ) n
), gate_rows AS MATERIALIZED (
  SELECT o.run_id, o.pos, o.available_at, g.*
  FROM (SELECT * FROM gates_now WHERE overlap = 'skip' OR room < wanted) g
  JOIN ordered o ON g.gate = ANY(${gateSet('o')})
), overlapped AS (
  SELECT DISTINCT run_id FROM gate_rows
  WHERE overlap = 'skip' AND available_at > busy_from AND (held > 0 OR available_at < freed_at)
), unfit AS (
  SELECT DISTINCT t.run_id FROM (
    SELECT g.run_id, g.room, row_number() OVER (PARTITION BY g.gate ORDER BY g.pos) AS rank
    FROM gate_rows g WHERE g.run_id NOT IN (SELECT run_id FROM overlapped)
  ) t WHERE t.rank > t.room
), chosen AS (
  SELECT o.run_id, o.qtid FROM ordered o
  WHERE o.run_id NOT IN (SELECT run_id FROM unfit) AND o.run_id NOT IN (SELECT run_id FROM overlapped)
  ORDER BY o.pos LIMIT $3
), taken AS (${TAKE}
), dropped AS (
  DELETE FROM run_queue q WHERE q.run_id = ANY(ARRAY(SELECT run_id FROM overlapped))
  RETURNING q.run_id
), skipped AS (${skipRuns('dropped', '$2::timestamptz')}
), taken_gates AS MATERIALIZED (${TAKEN_GATES}
), grants AS MATERIALIZED (
  SELECT g.id, g.gate, x.k FROM gates_now g JOIN taken_gates t ON t.gate = g.gate
  CROSS JOIN LATERAL (
    SELECT LEAST(${CREDIT_BATCHES} * $3,
      CASE WHEN g.max_concurrency IS NULL THEN 2147483647
        ELSE floor((g.max_concurrency - g.in_use - t.n) / ${2 * CREDIT_LANES * CREDIT_GRAINS}.0) END,
      CASE WHEN g.rate IS NULL THEN 2147483647
        ELSE floor((g.tokens - t.n) / ${2 * CREDIT_LANES * CREDIT_GRAINS}.0) END)::integer AS k
  ) x
  WHERE g.overlap IS DISTINCT FROM 'skip' AND x.k >= $3
), granted AS (
  INSERT INTO limit_credits AS c (limit_id, lane, grain, slots, tokens, max_concurrency, rate, burst)
  SELECT g.id, pg_backend_pid() % ${CREDIT_LANES}, ${grainNow('$2')} + i,
    CASE WHEN n.max_concurrency IS NULL THEN 0 ELSE g.k END, CASE WHEN n.rate IS NULL THEN 0 ELSE g.k END,
    n.max_concurrency, n.rate, n.burst
  FROM grants g JOIN gates_now n ON n.gate = g.gate CROSS JOIN generate_series(0, ${CREDIT_GRAINS - 1}) AS i
  ORDER BY g.id, i
  ON CONFLICT (limit_id, lane, grain) DO UPDATE SET slots = c.slots + EXCLUDED.slots, tokens = c.tokens + EXCLUDED.tokens,
    max_concurrency = EXCLUDED.max_concurrency, rate = EXCLUDED.rate, burst = EXCLUDED.burst
  RETURNING c.limit_id
), spent AS (
  UPDATE limits l SET
    tokens = CASE WHEN l.rate IS NULL THEN l.tokens ELSE ${tokensNow('l')} + u.swept_tokens - u.n - ${CREDIT_GRAINS} * u.k END,
    refilled_at = GREATEST(l.refilled_at, $2),
    (recent_at, recent_n) = (${windowAfter('l', 'CASE WHEN l.rate IS NULL THEN 0 ELSE u.n + u.k END', '$2', AFTER_GRANT)}),
    in_use = u.in_use + CASE WHEN l.max_concurrency IS NULL THEN 0 ELSE u.n + ${CREDIT_GRAINS} * u.k END,
    released = u.released,
    busy_from = COALESCE(u.busy, l.busy_from)
  FROM (
    SELECT g.gate, g.in_use, g.folded, g.released, COALESCE(t.n, 0) AS n, t.busy, COALESCE(c.k, 0) AS k, g.swept_tokens
    FROM gates_now g LEFT JOIN taken_gates t ON t.gate = g.gate LEFT JOIN grants c ON c.gate = g.gate
    WHERE g.folded > 0 OR g.swept > 0 OR g.swept_tokens > 0 OR t.n > 0
  ) u
  WHERE l.gate = u.gate
)`;

/**
 * The gated claim's slots: the gates with a concurrency cap that it took a slot of (for every run
 * it took that passes them), recorded on its claim rows (`run_claims.gates`, null: none), which
 * the end of each run's attempt reads to give its slots back (`giveBack`).
 */
const SLOTS_TAKEN = `NULLIF(ARRAY(
    SELECT tg.gate FROM taken_gates tg JOIN lim l ON l.gate = tg.gate WHERE l.max_concurrency IS NOT NULL ORDER BY 1
  ), '{}')`;

/**
 * The most runs one claim row holds (migration 0020): a claim of more is leased in parts, each a
 * row of its own with its own token, so that a row's run ids (16 bytes each) stay inline (under
 * PostgreSQL's 2 KB TOAST threshold), and a completion rewrites a short list, not the claim's all.
 */
export const CLAIM_PART_RUNS = 100;

/**
 * The CTEs of the claims after `taken`: the runs' rows, and one claim row per lease length and
 * part of up to CLAIM_PART_RUNS runs, with
 * the gates whose slots it took (`slots`: a text[] expression). `after`: a CTE the claim rows are
 * written after. The gated claim writes its credits first: a claim paid by credits locks a credit
 * row before it writes its claim row, so a gated claim that wrote a claim row (with the same claim
 * id, a retry sent twice at once) and then waited for that credit row would deadlock with it.
 */
const LEASE = (slots: string, after = '') => `leased AS (
  SELECT r.run_id, r.tenant_id, r.job_id, r.handler, r.payload, r.pool, r.scheduled_for, r.attempt,
    r.max_attempts, r.available_at, r.timeout_seconds, r.created_at, t.sort_key,
    COALESCE(r.lease_seconds * 1000, $5) AS lease_ms
  FROM taken t JOIN runs r ON r.run_id = t.run_id
), held AS (
  SELECT l.*, (row_number() OVER (PARTITION BY l.lease_ms) - 1) / ${CLAIM_PART_RUNS} AS part FROM leased l
), claims AS (
  INSERT INTO run_claims (lease_token, worker_id, claimed_at, lease_ms, lease_expires_at, run_ids, claim_id, tenant_id,
    gates, part)
  SELECT gen_random_uuid(), $4, $2, lease_ms, $2::timestamptz + lease_ms * interval '1 millisecond', array_agg(run_id),
    $9::uuid, $7::text, ${slots}, part
  FROM held${after === '' ? '' : `, (SELECT count(*) FROM ${after}) AS done_first`} GROUP BY lease_ms, part
  RETURNING lease_token, lease_ms, lease_expires_at, part
)`;

const CLAIMED = `SELECT ${CLAIMED_COLUMNS('h', 'c')}
FROM held h JOIN claims c ON c.lease_ms = h.lease_ms AND c.part = h.part`;

/**
 * $1 pool, $2 now, $3 max, $4 worker, $5 default lease ms, $6 handlers (or null), $7 tenant (or null),
 * $8 ahead ms (runs becoming claimable up to this long after now are claimed too; 0: only due ones),
 * $9 claim id (or null), $10 tenants (or null: every tenant; a worker on the database given `--tenant`).
 *
 * The claim while no limit exists at all (`limits` is empty): the candidates (see `candidates`) in
 * fair order — a tenant's first before anyone's second, then `sort_key`, so a batch holds one run
 * of each of up to $3 tenants before a second of any; when one tenant has ready runs (`one_tenant`),
 * that order is `sort_key`'s, which `first_overall` already took its $3 in, so those are the runs
 * (`heads`, `first_of_tenants`, `first_pass` and `ordered` are then never read, so never computed) — up
 * to $3, leave the queue onto one claim row
 * per lease length and part (`CLAIM_PART_RUNS`), with the claim id and tenant. When a limit exists it takes nothing and answers
 * one row whose run_id is null: the caller makes the gated claim (`runClaimGated`) instead, and
 * goes on with it until that says no limit is left. A
 * claim id that another claim row of the same lease length has fails the statement on
 * run_claims_claim_id (nothing is taken): the caller answers that claim.
 */
export const runClaim = `
WITH RECURSIVE limited AS MATERIALIZED (
  SELECT EXISTS (SELECT 1 FROM limits) AS yes
), ${candidates(false)}, ${fairOrder('SELECT * FROM first_pass')}, one_tenant AS MATERIALIZED (
  -- No ready run of another tenant on either side of the first run's tenant, in tenant order: two
  -- index probes that start beside that tenant, where counting the heads would first walk every
  -- entry of it that claims left dead at the front of the index since the last vacuum.
  SELECT (SELECT q.tenant_id FROM run_queue q WHERE ${claimable(false)} AND q.tenant_id < f.tenant_id
      ORDER BY q.tenant_id DESC LIMIT 1) IS NULL
    AND (SELECT q.tenant_id FROM run_queue q WHERE ${claimable(false)} AND q.tenant_id > f.tenant_id
      ORDER BY q.tenant_id LIMIT 1) IS NULL AS yes
  FROM (SELECT tenant_id FROM first_overall LIMIT 1) f
), chosen AS (
  SELECT run_id, qtid FROM first_overall WHERE (SELECT yes FROM one_tenant)
  UNION ALL
  (SELECT run_id, qtid FROM ordered WHERE NOT (SELECT yes FROM one_tenant) ORDER BY pos LIMIT $3)
), taken AS (${TAKE}
), ${LEASE('NULL::text[]')}
SELECT * FROM (${CLAIMED} ORDER BY h.sort_key) claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM limited WHERE yes`;

/**
 * The gates without room now (`roomNow`, no credit of this sub-window with tokens) or slots (credits'
 * slots are free), read unlocked; `skip` gates stay in view, so the runs they would overlap can be
 * dropped.
 */
const EXHAUSTED = `
  SELECT COALESCE(array_agg(x.gate), '{}') AS gates FROM (
    SELECT l.gate FROM limits l WHERE l.rate IS NOT NULL AND ${roomNow('l')} < 1
      AND NOT EXISTS (SELECT 1 FROM limit_credits c WHERE c.limit_id = l.id AND c.grain = ${grainNow('$2')} AND c.tokens > 0)
    UNION
    SELECT l.gate FROM limits l
    WHERE l.max_concurrency IS NOT NULL AND l.in_use >= l.max_concurrency AND l.overlap IS DISTINCT FROM 'skip'
      AND l.in_use - ${pendingReleases('l')} - ${creditedSlots('l')} >= l.max_concurrency
  ) x`;

/**
 * The claim where limits exist ($1–$10 as `runClaim`), in one statement, so that limits, caps and
 * leases agree under any number of claimers:
 * 1. `exhausted`: the gates without room (`roomNow`) or slots now (unlocked; `skip` gates stay in view, so
 *    the runs they would overlap can be dropped).
 * 2. The candidates, as `runClaim`'s, of gates not exhausted. When these hold more runs of a gate
 *    than it has room for (`saturated`, read unlocked), $3 more, of other gates only (`more`,
 *    which does not scan at all otherwise): so a claim that skips limited runs still fills its
 *    batch from the others.
 * 3. Fair order, as `runClaim`'s.
 * 4. The gates of the candidates with a row in `limits`, locked in gate order (every statement
 *    that writes several gates takes them in this order, so none deadlock). On each gate,
 *    candidates in fair order fit while their rank is within its room: whole `roomNow` and free
 *    slots. A candidate of a `skip` job whose slot arrived while the job's run was running (after
 *    that run's start, and before its end or still running) is dropped: state `skipped`.
 * 5. The runs that fit, up to $3, leave the queue; each gate they pass gives tokens (one per run)
 *    and slots (the gates recorded on the claim row, given back when the attempt ends), one update
 *    per gate.
 * 6. One claim row per lease length and part, as `runClaim`'s, with the gates it took slots of.
 * It is right without limits too (a gate without a row lets everything through), only slower:
 * when `limits` is empty it adds one row whose run_id is null, and the caller goes back to
 * `runClaim`.
 */
export const runClaimGated = `
WITH RECURSIVE exhausted AS MATERIALIZED (${EXHAUSTED}
), ${candidates(true)}, ${GATES}, ${LEASE(SLOTS_TAKEN, 'granted')}
SELECT *, (SELECT count(*) > 0 FROM granted) AS credited FROM (${CLAIMED} ORDER BY h.sort_key) claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
WHERE NOT EXISTS (SELECT 1 FROM limits)`;

/**
 * The claim paid by credits (migration 0017; $1–$10 as `runClaim`), which never locks a limit row:
 * the candidates of `runClaimGated` (its `exhausted` and first pass), in fair order, and for every
 * limit the first $3 of them pass one credit row of this sub-window with enough slots and tokens
 * for all of those passing it (`lanes`: this connection's lane first, SKIP LOCKED, so claimers on other
 * lanes never wait). With a credit for every such limit it takes those runs (locked, so exactly
 * those counted) and takes their slots and tokens off those credits; the claim row records the capped gates, as the gated
 * claim's does (candidates that pass no limit need no credit). Without (a limit with no credit
 * left, a `skip` job's gate, no limit at all) it takes nothing and answers one row whose run_id is
 * null: the caller makes the gated claim.
 */
export const runClaimCredited = `
WITH RECURSIVE exhausted AS MATERIALIZED (${EXHAUSTED}
), ${candidates(true)}, ${fairOrder('SELECT * FROM first_pass')}, wanted AS MATERIALIZED (${WANTED('ordered o WHERE o.pos <= $3')}
), gated AS MATERIALIZED (
  SELECT l.id, l.gate, l.rate, l.burst, l.max_concurrency, l.overlap, w.wanted
  FROM limits l JOIN wanted w ON w.gate = l.gate
), lanes AS MATERIALIZED (
  SELECT g.id, g.gate, g.rate, g.max_concurrency, c.lane, c.grain FROM gated g CROSS JOIN LATERAL (
    SELECT c.lane, c.grain FROM limit_credits c
    WHERE c.limit_id = g.id AND c.grain = ${grainNow('$2')} AND g.overlap IS DISTINCT FROM 'skip'
      AND c.max_concurrency IS NOT DISTINCT FROM g.max_concurrency AND c.rate IS NOT DISTINCT FROM g.rate
      AND c.burst IS NOT DISTINCT FROM g.burst
      AND (g.max_concurrency IS NULL OR c.slots >= g.wanted) AND (g.rate IS NULL OR c.tokens >= g.wanted)
    ORDER BY (c.lane - pg_backend_pid() % ${CREDIT_LANES} + ${CREDIT_LANES}) % ${CREDIT_LANES}
    LIMIT 1
    FOR NO KEY UPDATE SKIP LOCKED
  ) c
), paid AS MATERIALIZED (
  SELECT (SELECT count(*) FROM lanes) = (SELECT count(*) FROM gated) AND EXISTS (SELECT 1 FROM limits) AS yes
), chosen AS (
  SELECT run_id, qtid FROM ordered WHERE (SELECT yes FROM paid) ORDER BY pos LIMIT $3
), taken AS (${TAKE}
), spent AS (
  UPDATE limit_credits c SET
    slots = c.slots - CASE WHEN l.max_concurrency IS NULL THEN 0 ELSE w.wanted END,
    tokens = c.tokens - CASE WHEN l.rate IS NULL THEN 0 ELSE w.wanted END
  FROM lanes l JOIN wanted w ON w.gate = l.gate
  WHERE (SELECT yes FROM paid) AND c.limit_id = l.id AND c.lane = l.lane AND c.grain = l.grain
), ${LEASE("NULLIF(ARRAY(SELECT g.gate FROM gated g WHERE g.max_concurrency IS NOT NULL ORDER BY 1), '{}')")}
SELECT * FROM (${CLAIMED} ORDER BY h.sort_key) claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
WHERE NOT (SELECT yes FROM paid)`;
