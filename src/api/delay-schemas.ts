/**
 * The query and answer of `GET /v1/delay` (`routes/delay.ts`) as TypeBox schemas, with a
 * description on every field for the OpenAPI document and docs/http-api.md.
 */
import { Type } from 'typebox';
import {
  DEFAULT_DELAY_RANGE_MS,
  MAX_DELAY_BUCKETS,
  MAX_DELAY_RANGE_MS,
  MIN_DELAY_STEP_MS,
} from '../core/index.js';
import { Id, Instant } from './schemas.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

export const DelayQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        maxLength: 64,
        description: `first slot counted, an ISO-8601 instant with an offset; default ${DEFAULT_DELAY_RANGE_MS / 3_600_000} h before to; at most ${MAX_DELAY_RANGE_MS / 86_400_000} days before to`,
      }),
    ),
    to: Type.Optional(
      Type.String({
        maxLength: 64,
        description: "end of the range (exclusive), an ISO-8601 instant; default the server's now",
      }),
    ),
    step: Type.Optional(
      Type.String({
        maxLength: 32,
        description: `bucket length, a duration (30s, 5m, 1h); default 1m, at least ${MIN_DELAY_STEP_MS / 1000}s, at most ${MAX_DELAY_BUCKETS} buckets in the range`,
      }),
    ),
    pool: Type.Optional(Id('only the runs of this pool')),
    job_id: Type.Optional(Id('only the runs of this job')),
  },
  { additionalProperties: false },
);

const Seconds = (description: string) =>
  Nullable(Type.Number({ description: `${description}, seconds; null without runs` }));

export const DelayBucket = Type.Object({
  start: Instant('start of the bucket: its slots are in [start, start + step)'),
  runs: Type.Integer({ description: 'ended runs (succeeded or dead) whose slot is in the bucket' }),
  p50: Seconds('median delay (nearest rank: an observed delay)'),
  p99: Seconds('99th percentile of the delay (nearest rank)'),
  max: Seconds('largest delay'),
});

export const DelayAnswer = Type.Object({
  from: Instant('start of the first bucket'),
  to: Instant('end of the last bucket (exclusive)'),
  step_seconds: Type.Number({ description: 'bucket length, seconds' }),
  pool: Nullable(Type.String({ description: 'the pool asked for, or null: every pool' })),
  job_id: Nullable(Type.String({ description: 'the job asked for, or null: every job' })),
  buckets: Type.Array(DelayBucket, {
    description:
      "every bucket of the range in order, those without runs included; a run's delay is its start minus when it became due (the later of its available_at and its creation), the last attempt's for a run that was retried",
  }),
});
