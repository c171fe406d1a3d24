/**
 * The heartbeat bodies (re-exported by `schemas.ts`, whose conventions they follow: strict bodies,
 * nothing coerced): one run's lease, or a worker's batch of them, each with what its handler
 * reported since the last heartbeat. The bounds are core's (`core/progress.ts`).
 */
import { Type } from 'typebox';
import {
  LOG_LINE_MAX_CHARS,
  LOG_LINES_MAX,
  MAX_HTTP_HEARTBEAT_LEASES,
  PROGRESS_MESSAGE_MAX_CHARS,
} from '../core/index.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

/**
 * What a handler reported since the last heartbeat (`ctx.progress`, `ctx.log`), on a lease being
 * renewed: written under the live lease only. Bounded: more is refused (400), never cut.
 */
export const REPORT_PROPERTIES = {
  progress: Type.Optional(
    Type.Object(
      {
        value: Type.Number({ description: 'any finite number (by convention a percentage)' }),
        message: Type.Optional(
          Nullable(Type.String({ maxLength: PROGRESS_MESSAGE_MAX_CHARS, description: 'default none' })),
        ),
      },
      {
        additionalProperties: false,
        description: "the handler's latest progress: replaces the attempt's; default unchanged",
      },
    ),
  ),
  logs: Type.Optional(
    Type.Array(Type.String({ maxLength: LOG_LINE_MAX_CHARS }), {
      maxItems: LOG_LINES_MAX,
      description: `log lines since the last report, oldest first: appended; the attempt keeps its last ${LOG_LINES_MAX}`,
    }),
  ),
  logs_dropped: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'lines the worker dropped before it could send them (added to the count); default 0',
    }),
  ),
};

export const RunHeartbeatBody = Type.Object(
  { lease_token: Type.String({ minLength: 1, maxLength: 100 }), ...REPORT_PROPERTIES },
  { additionalProperties: false },
);

export const WorkerHeartbeatBody = Type.Object(
  {
    leases: Type.Array(
      Type.Object(
        {
          run_id: Type.String({ minLength: 1, maxLength: 100 }),
          lease_token: Type.String({ minLength: 1, maxLength: 100 }),
          ...REPORT_PROPERTIES,
        },
        { additionalProperties: false },
      ),
      { maxItems: MAX_HTTP_HEARTBEAT_LEASES },
    ),
  },
  { additionalProperties: false },
);
