/**
 * `GET /v1/schedule`: the next slots of a schedule expression in a timezone, each with its local
 * time and daylight-saving notes — what `tock schedule` prints, from the same core function
 * (`previewSchedule`), as JSON for the console. Pure computation: no database, nothing of the
 * tenant's is read; at most `MAX_API_PREVIEW_SLOTS` slots.
 */
import { type Static, Type } from 'typebox';
import { parseInstant, previewSchedule, ValidationError } from '../../core/index.js';
import type { RoutePlugin } from '../types.js';
import { errors } from './shared.js';

/**
 * A preview reaches at most this many years past `from`, and `from` is at most this far from now:
 * each (zone, year) a preview crosses costs a table of about 1,500 offset lookups, computed on the
 * event loop, and any reader key may ask (a yearly slot × 100 at a far year was a century of tables,
 * seconds of a blocked server, and a way to evict the scheduler's cached years).
 */
const PREVIEW_YEARS = 5;
const PREVIEW_SPAN_MS = PREVIEW_YEARS * 366 * 86_400_000;

/** Most slots one request computes. */
export const MAX_API_PREVIEW_SLOTS = 100;

const ScheduleQuery = Type.Object(
  {
    expression: Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'cron (5 or 6 fields), a macro such as @daily, "@every <duration>" or "@at <instant>"',
    }),
    timezone: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'IANA timezone; default UTC' }),
    ),
    count: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,3}$',
        description: `how many slots, 1-${MAX_API_PREVIEW_SLOTS}; default 10`,
      }),
    ),
    from: Type.Optional(
      Type.String({ maxLength: 40, description: 'slots strictly after this ISO-8601 instant; default now' }),
    ),
  },
  { additionalProperties: false },
);

const ScheduleAnswer = Type.Object({
  expression: Type.String(),
  timezone: Type.String(),
  from: Type.String({ format: 'date-time', description: 'the slots are strictly after this instant' }),
  slots: Type.Array(
    Type.Object({
      at: Type.String({ format: 'date-time', description: 'the slot, UTC' }),
      local: Type.String({
        description: 'its local time in the timezone, with the offset (2026-03-29T03:00:00+02:00)',
      }),
      notes: Type.Array(Type.String(), {
        description:
          'what daylight saving did since the slot before, or to this one (a skipped or repeated local time)',
      }),
    }),
  ),
  ended: Type.Boolean({ description: 'the schedule has no slot after the last one listed' }),
  cut: Type.Boolean({
    description: `the next slot is more than ${PREVIEW_YEARS} years after from: fewer slots than asked, and the schedule goes on`,
  }),
});

export const scheduleRoutes: RoutePlugin = async (app, { clock }) => {
  app.get(
    '/v1/schedule',
    {
      config: { permission: 'read' },
      schema: {
        summary:
          'The next slots of a schedule expression, with daylight-saving notes (computed; nothing stored)',
        tags: ['jobs'],
        querystring: ScheduleQuery,
        response: { 200: ScheduleAnswer, ...errors },
      },
    },
    async (request): Promise<Static<typeof ScheduleAnswer>> => {
      const q = request.query;
      const count = q.count === undefined ? 10 : Number(q.count);
      if (count < 1 || count > MAX_API_PREVIEW_SLOTS)
        throw new ValidationError(`count must be an integer from 1 to ${MAX_API_PREVIEW_SLOTS}`, {
          field: 'count',
        });
      const now = clock.nowMs();
      const fromMs = q.from === undefined ? now : parseInstant(q.from, 'from');
      if (Math.abs(fromMs - now) > PREVIEW_SPAN_MS)
        throw new ValidationError(`from must be within ${PREVIEW_YEARS} years of now`, { field: 'from' });
      const timezone = q.timezone ?? 'UTC';
      const { slots, ended, cut } = previewSchedule({
        expression: q.expression,
        timezone,
        count,
        fromMs,
        untilMs: fromMs + PREVIEW_SPAN_MS,
      });
      return {
        expression: q.expression,
        timezone,
        from: new Date(fromMs).toISOString(),
        slots: slots.map((s) => ({ at: new Date(s.at).toISOString(), local: s.local, notes: s.notes })),
        ended,
        cut,
      };
    },
  );
};
