/**
 * The bodies and answers of the limits routes (`routes/limits.ts`) as TypeBox schemas, as
 * `schemas.ts` holds the rest: strict bodies, a description on every field for the OpenAPI
 * document and docs/http-api.md.
 */
import { Type } from 'typebox';
import { MAX_BURST, MAX_CONCURRENCY, MAX_RATE } from '../core/index.js';
import { HELD_SCAN } from '../store/index.js';
import { Id, Instant } from './schemas.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

export const LimitParams = Type.Object({
  key: Id(
    "the limit: a name jobs list in `limits` (e.g. payments-api), or `tenant:<your tenant>`, the limit every run of the tenant takes; never `job:…` (a job's own cap)",
  ),
});

/** `PUT /v1/limits/{key}`: the whole definition (a field not given is unset: PUT replaces). */
export const LimitBody = Type.Object(
  {
    rate: Type.Optional(
      Nullable(
        Type.Number({
          minimum: 0,
          maximum: MAX_RATE,
          description: `tokens added per second, above 0, at most ${MAX_RATE}; a run takes one when it is claimed, and at most max(burst, ceil(rate)) runs start in any one second. With burst, or neither`,
        }),
      ),
    ),
    burst: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 1,
          maximum: MAX_BURST,
          description:
            'most tokens the bucket holds (a new limit starts full): how many runs may start at once after a quiet spell, 1 to 1000000. With rate, or neither',
        }),
      ),
    ),
    max_concurrency: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 1,
          maximum: MAX_CONCURRENCY,
          description: `most runs holding a slot at once (running), 1 to ${MAX_CONCURRENCY}; unset: no cap`,
        }),
      ),
    ),
  },
  {
    additionalProperties: false,
    description: 'a rate with its burst, a max_concurrency, or both',
  },
);

export const Limit = Type.Object({
  key: Type.String({ description: 'the limit: a name, or `tenant:<tenant>`' }),
  rate: Nullable(Type.Number({ description: 'tokens per second; null: no rate' })),
  burst: Nullable(Type.Integer({ description: 'bucket size; null: no rate' })),
  max_concurrency: Nullable(Type.Integer({ description: 'most runs holding a slot at once; null: no cap' })),
  tokens: Nullable(
    Type.Number({
      description:
        "what a claim could take now: the bucket's tokens refilled to now (may be fractional), but no more than the room left in the limit's one-second window of max(burst, ceil(rate)) starts; null: no rate",
    }),
  ),
  in_use: Type.Integer({ description: 'slots held now by running runs' }),
  created_at: Instant('created'),
  updated_at: Instant('last replaced'),
});

/** A limit as `GET /v1/limits` and `GET /v1/limits/{key}` answer it: with the runs it holds back now. */
export const LimitState = Type.Object({
  ...Limit.properties,
  held: Type.Integer({
    description:
      'queued runs due by now that this limit holds back while it is exhausted (no whole token, or every slot in use); 0 while it is not. The count tock_limit_held_runs of /metrics reports',
  }),
  held_capped: Type.Boolean({
    description: `true: the count read the tenant's ${HELD_SCAN.toLocaleString('en')} longest-due queued runs and stopped, so held counts only those (a lower bound)`,
  }),
});

export const LimitList = Type.Object({
  limits: Type.Array(LimitState, {
    description: "the tenant's limits by key (jobs' own caps show on the job)",
  }),
  next_cursor: Nullable(Type.String()),
});
