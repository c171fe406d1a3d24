/**
 * The bodies and answers of the retention routes (`routes/retention.ts`) as TypeBox schemas:
 * strict bodies, a description on every field for the OpenAPI document and docs/http-api.md.
 */
import { Type } from 'typebox';
import { DEFAULT_RETENTION, RETENTION_STATES } from '../core/index.js';
import { Instant } from './schemas.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

const value = (state: string) =>
  Type.String({
    maxLength: 32,
    description: `how long a run that ended ${state} is kept after it ended: a duration from 1s to 366d (e.g. 7d, 12h) or "forever"`,
  });

const byState = <T extends (state: string) => Parameters<typeof Type.Object>[0][string]>(field: T) =>
  Object.fromEntries(RETENTION_STATES.map((s) => [s, field(s)])) as Record<
    (typeof RETENTION_STATES)[number],
    ReturnType<T>
  >;

/** `PUT /v1/retention`: the tenant's whole settings (a state not given takes the default: PUT replaces). */
export const RetentionBody = Type.Object(
  byState((s) => Type.Optional(value(s))),
  {
    additionalProperties: false,
    description: `the tenant's retention by state; a state left out takes the default (${RETENTION_STATES.map((s) => `${s} ${DEFAULT_RETENTION[s]}`).join(', ')})`,
  },
);

export const Retention = Type.Object({
  retention: Type.Object(byState(value), {
    description: "in force for the tenant's runs, by state (a job's `retention` overrides it for its runs)",
  }),
  set: Type.Object(
    byState((s) => Type.Optional(value(s))),
    { description: 'what the tenant set (the rest are defaults)' },
  ),
  defaults: Type.Object(byState(value), { description: 'the built-in defaults' }),
});

/** `POST /v1/runs/prune`. */
export const PruneBody = Type.Object(
  {
    dry_run: Type.Optional(
      Type.Boolean({ description: 'count the runs that would be deleted, delete none; default false' }),
    ),
    cursor: Type.Optional(
      Type.String({
        maxLength: 400,
        description: "the previous answer's cursor, to go on where it stopped; default: from the oldest run",
      }),
    ),
  },
  { additionalProperties: false },
);

const Count = (state: string) => Type.Integer({ description: `runs that ended ${state}` });

export const PruneAnswer = Type.Object({
  dry_run: Type.Boolean(),
  runs: Type.Object(byState(Count), {
    description: 'runs deleted (dry run: that would be), with their attempts, by the state they ended in',
  }),
  scanned: Type.Integer({ description: 'runs looked at' }),
  horizon: Nullable(
    Instant(
      'runs scheduled before this instant are looked at (now minus the shortest retention in force); null: every run is kept forever',
    ),
  ),
  cursor: Nullable(Type.String({ description: 'send it back to go on; null: every run has been looked at' })),
});
