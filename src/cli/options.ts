/** Option parsers and option groups shared by the `tock` commands. */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { parseDuration, ValidationError, validateId } from '../core/index.js';

/** A duration such as `90s` or `1h30m`, in milliseconds. */
export function duration(value: string): number {
  try {
    return parseDuration(value);
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

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError('expected a positive integer');
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

/** The worker's held-run options, shared by `tock worker` and `tock dev`. */
export const heldRunOptions = (cmd: Command) =>
  cmd
    .addOption(
      new Option(
        '--prefetch <n>',
        'runs to hold claimed beyond --concurrency, so the next batch is in hand when slots free (0-1000)',
      )
        .env('TOCK_PREFETCH')
        .default(0)
        .argParser(intInRange(0, 1000)),
    )
    .addOption(
      new Option(
        '--claim-ahead <ms>',
        'claim runs this many ms before they are due and start each on its instant (0-10000)',
      )
        .env('TOCK_CLAIM_AHEAD')
        .default(250)
        .argParser(intInRange(0, 10_000)),
    );

/** Where a command finds its database: `DATABASE_URL` or embedded, the schema, and its logging. */
export const databaseOptions = (cmd: Command) =>
  cmd
    .addOption(
      new Option('--database-url <url>', 'PostgreSQL connection string; unset: embedded PostgreSQL').env(
        'DATABASE_URL',
      ),
    )
    .addOption(
      new Option('--data-dir <dir>', 'embedded PostgreSQL data directory')
        .env('TOCK_DATA_DIR')
        .default('.tock'),
    )
    .addOption(
      new Option(
        '--schema <name>',
        "PostgreSQL schema for Tock's tables (created if missing); default: the server's search_path",
      ).env('TOCK_SCHEMA'),
    )
    .addOption(
      new Option('--log-format <format>', 'log lines for people or machines')
        .choices(['pretty', 'json'])
        .env('TOCK_LOG_FORMAT')
        .default('pretty'),
    )
    .addOption(
      new Option('--log-level <level>', 'least severe level logged')
        .choices(['trace', 'debug', 'info', 'warn', 'error'])
        .env('TOCK_LOG_LEVEL')
        .default('info'),
    );
