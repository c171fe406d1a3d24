/**
 * The worker's executor configuration (YAML): which URLs this worker may call and the built-in
 * handlers it offers, each an HTTP call or a command.
 *
 * ```yaml
 * allow:
 *   - https://api.example.com/
 * handlers:
 *   sync-invoices:
 *     http: { url: https://api.example.com/sync, timeout: 10s }
 *   nightly-backup:
 *     exec: { argv: [/usr/local/bin/backup, --full], timeout: 1h }
 * ```
 *
 * It lives on the worker, not in a job: a job names a handler and can neither choose a command nor
 * an HTTP target. Validation is strict and complete before any handler exists — an unknown key, a
 * wrong type (nothing is coerced: `"3"` is not a number), an empty argv or a URL outside the
 * allow-list refuses the whole file with a `ValidationError` naming the handler and the field.
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { parseDuration, ValidationError, validateId } from '../core/index.js';
import { type ExecExecutorConfig, execExecutor } from './executors/exec.js';
import { HTTP_METHODS, type HttpExecutorConfig, httpExecutor, validateAllowList } from './executors/http.js';
import type { Handler } from './worker.js';

const ROOT_KEYS = ['allow', 'handlers'];
const HTTP_KEYS = ['method', 'url', 'headers', 'timeout'];
const EXEC_KEYS = ['argv', 'cwd', 'env', 'timeout', 'retry_exit_codes', 'permanent_exit_codes'];
const KINDS = ['http', 'exec'];

/** A field's problem: `field` is its path inside the handler (`http.url`) or the file (`allow[0]`). */
class FieldError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${field} ${reason}`);
  }
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function mapping(value: unknown, field: string, keys?: string[]): Record<string, unknown> {
  if (!isMapping(value)) throw new FieldError(field, 'must be a mapping');
  if (keys) {
    for (const key of Object.keys(value)) {
      if (!keys.includes(key))
        throw new FieldError(`${field}.${key}`, `is not a known field (expected ${keys.join(', ')})`);
    }
  }
  return value;
}

function stringMap(value: unknown, field: string): Record<string, string> {
  const m = mapping(value, field);
  for (const [key, v] of Object.entries(m)) {
    if (typeof v !== 'string') throw new FieldError(`${field}.${key}`, 'must be a string (quote it)');
  }
  return m as Record<string, string>;
}

/** A timeout: milliseconds as a whole number, or a duration such as `30s` or `1h30m`. */
function timeout(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 1)
      throw new FieldError(
        field,
        'must be a positive whole number of milliseconds or a duration such as 30s',
      );
    return value;
  }
  if (typeof value === 'string') {
    try {
      return parseDuration(value, field);
    } catch (err) {
      throw new FieldError(field, `is not a duration: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  throw new FieldError(field, 'must be milliseconds or a duration such as 30s');
}

function intList(value: unknown, field: string): number[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) throw new FieldError(field, 'must be a list of exit codes');
  for (const [i, v] of value.entries()) {
    if (typeof v !== 'number' || !Number.isInteger(v))
      throw new FieldError(`${field}[${i}]`, 'must be an integer');
  }
  return value as number[];
}

function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new FieldError(field, 'must be a string');
  return value;
}

function httpConfig(value: unknown): HttpExecutorConfig {
  const m = mapping(value, 'http', HTTP_KEYS);
  if (m.url === undefined) throw new FieldError('http.url', 'is required');
  if (typeof m.url !== 'string') throw new FieldError('http.url', 'must be a string');
  const method = optionalString(m.method, 'http.method');
  if (method !== undefined && !(HTTP_METHODS as readonly string[]).includes(method))
    throw new FieldError('http.method', `must be one of ${HTTP_METHODS.join(', ')}`);
  const config: HttpExecutorConfig = { url: m.url };
  if (method !== undefined) config.method = method as HttpExecutorConfig['method'];
  if (m.headers !== undefined) config.headers = stringMap(m.headers, 'http.headers');
  const t = timeout(m.timeout, 'http.timeout');
  if (t !== undefined) config.timeout = t;
  return config;
}

function execConfig(value: unknown): ExecExecutorConfig {
  const m = mapping(value, 'exec', EXEC_KEYS);
  if (m.argv === undefined) throw new FieldError('exec.argv', 'is required');
  if (!Array.isArray(m.argv) || m.argv.length === 0)
    throw new FieldError('exec.argv', 'must be a non-empty list of strings');
  for (const [i, arg] of m.argv.entries()) {
    if (typeof arg !== 'string') throw new FieldError(`exec.argv[${i}]`, 'must be a string (quote it)');
  }
  const config: ExecExecutorConfig = { argv: m.argv as string[] };
  const cwd = optionalString(m.cwd, 'exec.cwd');
  if (cwd !== undefined) config.cwd = cwd;
  if (m.env !== undefined) config.env = stringMap(m.env, 'exec.env');
  const t = timeout(m.timeout, 'exec.timeout');
  if (t !== undefined) config.timeout = t;
  const retry = intList(m.retry_exit_codes, 'exec.retry_exit_codes');
  if (retry !== undefined) config.retry_exit_codes = retry;
  if (m.permanent_exit_codes === 'others') config.permanent_exit_codes = 'others';
  else if (typeof m.permanent_exit_codes === 'string')
    throw new FieldError('exec.permanent_exit_codes', 'must be a list of exit codes or "others"');
  else {
    const permanent = intList(m.permanent_exit_codes, 'exec.permanent_exit_codes');
    if (permanent !== undefined) config.permanent_exit_codes = permanent;
  }
  return config;
}

/** Runs an executor factory, turning its `ValidationError` about `field` into one about `kind.field`. */
function build(kind: string, make: () => Handler): Handler {
  try {
    return make();
  } catch (err) {
    const field = err instanceof ValidationError ? err.details.field : undefined;
    if (typeof field === 'string' && err instanceof Error)
      throw new FieldError(`${kind}.${field}`, err.message.slice(field.length + 1));
    throw err;
  }
}

/**
 * Parses and validates a worker configuration and builds its handlers. `source` names the file in
 * error messages.
 */
export function parseWorkerConfig(text: string, source = 'worker config'): Record<string, Handler> {
  let doc: unknown;
  try {
    doc = parse(text, { uniqueKeys: true });
  } catch (err) {
    throw new ValidationError(
      `${source} is not valid YAML: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  let allow: string[];
  let entries: [string, unknown][];
  try {
    if (!isMapping(doc)) throw new FieldError('the file', 'must be a mapping with allow and handlers');
    for (const key of Object.keys(doc)) {
      if (!ROOT_KEYS.includes(key))
        throw new FieldError(key, `is not a known field (expected ${ROOT_KEYS.join(', ')})`);
    }
    const root = doc;
    allow = root.allow === undefined ? [] : validateAllowList(root.allow);
    if (root.handlers === undefined) throw new FieldError('handlers', 'is required');
    entries = Object.entries(mapping(root.handlers, 'handlers'));
    if (entries.length === 0) throw new FieldError('handlers', 'is empty');
  } catch (err) {
    if (err instanceof FieldError)
      throw new ValidationError(`${source}: ${err.message}`, { field: err.field });
    if (err instanceof ValidationError)
      throw new ValidationError(`${source}: ${err.message}`, { field: err.details.field });
    throw err;
  }
  const handlers: Record<string, Handler> = {};
  for (const [name, entry] of entries) {
    try {
      validateId(name, 'name');
    } catch (err) {
      throw new ValidationError(`${source}: handler "${name}": ${(err as Error).message}`, {
        handler: name,
        field: 'name',
      });
    }
    try {
      // The handler's one key names its executor; the field is `executor` when that is what is wrong.
      const kinds = isMapping(entry) ? Object.keys(entry) : [];
      const unknown = kinds.find((k) => !KINDS.includes(k));
      if (unknown !== undefined)
        throw new FieldError(unknown, `is not an executor (expected ${KINDS.join(' or ')})`);
      if (!isMapping(entry) || kinds.length !== 1)
        throw new FieldError('executor', `must be exactly one of ${KINDS.join(' or ')}, as a mapping`);
      const kind = kinds[0];
      handlers[name] =
        kind === 'http'
          ? build('http', () => httpExecutor(httpConfig(entry.http), { allow }))
          : build('exec', () => execExecutor(execConfig(entry.exec)));
    } catch (err) {
      if (!(err instanceof FieldError)) throw err;
      throw new ValidationError(`${source}: handler "${name}": ${err.message}`, {
        handler: name,
        field: err.field,
      });
    }
  }
  return handlers;
}

/** Reads, validates and builds the handlers of a worker configuration file. */
export async function readWorkerConfig(path: string): Promise<Record<string, Handler>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ValidationError(
      `cannot read worker config ${path}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return parseWorkerConfig(text, `worker config ${path}`);
}
