/**
 * The Tock library, what `import … from 'tock'` gives: `createTock()` to run the scheduler, a
 * worker and the API inside an application; `Worker` and its handler types for a worker of one's
 * own (through a Tock server with `HttpLeaseSource`); `TockClient` for the HTTP API, whose JSON
 * shapes are the `Api` namespace (`Api.Job`, `Api.Run`); the errors a handler throws or a caller
 * catches; the clocks (`FakeClock` for tests); and `defineJob` with TypeBox's `Type`, a job and its
 * typed handler in one place. `etc/tock.api.md` is this surface as API Extractor reports it
 * (`npm run api` rewrites it; CI fails when it differs).
 */

// TypeBox, for `defineJob`'s payload schemas: the same copy Tock compiles against, so that
// `Static<typeof schema>` is what the handler's `ctx.payload` is.
export { type Static, type TSchema, Type } from 'typebox';
export {
  type BackfillOptions,
  type ClaimOptions,
  type CompleteOptions,
  HttpLeaseSource,
  type HttpLeaseSourceOptions,
  type ListJobsOptions,
  type ListRunsOptions,
  type PageOptions,
  type ReplayDeadOptions,
  TockApiError,
  TockClient,
  type TockClientOptions,
  TockConnectionError,
  type TriggerOptions,
} from './client/index.js';
export type * as Api from './client/types.js';
export {
  type Clock,
  ConflictError,
  type ErrorCode,
  FakeClock,
  type JobInput,
  LeaseLostError,
  type MisfirePolicy,
  NotFoundError,
  PermanentError,
  RetryLaterError,
  type RunState,
  SystemClock,
  TockError,
  ValidationError,
} from './core/index.js';
export {
  createTock,
  type JobChange,
  type Tock,
  type TockDatabase,
  type TockOptions,
  type TockSchedulerOptions,
  type TockWorkerOptions,
} from './runtime/tock.js';
export type { ClaimedRun, Run, UpsertChange } from './store/index.js';
export {
  type DefineJobOptions,
  defineJob,
  type Handler,
  type JobDefinition,
  type JobHandler,
  type RunContext,
  type TypedRunContext,
  Worker,
  type WorkerEvents,
  type WorkerOptions,
} from './worker/index.js';
