import { ValidationError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;

/** What every duration message ends with: the units and an example. */
const UNITS_HINT = 'units are ms, s, m, h and d (lower case), e.g. 90s, 5m, 1h30m, 250ms';

/** Why `rest` (the unread end of `text`, from `at`) does not continue a duration, in words. */
function unreadable(what: string, text: string, rest: string, at: number): string {
  const number = /^(\d+(?:\.\d+)?)(\S*)/.exec(rest);
  if (number && number[2] === '') return `${what} "${text}" has no unit after ${number[1]}; ${UNITS_HINT}`;
  if (number) return `${what} "${text}" has an unknown unit "${number[2]}"; ${UNITS_HINT}`;
  if (at === 0) return `${what} "${text}" is not a duration: expected a number and a unit; ${UNITS_HINT}`;
  return `${what} "${text}" is not a duration at "${rest}" (write it without spaces or signs); ${UNITS_HINT}`;
}

/**
 * Parses a duration such as `90s`, `5m`, `1h30m`, `250ms` or `2d` into milliseconds.
 * Units may repeat only in decreasing order; the total must be a whole number of ms and positive,
 * or zero (`0s`, and a bare `0`) where `allowZero` says a setting takes it. Default: positive.
 */
export function parseDuration(
  text: string,
  what = 'duration',
  options: { allowZero?: boolean } = {},
): number {
  if (options.allowZero && /^\s*0+\s*$/.test(text)) return 0;
  const input = text.trim();
  if (input === '') throw new ValidationError(`${what} is empty; ${UNITS_HINT}`);
  let total = 0;
  let lastUnit = Number.POSITIVE_INFINITY;
  PART.lastIndex = 0;
  while (PART.lastIndex < input.length) {
    const at = PART.lastIndex;
    const m = PART.exec(input);
    if (!m) throw new ValidationError(unreadable(what, text, input.slice(at), at));
    const unit = UNIT_MS[m[2] as string] as number;
    if (unit >= lastUnit) throw new ValidationError(`${what} "${text}" repeats or reorders its units`);
    lastUnit = unit;
    total += Number(m[1]) * unit;
  }
  if (!Number.isFinite(total) || total < 0 || (total === 0 && !options.allowZero))
    throw new ValidationError(`${what} "${text}" must be positive`);
  // Decimal parts are exact in text but not in binary (1.001 × 1000 = 1000.9999999999999).
  if (Math.abs(total - Math.round(total)) < 1e-6) total = Math.round(total);
  if (!Number.isInteger(total))
    throw new ValidationError(`${what} "${text}" is not a whole number of milliseconds`);
  if (total > 366 * UNIT_MS.d!) throw new ValidationError(`${what} "${text}" is longer than a year`);
  return total;
}

/** Formats milliseconds compactly (`90000` → `1m30s`), the inverse of `parseDuration`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const [unit, size] of [
    ['d', UNIT_MS.d!],
    ['h', UNIT_MS.h!],
    ['m', UNIT_MS.m!],
    ['s', UNIT_MS.s!],
    ['ms', 1],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * size;
    }
  }
  return out;
}
