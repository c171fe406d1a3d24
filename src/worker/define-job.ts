/**
 * `defineJob`: a job and its handler in one place, the payload's type flowing from its TypeBox
 * schema into the handler (`ctx.payload` is `Static<typeof schema>`). The definition carries what
 * is upserted (`job`, a `JobInput` whose handler name is the job id unless given and whose
 * `payloadSchema` is the schema as JSON) and the handler a worker serves under that name, so no
 * string has to be kept in sync between the two.
 *
 * The type holds at run time too: the schema is stored with the job, so a trigger with a payload
 * that does not match it is refused before a run is written; and the handler checks each run's
 * payload against the schema it was defined with before calling the function, dead-lettering
 * (`PermanentError`) a run whose payload does not match — one triggered before the job's schema
 * changed, or under another version of the definition.
 */
import type { Static, TSchema, TUnknown } from 'typebox';
import {
  checkPayloadAgainst,
  type JobInput,
  PermanentError,
  ValidationError,
  validateId,
  validateJob,
} from '../core/index.js';
import type { Handler, RunContext } from './executor.js';

/** What a defined job's handler receives: the run's context, its payload of the schema's type. */
export type TypedRunContext<P> = Omit<RunContext, 'payload'> & { payload: P };

/** A defined job's handler (see `Handler` for what its result and errors mean). */
export type JobHandler<P> = (ctx: TypedRunContext<P>) => unknown | Promise<unknown>;

/** A job in code: its definition (every `JobInput` field but these four) and its handler. */
export interface DefineJobOptions<S extends TSchema = TUnknown>
  extends Omit<JobInput, 'jobId' | 'handler' | 'payload' | 'payloadSchema'> {
  /** The job's id, unique in its tenant: 1-200 of `A-Z a-z 0-9 . _ : -`, not `.` or `..`. */
  id: string;
  /**
   * The payload's TypeBox schema (`Type.Object({ … })`): the handler's `ctx.payload` has its type,
   * and it is stored with the job (`payload_schema`), so a trigger whose payload does not match is
   * refused (HTTP 400). Default: none, any JSON payload (`ctx.payload` is `unknown`).
   */
  payload?: S;
  /**
   * The payload of the job's scheduled runs (the job's `payload`), which must match `payload`.
   * Default `{}`.
   */
  defaultPayload?: NoInfer<Static<S>>;
  /** The name the worker serves the handler under (the job's `handler`). Default: `id`. */
  handlerName?: string;
  /** Runs each run of the job. */
  handler: JobHandler<Static<S>>;
}

/** What `defineJob` makes: give a list of them to `createTock({ jobs })` or export them for `tock worker --handlers`. */
export interface JobDefinition {
  /** Tells a definition from other exports of a module. */
  readonly kind: 'tock.job';
  /** The job as it is upserted. */
  readonly job: JobInput;
  /** The handler's name: `job.handler`. */
  readonly handlerName: string;
  /** The handler as a worker serves it: checks the payload against the schema, then calls yours. */
  readonly handler: Handler;
}

/**
 * A job and its handler together, checked now: a definition that `PUT /v1/jobs` would refuse (a bad
 * schedule, a `defaultPayload` that fails its own schema, …) throws a `ValidationError` here.
 *
 * @example
 * ```ts
 * const report = defineJob({
 *   id: 'nightly-report',
 *   schedule: '0 3 * * *',
 *   timezone: 'Europe/Berlin',
 *   payload: Type.Object({ recipients: Type.Array(Type.String()) }),
 *   defaultPayload: { recipients: ['ops@example.com'] },
 *   handler: async (ctx) => `sent to ${ctx.payload.recipients.length}`,
 * });
 * ```
 */
export function defineJob<S extends TSchema = TUnknown>(options: DefineJobOptions<S>): JobDefinition {
  const { id, payload: schema, defaultPayload, handlerName, handler, ...fields } = options;
  if (typeof handler !== 'function')
    throw new ValidationError(`job "${id}": handler must be a function`, { field: 'handler' });
  const name = validateId(handlerName ?? id, 'handler');
  // The schema as JSON: TypeBox's own (non-enumerable) markers are left behind.
  const payloadSchema = schema === undefined ? null : (JSON.parse(JSON.stringify(schema)) as unknown);
  const job: JobInput = { ...fields, jobId: id, handler: name, payload: defaultPayload, payloadSchema };
  if (defaultPayload === undefined) delete job.payload;
  try {
    validateJob(job);
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(`job "${id}": ${err.message}`, err.details);
    throw err;
  }
  const typed = handler as Handler;
  const checked: Handler =
    payloadSchema === null
      ? typed
      : (ctx) => {
          try {
            checkPayloadAgainst(payloadSchema, ctx.payload);
          } catch (err) {
            if (err instanceof ValidationError)
              throw new PermanentError(`job "${id}" was defined with another payload schema: ${err.message}`);
            throw err;
          }
          return typed(ctx);
        };
  return Object.freeze({ kind: 'tock.job' as const, job, handlerName: name, handler: checked });
}

/** Whether `value` is a `defineJob` result (from this copy of Tock or another). */
export function isJobDefinition(value: unknown): value is JobDefinition {
  if (typeof value !== 'object' || value === null) return false;
  const d = value as Partial<JobDefinition>;
  return (
    d.kind === 'tock.job' &&
    typeof d.handler === 'function' &&
    typeof d.handlerName === 'string' &&
    typeof d.job === 'object' &&
    d.job !== null
  );
}

/**
 * The jobs and handlers of a list of definitions with `handlers` beside them: each name once (a
 * job id or handler name twice is a `ValidationError` saying which).
 */
export function servingDefinitions(
  definitions: readonly JobDefinition[],
  handlers: Readonly<Record<string, Handler>> = {},
): { jobs: JobInput[]; handlers: Record<string, Handler> } {
  const merged: Record<string, Handler> = { ...handlers };
  const ids = new Set<string>();
  for (const [i, d] of definitions.entries()) {
    if (!isJobDefinition(d))
      throw new ValidationError(`jobs[${i}] is not a job definition: make it with defineJob()`, {
        field: `jobs[${i}]`,
      });
    if (ids.has(d.job.jobId))
      throw new ValidationError(`job "${d.job.jobId}" is defined twice`, { field: `jobs[${i}]` });
    ids.add(d.job.jobId);
    if (Object.hasOwn(merged, d.handlerName))
      throw new ValidationError(
        `handler "${d.handlerName}" of job "${d.job.jobId}" is defined twice: ${Object.hasOwn(handlers, d.handlerName) ? 'also in handlers' : 'by another job'}`,
        { field: `jobs[${i}]` },
      );
    merged[d.handlerName] = d.handler;
  }
  return { jobs: definitions.map((d) => d.job), handlers: merged };
}
