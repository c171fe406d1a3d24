/**
 * Checks each field of a cron expression before croner sees it, so that a mistake is reported
 * as the field and the reason (`minute 61 is out of range 0-59`), and rewrites the few spellings
 * croner reads differently from Quartz/Vixie cron: `?` means "any" (croner would substitute the
 * current time) and a day-of-week `5L` means "last Friday" (croner's spelling is `5#L`).
 */
import { ValidationError } from '../errors.js';

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
  /** Offset of names[0]: JAN is 1, SUN is 0. */
  namesFrom?: number;
}

const SECOND: FieldSpec = { name: 'second', min: 0, max: 59 };
const MINUTE: FieldSpec = { name: 'minute', min: 0, max: 59 };
const HOUR: FieldSpec = { name: 'hour', min: 0, max: 23 };
const DAY_OF_MONTH: FieldSpec = { name: 'day-of-month', min: 1, max: 31 };
const MONTH: FieldSpec = {
  name: 'month',
  min: 1,
  max: 12,
  names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'],
  namesFrom: 1,
};
const DAY_OF_WEEK: FieldSpec = {
  name: 'day-of-week',
  min: 0,
  max: 7,
  names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'],
  namesFrom: 0,
};

function bad(expression: string, why: string): ValidationError {
  return new ValidationError(`cron expression "${expression}": ${why}`, { field: 'schedule' });
}

function value(spec: FieldSpec, token: string, expression: string): number {
  if (/^\d+$/.test(token)) {
    const n = Number(token);
    if (n < spec.min || n > spec.max)
      throw bad(expression, `${spec.name} ${n} is out of range ${spec.min}-${spec.max}`);
    return n;
  }
  const i = spec.names?.indexOf(token.toUpperCase()) ?? -1;
  if (i >= 0) return i + (spec.namesFrom ?? 0);
  const hint = spec.names ? ` or a name such as ${spec.names[1]}` : '';
  throw bad(expression, `${spec.name} "${token}" is not a number${hint}`);
}

function checkItem(spec: FieldSpec, item: string, expression: string): string {
  if (item === '') throw bad(expression, `${spec.name} has an empty list item`);
  if (spec === DAY_OF_MONTH && item.includes('W')) {
    throw bad(expression, `day-of-month "${item}": W (nearest weekday) is not supported`);
  }
  if (spec === DAY_OF_MONTH && item.toUpperCase() === 'L') return 'L';
  if (spec === DAY_OF_WEEK) {
    const nth = /^([A-Za-z0-9]+)#([1-5]|L)$/i.exec(item);
    if (nth) {
      value(spec, nth[1]!, expression);
      return `${nth[1]}#${nth[2]!.toUpperCase()}`;
    }
    if (item.includes('#'))
      throw bad(expression, `day-of-week "${item}" must be <weekday>#<1-5> or <weekday>#L`);
    const last = /^([A-Za-z0-9]+)L$/i.exec(item);
    if (last) {
      value(spec, last[1]!, expression);
      return `${last[1]}#L`;
    }
  }
  const parts = item.split('/');
  if (parts.length > 2) throw bad(expression, `${spec.name} "${item}" has more than one step`);
  const [base, step] = parts as [string, string | undefined];
  if (step !== undefined) {
    // croner allows a step up to the field's span; day-of-week 0-7 has seven distinct days.
    const span = spec === DAY_OF_WEEK ? 7 : spec.max - spec.min + 1;
    if (!/^\d+$/.test(step) || Number(step) < 1 || Number(step) > span) {
      throw bad(expression, `${spec.name} step "${step}" must be a whole number from 1 to ${span}`);
    }
  }
  if (base === '*' || base === '?') return step === undefined ? '*' : `*/${step}`;
  const range = base.split('-');
  if (range.length > 2 || range.some((r) => r === ''))
    throw bad(expression, `${spec.name} "${item}" is not a value, range or step`);
  if (range.length === 2) {
    const from = value(spec, range[0]!, expression);
    const to = value(spec, range[1]!, expression);
    if (from > to) throw bad(expression, `${spec.name} range ${range[0]}-${range[1]} runs backwards`);
  } else {
    value(spec, range[0]!, expression);
  }
  return item;
}

export interface CheckedCron {
  /** The expression rewritten for croner. */
  pattern: string;
  /** True when the hour field names fixed hours (no `*` and no step): decides the DST rule. */
  fixedHour: boolean;
}

/** Validates a 5- or 6-field expression; a mistake is a `ValidationError` naming field and reason. */
export function checkCronFields(expression: string): CheckedCron {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw bad(
      expression,
      `has ${fields.length} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (with seconds first)`,
    );
  }
  const specs =
    fields.length === 6
      ? [SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK]
      : [MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK];
  const rewritten = fields.map((field, i) => {
    const spec = specs[i]!;
    return field
      .split(',')
      .map((item) => checkItem(spec, item, expression))
      .join(',');
  });
  const hour = rewritten[specs.indexOf(HOUR)]!;
  return { pattern: rewritten.join(' '), fixedHour: !hour.includes('*') && !hour.includes('/') };
}
