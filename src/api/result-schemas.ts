/**
 * The bodies that report results under leases (re-exported by `schemas.ts`, whose conventions they
 * follow: strict bodies, nothing coerced): one run's (`POST /v1/runs/{run_id}/complete`), a batch's
 * (`POST /v1/runs/complete`, or `results` on a claim), and their answers.
 */
import { Type } from 'typebox';
import { REPORT_PROPERTIES } from './heartbeat-schemas.js';

const Instant = (description: string) => Type.String({ format: 'date-time', description });
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

/** The most results one request may carry (`POST /v1/runs/complete`, a claim's `results`). */
export const MAX_RESULTS = 500;

const resultProperties = {
  lease_token: Type.String({ minLength: 1, maxLength: 100 }),
  status: Type.Union([Type.Literal('succeeded'), Type.Literal('failed')]),
  error: Type.Optional(Type.String({ maxLength: 65536, description: "the error's message" })),
  error_stack: Type.Optional(
    Type.String({
      maxLength: 65536,
      description: "the error's stack, kept on the attempt apart from the message",
    }),
  ),
  started_at: Type.Optional(
    Instant(
      'when the handler started (server clock; kept within the later of the claim and available_at, and now); default that later instant',
    ),
  ),
  retryable: Type.Optional(Type.Boolean({ description: 'false dead-letters at once; default true' })),
  retry_after_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 604800000 })),
  output: Type.Optional(
    Type.String({ maxLength: 1048576, description: 'what the handler printed; the last 64 KiB is kept' }),
  ),
  // What the handler reported since the last heartbeat: written with the result.
  ...REPORT_PROPERTIES,
};

/** `POST /v1/runs/{run_id}/complete`: one run's result under its lease. */
export const CompleteBody = Type.Object(resultProperties, { additionalProperties: false });

export const StateAnswer = Type.Object({
  state: Type.String(),
  attempt: Type.Optional(Type.Integer({ description: 'for a failure: the attempt the run is on now' })),
  available_at: Type.Optional(Nullable(Instant('for a retried failure: when it is claimable again'))),
});

/** One run's result in a batch: the single-run body and the run's id. */
export const ResultEntry = Type.Object(
  { run_id: Type.String({ minLength: 1, maxLength: 100 }), ...resultProperties },
  { additionalProperties: false },
);

/** A list of 1 to `MAX_RESULTS` results. */
export const resultList = (description: string) =>
  Type.Array(ResultEntry, { minItems: 1, maxItems: MAX_RESULTS, description });

/** `POST /v1/runs/complete`: many results in one request. */
export const CompleteManyBody = Type.Object(
  { results: resultList(`1 to ${MAX_RESULTS} results, each under its run's lease; a run id at most once`) },
  { additionalProperties: false },
);

/** What became of one result of a batch. */
export const ResultOutcome = Type.Object({
  run_id: Type.String(),
  outcome: Type.Union(
    [Type.Literal('done'), Type.Literal('lost'), Type.Literal('not_found'), Type.Literal('conflict')],
    {
      description:
        'done: written; lost: the lease is not live (409 lease_lost), nothing written; not_found: no such run in your tenant (404), nothing written; conflict: the run id is in the batch more than once (409 duplicate_run), none of its entries written',
    },
  ),
  status: Type.Integer({ description: 'the status the single-run route would answer: 200, 404 or 409' }),
  state: Type.Optional(
    Type.String({ description: 'when done: succeeded, or for a failure pending (a retry) or dead' }),
  ),
  attempt: Type.Optional(Type.Integer({ description: 'for a failure done: the attempt the run is on now' })),
  available_at: Type.Optional(Nullable(Instant('for a retried failure: when it is claimable again'))),
  error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() })),
});

export const CompleteManyAnswer = Type.Object({
  results: Type.Array(ResultOutcome, { description: 'one per result, in the order sent' }),
  server_time: Instant("the server's clock when it answered"),
});
