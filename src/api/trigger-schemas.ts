/**
 * The bodies that create runs on demand, a trigger's and a backfill's, and a backfill's answer
 * (re-exported by `schemas.ts`, whose conventions they follow: strict bodies, nothing coerced).
 */
import { Type } from 'typebox';
import { MAX_BACKFILL_SLOTS } from '../core/index.js';

const Instant = (description: string) => Type.String({ format: 'date-time', description });
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

/** `POST /v1/jobs/{job_id}/runs`: the slot, and a payload of the run's own. */
export const TriggerBody = Type.Object(
  {
    scheduled_for: Type.Optional(Instant('the slot; default now')),
    payload: Type.Optional(
      Type.Unknown({
        description:
          "this run's payload in place of the job's (any JSON value, at most 64 KiB; a job with a payload_schema takes only payloads that match it, else 400 naming the failing path); default the job's",
      }),
    ),
  },
  { additionalProperties: false },
);

/** `POST /v1/jobs/{job_id}/backfill`: a range of slots, `from` included, `to` excluded. */
export const BackfillBody = Type.Object(
  {
    from: Instant('first instant of the range (included)'),
    to: Instant(
      `end of the range (excluded; from = to is an empty range); at most ${MAX_BACKFILL_SLOTS} slots`,
    ),
  },
  { additionalProperties: false },
);

export const BackfillAnswer = Type.Object({
  created: Type.Integer({ description: 'runs created: slots of the range that had none' }),
  existing: Type.Integer({ description: 'slots of the range that already had a run, left as they were' }),
  first_slot: Nullable(Instant("the range's first slot; null when it holds none")),
  last_slot: Nullable(Instant("the range's last slot; null when it holds none")),
});
