/**
 * TypeBox schemas built from an entity's field table (`JOB_FIELDS`, `RUN_FIELDS`, … in core): the request body's
 * properties (type, bounds, default as optionality, description) and the answer's (the same types,
 * without bounds: an answer echoes what is stored). The types follow the table at compile time,
 * so a route's body has its precise static type.
 */
import {
  type TArray,
  type TBoolean,
  type TInteger,
  type TLiteral,
  type TNull,
  type TNumber,
  type TOptional,
  type TSchema,
  type TString,
  type TUnion,
  type TUnknown,
  Type,
} from 'typebox';
import { type AnswerField, type AnswerFields, type Field, type Fields, ID_PATTERN } from '../core/index.js';

type Literals<V extends readonly string[]> = { -readonly [I in keyof V]: TLiteral<V[I]> };
type Base<F> = F extends { type: 'integer' }
  ? TInteger
  : F extends { type: 'number' }
    ? TNumber
    : F extends { type: 'json' }
      ? TUnknown
      : F extends { type: 'ids' }
        ? TArray<TString>
        : F extends { type: 'enum'; values: infer V extends readonly string[] }
          ? TUnion<Literals<V>>
          : TString;
type WithNull<F, S extends TSchema> = F extends { nullable: true } ? TUnion<[S, TNull]> : S;
type BodySchema<F> = F extends { default: unknown } ? TOptional<WithNull<F, Base<F>>> : WithNull<F, Base<F>>;
type AnswerSchema<F> = WithNull<
  F,
  F extends { type: 'enum' | 'instant' }
    ? TString
    : F extends { type: 'boolean' }
      ? TBoolean
      : F extends { type: 'strings' }
        ? TArray<TString>
        : Base<F>
>;

/** The properties of a request body, keyed by API name. */
export type BodyProperties<T extends Fields> = { -readonly [K in keyof T as T[K]['api']]: BodySchema<T[K]> };
/** The properties of an answer, keyed by API name. */
export type AnswerProperties<T extends AnswerFields> = {
  -readonly [K in keyof T as T[K]['api']]: AnswerSchema<T[K]>;
};

/** Options without the unset ones, in the order given (the OpenAPI document keeps it). */
function options(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

function bodySchema(f: Field): TSchema {
  const description = f.description;
  switch (f.type) {
    case 'id':
      return Type.String({ pattern: ID_PATTERN, maxLength: 200, description });
    case 'string':
      return Type.String(options({ minLength: f.minLength, maxLength: f.maxLength, description }));
    case 'integer':
      return Type.Integer(options({ minimum: f.min, maximum: f.max, description }));
    case 'number':
      return Type.Number(options({ minimum: f.min, maximum: f.max, description }));
    case 'enum':
      return Type.Union(
        (f.values ?? []).map((v) => Type.Literal(v)),
        options({ description }),
      );
    case 'json':
      return Type.Unknown(options({ description }));
    case 'ids':
      return Type.Array(
        Type.String({ pattern: ID_PATTERN, maxLength: 200 }),
        options({ maxItems: f.maxItems, uniqueItems: true, description }),
      );
  }
}

function answerSchema(f: AnswerField): TSchema {
  const o = options({ description: f.answerDescription });
  switch (f.type) {
    case 'integer':
      return Type.Integer(o);
    case 'number':
      return Type.Number(o);
    case 'json':
      return Type.Unknown(o);
    case 'boolean':
      return Type.Boolean(o);
    case 'instant':
      return Type.String(options({ format: 'date-time', description: f.answerDescription }));
    case 'ids':
    case 'strings':
      return Type.Array(Type.String(), o);
    default:
      return Type.String(o);
  }
}

const nullable = (f: AnswerField, s: TSchema): TSchema => (f.nullable ? Type.Union([s, Type.Null()]) : s);

/** A request body's properties: a field with a default is optional; `omit` leaves fields out. */
export function bodyProperties<T extends Fields, O extends keyof T = never>(
  fields: T,
  omit: readonly O[] = [],
): Omit<BodyProperties<T>, T[O]['api']> {
  const out: Record<string, TSchema> = {};
  for (const [property, f] of Object.entries(fields)) {
    if ((omit as readonly string[]).includes(property)) continue;
    const s = nullable(f, bodySchema(f));
    out[f.api] = 'default' in f ? Type.Optional(s) : s;
  }
  return out as Omit<BodyProperties<T>, T[O]['api']>;
}

/** An answer's properties: every field, its type without the request's bounds. */
export function answerProperties<T extends AnswerFields>(fields: T): AnswerProperties<T> {
  const out: Record<string, TSchema> = {};
  for (const f of Object.values(fields)) out[f.api] = nullable(f, answerSchema(f));
  return out as AnswerProperties<T>;
}
