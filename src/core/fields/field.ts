/**
 * What a field of an entity is, written once: its name in the HTTP API, its type and bounds, its
 * default, the text the API reference shows, and its database column. An entity's table (a job's
 * definition: `JOB_FIELDS` in `./job.ts`; the answers for runs, attempts and keys: `./run.ts`,
 * `./key.ts`) is keyed by the TypeScript property, in the API's order. Everything else that lists
 * the fields is derived from it: validation and defaults (`core/job.ts`), the TypeBox schemas and
 * so the OpenAPI document (`api/field-schemas.ts`, `api/schemas.ts`), the answers (`answerOf`,
 * used by `api/present.ts`), the client's JSON types (`client/types.ts`, from the types below) and
 * the column list the store writes (`JOB_COLUMNS`).
 */

/**
 * - `id`: a string of `ID_PATTERN` (1-200 of `[A-Za-z0-9._:-]`, not `.` or `..`).
 * - `string`: any string (`minLength`/`maxLength` bound it in the API schema only).
 * - `integer`, `number` (finite): from `min` to `max`.
 * - `enum`: one of `values`.
 * - `json`: any JSON value.
 * - `ids`: a list of distinct `id`s, at most `maxItems`.
 */
export type FieldType = 'id' | 'string' | 'integer' | 'number' | 'enum' | 'json' | 'ids';

/** The PostgreSQL types the columns of entity fields have. */
export type PgType = 'text' | 'integer' | 'double precision' | 'jsonb' | 'text[]';

/**
 * A field as answers show it. Beside the types of `FieldType`, answers carry `instant` (a `Date`
 * stored, an ISO-8601 string in UTC in the API), `boolean` and `strings` (a list of any strings).
 */
export interface AnswerField {
  /** The name in the HTTP API (snake_case). */
  readonly api: string;
  readonly type: FieldType | 'instant' | 'boolean' | 'strings';
  /** `null` is a value. In a definition field, given as `null` it means the default. */
  readonly nullable?: boolean;
  /**
   * The values of an `enum`. On a `string` of an answer: the values the client's type names (the
   * schema says any string, so that a value added later reaches older clients).
   */
  readonly values?: readonly string[];
  /** What the API reference says of the field in an answer (answers carry no bounds). */
  readonly answerDescription?: string;
}

/** A field of a definition: what a caller gives, validated, stored in its column. */
export interface Field extends AnswerField {
  readonly type: FieldType;
  /** The value an omitted field takes. A field without a default is required. */
  readonly default?: unknown;
  /** Bounds of an `integer` or `number`, inclusive. */
  readonly min?: number;
  readonly max?: number;
  /** Bounds of a `string`'s length, checked by the API schema. */
  readonly minLength?: number;
  readonly maxLength?: number;
  /** Most items of an `ids` list. */
  readonly maxItems?: number;
  /** Longest serialised UTF-8 of a `json` value, bytes. */
  readonly maxBytes?: number;
  /** What the API reference says of the field in a request body. */
  readonly description?: string;
  /** Its column and the column's type. */
  readonly column: string;
  readonly pgType: PgType;
  /**
   * Left out of the definition's digest while it has its default, so that a definition written
   * before the field existed keeps its digest (re-applying it stays `unchanged`). Set it on every
   * field added after the first release.
   */
  readonly hashedOnlyWhenSet?: boolean;
}

/** An entity's fields, keyed by the TypeScript property. */
export type Fields = { readonly [property: string]: Field };
/** The fields of an answer, keyed by the TypeScript property. */
export type AnswerFields = { readonly [property: string]: AnswerField };

/** The TypeScript type of a field's value. */
export type ValueOf<F> =
  | (F extends { type: 'integer' | 'number' }
      ? number
      : F extends { type: 'enum'; values: readonly (infer V)[] }
        ? V
        : F extends { type: 'json' }
          ? unknown
          : F extends { type: 'ids' }
            ? string[]
            : string)
  | (F extends { nullable: true } ? null : never);

type OrNull<F> = F extends { nullable: true } ? null : never;

/**
 * The type of a field's value in an answer: an `enum` is any string there, as the schema says; a
 * `string` with `values` is one of them; an `instant` is an ISO-8601 string.
 */
export type AnswerValueOf<F> =
  | (F extends { type: 'enum' }
      ? string
      : F extends { type: 'string'; values: readonly (infer V)[] }
        ? V
        : F extends { type: 'instant' }
          ? string
          : F extends { type: 'boolean' }
            ? boolean
            : F extends { type: 'strings' }
              ? string[]
              : ValueOf<F>)
  | OrNull<F>;

/** The type of a field's value as the store holds it: an `instant` is a `Date`. */
export type StoredValueOf<F> = F extends { type: 'instant' } ? Date | OrNull<F> : AnswerValueOf<F>;

type HasDefault<F> = F extends { default: unknown } ? true : false;

/** What a caller gives (camelCase): fields with a default are optional. */
export type InputOf<T extends Fields> = {
  -readonly [K in keyof T as HasDefault<T[K]> extends true ? never : K]: ValueOf<T[K]>;
} & {
  -readonly [K in keyof T as HasDefault<T[K]> extends true ? K : never]?: ValueOf<T[K]>;
};

/** A validated value (camelCase): every field set. */
export type SpecOf<T extends Fields> = { -readonly [K in keyof T]: ValueOf<T[K]> };

/** A request body in the API's snake_case: fields with a default are optional. */
export type BodyOf<T extends Fields> = {
  -readonly [K in keyof T as HasDefault<T[K]> extends true ? never : T[K]['api']]: ValueOf<T[K]>;
} & { -readonly [K in keyof T as HasDefault<T[K]> extends true ? T[K]['api'] : never]?: ValueOf<T[K]> };

/** An answer in the API's snake_case: every field set. */
export type AnswerOf<T extends AnswerFields> = {
  -readonly [K in keyof T as T[K]['api']]: AnswerValueOf<T[K]>;
};

/** What an answer is made from (camelCase, instants as `Date`s). */
export type StoredOf<T extends AnswerFields> = { readonly [K in keyof T]: StoredValueOf<T[K]> };

/** An answer's fields from what the store holds: snake_case names, instants as ISO-8601 strings. */
export function answerOf<T extends AnswerFields>(fields: T, stored: StoredOf<T>): AnswerOf<T> {
  const out: Record<string, unknown> = {};
  for (const [property, f] of Object.entries(fields)) {
    const value = (stored as Record<string, unknown>)[property];
    out[f.api] = f.type === 'instant' && value !== null ? (value as Date).toISOString() : value;
  }
  return out as AnswerOf<T>;
}
