/**
 * A limit's room as SQL (issue 18): its token bucket refilled by arithmetic, its one-second window
 * of starts in 50 ms sub-windows (migration 0016), and what a claim may take of both. Every
 * statement that decides or shows a limit's room uses these, as core's `limits.ts` computes them.
 */
import { WINDOW_GRAIN_MS, WINDOW_MS } from '../../core/index.js';
import { creditedTokens } from './gates.js';

/**
 * Tokens in a limit's bucket (`l`, with its `id`) at `now` ($2), refilled by arithmetic:
 * min(burst − tokens its credits hold, tokens + rate × Δt) (migration 0017).
 */
export const tokensNow = (l: string, now = '$2') =>
  `LEAST(${l}.burst - ${creditedTokens(l)}, ${l}.tokens + ${l}.rate * GREATEST(0, extract(epoch FROM (${now}::timestamptz - ${l}.refilled_at))))`;

/** An instant as epoch ms (float8: `date_part`, not `extract`, which makes a numeric). */
export const epochMs = (instant: string) => `date_part('epoch', ${instant}) * 1000`;

/** The sub-window index of `now` (core's `grainOf`): floor(epoch ms / WINDOW_GRAIN_MS). */
export const grainNow = (now: string) =>
  `floor(extract(epoch FROM ${now}::timestamptz) * 1000 / ${WINDOW_GRAIN_MS})::bigint`;

/** The oldest sub-window index that still meets the one-second window ending at `now`. */
export const oldestLiveGrain = (now: string) => `(${grainNow(now)} - ${WINDOW_MS / WINDOW_GRAIN_MS})`;

/**
 * Runs started in the one-second window of a limit (`l`) ending at `now` ($2): the entries of
 * `recent_at`/`recent_n` whose sub-window meets it, each counted whole (core's `windowUsed`).
 */
export const windowUsed = (l: string, now = '$2') =>
  `COALESCE((SELECT sum(w.n) FROM unnest(${l}.recent_at, ${l}.recent_n) AS w(j, n) WHERE w.j >= ${oldestLiveGrain(now)}), 0)`;

/** The most runs a limit (`l`) with a rate lets start in any second: max(burst, ⌈rate⌉) (core's `windowCap`). */
export const windowCap = (l: string) => `GREATEST(${l}.burst, ceil(${l}.rate))`;

/**
 * A limit's (`l`) room at `now` ($2), what a claim may take from it (the whole part): the bucket's
 * tokens, but no more than its window has left; null without a rate (core's `roomAt`). Every
 * admission decision reads this; `tokensNow` alone is the bucket, which the claim spends.
 */
export const roomNow = (l: string, now = '$2') =>
  `CASE WHEN ${l}.rate IS NULL THEN NULL ELSE LEAST(${tokensNow(l, now)}, ${windowCap(l)} - ${windowUsed(l, now)}) END`;

/**
 * A sub-SELECT of a limit's (`l`) `recent_at, recent_n` after `n` runs started at `now` ($2): added
 * to the entry of now's sub-window, dead entries dropped, by index (core's `recordStarts`). For
 * `SET (recent_at, recent_n) = (…)` in the update that spends the tokens; null when none is left.
 * `back`: a SELECT of (sub-window, −count) rows to take off (credits' tokens that started nothing).
 */
export const windowAfter = (
  l: string,
  n: string,
  now = '$2',
  back = '',
) => `SELECT array_agg(w.j ORDER BY w.j), array_agg(w.n ORDER BY w.j)
    FROM (
      SELECT e.j, sum(e.n)::int AS n FROM (
        SELECT x.j, x.n FROM unnest(${l}.recent_at, ${l}.recent_n) AS x(j, n)
        UNION ALL SELECT ${grainNow(now)}, ${n} WHERE ${n} > 0${
          back === ''
            ? ''
            : `
        UNION ALL ${back}`
        }
      ) e
      WHERE e.j >= ${oldestLiveGrain(now)}
      GROUP BY e.j
      HAVING sum(e.n) > 0
    ) w`;
