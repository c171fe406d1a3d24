/**
 * Option parsers: each turns an argument (or its environment variable) into the value the action
 * receives, or throws commander's InvalidArgumentError, whose message commander prints as
 * `error: option '--x <v>' argument 'y' is invalid. <message>`. They run before anything connects,
 * so a bad value never reaches a database or a server.
 */
import { InvalidArgumentError } from 'commander';
import {
  checkRetentionValue,
  NOTIFICATION_EVENTS,
  parseDuration,
  parseInstant,
  ValidationError,
  validateAllowList,
  validateId,
} from '../../core/index.js';

/** Most items one request of a list command asks for (the API's largest page). */
export const MAX_PAGE = 500;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

/** A duration such as `90s` or `1h30m`, in milliseconds. */
export function duration(value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new InvalidArgumentError(err instanceof ValidationError ? err.message : String(err));
  }
}

/** A retention: a duration from 1s to 366d, canonical (`168h` → `7d`), or `forever`. */
export function retentionValue(value: string): string {
  try {
    return checkRetentionValue(value, 'retention');
  } catch (err) {
    throw new InvalidArgumentError(err instanceof ValidationError ? err.message : String(err));
  }
}

/** A duration that may be zero (`0s`, `0`), ms. */
export function durationOrZero(value: string): number {
  try {
    return parseDuration(value, 'duration', { allowZero: true });
  } catch (err) {
    throw new InvalidArgumentError(err instanceof ValidationError ? err.message : String(err));
  }
}

/** A duration from 0 to `maxMs`, ms. */
export function durationUpTo(maxMs: number, max: string) {
  return (value: string): number => {
    const ms = durationOrZero(value);
    if (ms > maxMs) throw new InvalidArgumentError(`expected a duration from 0 to ${max}`);
    return ms;
  };
}

/** A duration from `minMs` to `maxMs` (`range` says them as people write them: `1s to 1d`), ms. */
export function durationBetween(minMs: number, maxMs: number, range: string) {
  return (value: string): number => {
    const ms = durationOrZero(value);
    if (ms < minMs || ms > maxMs) throw new InvalidArgumentError(`expected a duration from ${range}`);
    return ms;
  };
}

/** A duration in whole seconds (`90s`, `5m`); `0` only where zero means "none". */
export function seconds(allowZero: boolean) {
  return (value: string): number => {
    const ms = allowZero ? durationOrZero(value) : duration(value);
    if (ms % 1000 !== 0) throw new InvalidArgumentError(`"${value}" is not a whole number of seconds`);
    return ms / 1000;
  };
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError('expected a positive integer');
  return n;
}

export function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected an integer');
  return n;
}

/** An integer from `min` to `max` (a count, or milliseconds). */
export function intInRange(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}`);
    return n;
  };
}

/** A worker's prefetch: `auto` (sized by the worker's pace) or a fixed count from 0 to 1000. */
export function prefetchSetting(value: string): number | 'auto' {
  if (value === 'auto') return 'auto';
  if (!/^\d+$/.test(value) || Number(value) > 1000)
    throw new InvalidArgumentError('expected auto or an integer from 0 to 1000');
  return Number(value);
}

/** A page size of a list command, 1 to MAX_PAGE. */
export function pageSize(value: string): number {
  const n = positiveInt(value);
  if (n > MAX_PAGE) throw new InvalidArgumentError(`expected 1 to ${MAX_PAGE}`);
  return n;
}

/** A TCP port; 0 picks a free one. */
export function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535)
    throw new InvalidArgumentError('expected a port from 0 to 65535 (0 picks a free one)');
  return n;
}

/** A plain decimal number such as `2` or `1.5`. */
export function decimal(value: string): number {
  if (!/^\d+(\.\d+)?$/.test(value)) throw new InvalidArgumentError('expected a number, e.g. 2 or 1.5');
  return Number(value);
}

export function json(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch (err) {
    throw new InvalidArgumentError(`not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** An ISO-8601 instant with an offset, normalised to UTC (`2026-12-24T17:00:00.000Z`). */
export function instant(value: string): string {
  try {
    return new Date(parseInstant(value, 'the instant')).toISOString();
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
}

export function idempotencyKey(value: string): string {
  if (!IDEMPOTENCY_KEY.test(value)) throw new InvalidArgumentError('expected 1-200 visible ASCII characters');
  return value;
}

/**
 * Collects `--tenant` values: each may be one id or a comma-separated list (`TOCK_TENANTS=a,b`);
 * repeated flags add up. Every id is checked before anything connects.
 */
export function tenantList(value: string, previous: string[] | undefined): string[] {
  const ids = value.split(',').map((v) => v.trim());
  for (const id of ids) {
    try {
      validateId(id, 'tenant');
    } catch (err) {
      throw new InvalidArgumentError(err instanceof ValidationError ? err.message : String(err));
    }
  }
  return [...new Set([...(previous ?? []), ...ids])];
}

/**
 * Collects `--notify-allow` values: URL prefixes, comma-separated or in repeated flags, each checked
 * as a worker's allow-list is (`validateAllowList`) before anything starts.
 */
export function allowList(value: string, previous: string[] | undefined): string[] {
  const prefixes = value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
  try {
    return [...new Set([...(previous ?? []), ...validateAllowList(prefixes, '--notify-allow')])];
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
}

/** `--events`: a comma-separated list of notification events, each a known one. */
export function notificationEvents(value: string): string[] {
  const events = value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
  for (const e of events) {
    if (!(NOTIFICATION_EVENTS as readonly string[]).includes(e))
      throw new InvalidArgumentError(`"${e}" is not one of ${NOTIFICATION_EVENTS.join(', ')}`);
  }
  if (events.length === 0) throw new InvalidArgumentError('expected one or more events');
  return events;
}

/** A job id given as an argument (`tock jobs get <job_id>`), checked before any request. */
export function checkJobId(jobId: string): string {
  try {
    return validateId(jobId, 'job_id');
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
}

/** A limit's key given as an argument (`tock limits get <key>`), checked before any request. */
export function checkLimitKey(key: string): string {
  try {
    return validateId(key, 'key');
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
}
