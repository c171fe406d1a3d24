/**
 * What a field of an entity is, written once: its name in the HTTP API, its type and bounds, its
 * default, the text the API reference shows, and its database column. An entity's table (for a job,
 * `JOB_FIELDS` in `./job.ts`) is keyed by the TypeScript property; everything else that lists the
 * fields is derived from it: validation and defaults (`core/job.ts`), the TypeBox schemas and
 * so the OpenAPI document (`api/schemas.ts`), the client's JSON types (`client/types.ts`) and the
 * column list the store writes (`JOB_COLUMNS`). The types below derive the TypeScript shapes.
 */

/**
 * - `id`: a string of `ID_PATTERN` (1-200 of `[A-Za-z0-9._:-]`, not `.` or `..`).
 * - `string`: any string (`minLength`/`maxLength` bound it in the API schema only).
 * - `integer`, `number` (finite): from `min` to `max`.
 * - `enum`: one of `values`.
 * - `json`: any JSON value.
 */
export type FieldType = 'id' | 'string' | 'integer' | 'number' | 'enum' | 'json';

/** The PostgreSQL types the columns of entity fields have. */
export type PgType = 'text' | 'integer' | 'double precision' | 'jsonb';

export interface Field {
  /** The name in the HTTP API, job files and error messages (snake_case). */
  readonly api: string;
  readonly type: FieldType;
  /** `null` is a value (an unset limit), and given as `null` it means the default. */
  readonly nullable?: boolean;
  /** The value an omitted field takes. A field without a default is required. */
  readonly default?: unknown;
  /** Bounds of an `integer` or `number`, inclusive. */
  readonly min?: number;
  readonly max?: number;
  /** Bounds of a `string`'s length, checked by the API schema. */
  readonly minLength?: number;
  readonly maxLength?: number;
  /** The values of an `enum`. */
  readonly values?: readonly string[];
  /** Longest serialised UTF-8 of a `json` value, bytes. */
  readonly maxBytes?: number;
  /** What the API reference says of the field in a request body. */
  readonly description?: string;
  /** What the API reference says of the field in an answer (answers carry no bounds). */
  readonly answerDescription?: string;
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

/** The TypeScript type of a field's value. */
export type ValueOf<F> =
  | (F extends { type: 'integer' | 'number' }
      ? number
      : F extends { type: 'enum'; values: readonly (infer V)[] }
        ? V
        : F extends { type: 'json' }
          ? unknown
          : string)
  | (F extends { nullable: true } ? null : never);

/** The type of a field's value in an answer: an `enum` is any string there, as the schema says. */
export type AnswerValueOf<F> = F extends { type: 'enum' }
  ? string | (F extends { nullable: true } ? null : never)
  : ValueOf<F>;

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
export type AnswerOf<T extends Fields> = { -readonly [K in keyof T as T[K]['api']]: AnswerValueOf<T[K]> };
