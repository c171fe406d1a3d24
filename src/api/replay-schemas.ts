/**
 * `POST /v1/runs/replay`: the dead letters a filter picks, counted (`dry_run`) or replayed a bounded
 * batch at a time, and the answer.
 */
import { Type } from 'typebox';
import { ID_PATTERN } from '../core/index.js';

export const ReplayDeadBody = Type.Object(
  {
    job_id: Type.Optional(
      Type.String({ pattern: ID_PATTERN, maxLength: 200, description: "only this job's dead runs" }),
    ),
    error_contains: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          'only dead runs whose last error holds this text, in any case, taken literally (no wildcards)',
      }),
    ),
    slot_from: Type.Optional(
      Type.String({ format: 'date-time', description: 'only slots at or after this instant' }),
    ),
    slot_to: Type.Optional(
      Type.String({ format: 'date-time', description: 'only slots before this instant' }),
    ),
    dry_run: Type.Optional(
      Type.Boolean({
        description: 'count the matching dead runs (up to 10,000) and replay none; default false',
      }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 500,
        description: 'most runs this call replays, 1-500; default 500',
      }),
    ),
    cursor: Type.Optional(
      Type.String({ maxLength: 500, description: "the last answer's next_cursor: go on after its batch" }),
    ),
  },
  { additionalProperties: false },
);

export const ReplayDeadAnswer = Type.Object({
  dry_run: Type.Boolean(),
  matching: Type.Integer({
    description:
      'dry run: the dead runs that match, counted up to 10,000 (more_matching: there are more); otherwise: the dead runs this call found, at most its limit',
  }),
  more_matching: Type.Boolean({ description: 'dry run: more than 10,000 match; otherwise false' }),
  replayed: Type.Integer({
    description: 'runs replayed by this call (each as POST /v1/runs/{id}/replay does)',
  }),
  skipped: Type.Integer({
    description: 'runs found dead that were no longer dead when written (replayed or pruned meanwhile)',
  }),
  replayed_run_ids: Type.Array(Type.String(), { description: 'the runs replayed' }),
  next_cursor: Type.Union([Type.String(), Type.Null()], {
    description: 'more matching dead runs may follow this batch: send it back as cursor; null when none',
  }),
});
