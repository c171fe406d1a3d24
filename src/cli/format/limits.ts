/** Limits as an operator reads them: `tock limits get`, `tock limits list`, `tock limits put`. */
import type * as Api from '../../client/index.js';
import { formatFields, formatTable } from './table.js';

/** Tokens to two decimals (a bucket refills continuously); `-` without a rate. */
const tokens = (t: number | null) => (t === null ? null : String(Math.floor(t * 100) / 100));

/** `50/s, burst 100`, or `-` without a rate. */
const rateText = (l: Api.Limit) => (l.rate === null ? null : `${l.rate}/s, burst ${l.burst}`);

/** Runs held back: `12`, or `10000+` when the count stopped at its bound; `-` for a PUT's answer. */
const heldText = (l: Api.Limit | Api.LimitState) =>
  'held' in l ? `${l.held}${l.held_capped ? '+' : ''}` : null;

/** One limit, a field a line (with the runs it holds back, when read). */
export function limitFields(l: Api.Limit | Api.LimitState): string {
  return formatFields([
    ['key', l.key],
    ['rate', rateText(l) ?? 'none'],
    ['tokens', tokens(l.tokens)],
    ['max_concurrency', l.max_concurrency ?? 'none'],
    ['in_use', l.in_use],
    ...('held' in l ? ([['held', heldText(l)]] as const) : []),
    ['created_at', l.created_at],
    ['updated_at', l.updated_at],
  ]);
}

/** Limits a row each (`tock limits list`). */
export function limitTable(limits: readonly Api.LimitState[]): string {
  if (limits.length === 0) return 'no limits\n';
  return formatTable(
    ['KEY', 'RATE', 'BURST', 'TOKENS', 'MAX_CONCURRENCY', 'IN_USE', 'HELD', 'UPDATED'],
    limits.map((l) => [
      l.key,
      l.rate,
      l.burst,
      tokens(l.tokens),
      l.max_concurrency,
      l.in_use,
      heldText(l),
      l.updated_at,
    ]),
  );
}
