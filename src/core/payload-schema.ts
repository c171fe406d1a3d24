/**
 * A job's payload schema: a JSON Schema (draft-07, what TypeBox's `Type.Object(…)` gives) that every
 * payload of the job must match — the job's own, checked when the job is upserted, and each
 * triggered run's, checked before the run is written. Pure: ajv compiles a schema into a function.
 *
 * A schema comes from whoever may define jobs, and every server compiles it, so it is bounded
 * before ajv sees it and compiled with options that keep validation cheap and local: at most
 * `MAX_PAYLOAD_SCHEMA_BYTES` (the job's field table), no `$data` references, the first error only, no remote `$ref` (no
 * loader: a `$ref` that is not inside the schema is refused), and no schema kept in the ajv instance
 * by its `$id` (two jobs may reuse one). Compiled validators are cached by the schema's text, at most
 * `MAX_CACHED_VALIDATORS`, the least recently used evicted first. `pattern` and
 * `patternProperties` are refused (`REFUSED_KEYWORDS`): a backtracking regular expression against a
 * large payload could stall the server for every tenant.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { ValidationError } from './errors.js';

/** Compiled validators kept in memory. */
export const MAX_CACHED_VALIDATORS = 500;

// ajv-formats is CommonJS: under NodeNext its default export arrives as the module object.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

const ajv = addFormats(
  new Ajv({
    $data: false,
    allErrors: false,
    // Unknown keywords are ignored, as JSON Schema says, rather than refused: a schema written for
    // another tool (with `examples`, `x-…`, TypeBox's own) still applies.
    strict: false,
    addUsedSchema: false,
    coerceTypes: false,
    useDefaults: false,
    removeAdditional: false,
    logger: false,
  }),
);

/**
 * Keywords refused in a payload schema: a regular expression runs on JavaScript's backtracking
 * engine, so one pattern written to backtrack could stall a server shared by every tenant for as
 * long as a payload of 64 KiB takes. A schema with them is refused when the job is defined.
 */
export const REFUSED_KEYWORDS = ['pattern', 'patternProperties'] as const;
for (const keyword of REFUSED_KEYWORDS) {
  ajv.removeKeyword(keyword);
  ajv.addKeyword({
    keyword,
    compile: () => {
      throw new Error(
        `"${keyword}" is not allowed: a regular expression could stall the server (check the format in the handler instead, or use "format" or "enum")`,
      );
    },
  });
}

const cache = new Map<string, ValidateFunction>();

/** The compiled validator of `schema` (its JSON text `text`), from the cache or compiled now. */
function validatorOf(schema: unknown, text: string): ValidateFunction {
  const hit = cache.get(text);
  if (hit) {
    // Most recently used last: a Map iterates in insertion order.
    cache.delete(text);
    cache.set(text, hit);
    return hit;
  }
  let validate: ValidateFunction;
  try {
    if (!ajv.validateSchema(schema as object))
      throw new Error(ajv.errorsText(ajv.errors, { dataVar: 'schema' }));
    validate = ajv.compile(schema as object);
  } catch (err) {
    throw new ValidationError(
      `payload_schema is not a valid JSON Schema: ${err instanceof Error ? err.message : String(err)}`,
      { field: 'payload_schema' },
    );
  }
  cache.set(text, validate);
  if (cache.size > MAX_CACHED_VALIDATORS) cache.delete(cache.keys().next().value as string);
  return validate;
}

/**
 * Checks that `schema` (a JSON value, already bounded by the job's field table) is a JSON Schema
 * object ajv compiles; a `ValidationError` on `payload_schema` otherwise.
 */
export function checkPayloadSchema(schema: unknown): void {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    throw new ValidationError('payload_schema must be a JSON Schema object', { field: 'payload_schema' });
  validatorOf(schema, JSON.stringify(schema));
}

/** `payload.a[2].b` from ajv's JSON Pointer `/a/2/b` (`~1` is `/`, `~0` is `~`). */
function pathOf(what: string, error: ErrorObject): string {
  let path = what;
  const pointer = error.instancePath;
  if (pointer !== '') {
    for (const raw of pointer.slice(1).split('/')) {
      const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
      path += /^\d+$/.test(key)
        ? `[${key}]`
        : /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)
          ? `.${key}`
          : `[${JSON.stringify(key)}]`;
    }
  }
  // A missing property is reported on its parent: name the property itself.
  const missing =
    error.keyword === 'required' ? (error.params as { missingProperty?: string }).missingProperty : undefined;
  if (missing !== undefined)
    path += /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(missing) ? `.${missing}` : `[${JSON.stringify(missing)}]`;
  return path;
}

/**
 * Checks `payload` against a job's `schema` (one `checkPayloadSchema` accepted). A mismatch is a
 * `ValidationError` whose `field` is the failing path in the payload (`payload.user.id`) and whose
 * message says what the schema wanted there.
 */
export function checkPayloadAgainst(schema: unknown, payload: unknown, what = 'payload'): void {
  const validate = validatorOf(schema, JSON.stringify(schema));
  if (validate(payload)) return;
  const error = validate.errors?.[0];
  const field = error ? pathOf(what, error) : what;
  const wanted = error?.message ?? 'does not match';
  throw new ValidationError(`${field} does not match the job's payload_schema: ${wanted}`, {
    field,
    ...(error ? { schema_path: error.schemaPath } : {}),
  });
}
