/** Workers pull runs under leases and execute handlers. */
export { parseWorkerConfig, readWorkerConfig } from './config.js';
export {
  type DefineJobOptions,
  defineJob,
  isJobDefinition,
  type JobDefinition,
  type JobHandler,
  servingDefinitions,
  type TypedRunContext,
} from './define-job.js';
export {
  DEFAULT_EXEC_TIMEOUT_MS,
  EX_TEMPFAIL,
  type ExecExecutorConfig,
  type ExecExecutorOptions,
  execExecutor,
} from './executors/exec.js';
export {
  DEFAULT_HTTP_TIMEOUT_MS,
  type HttpExecutorConfig,
  type HttpExecutorOptions,
  type HttpMethod,
  httpExecutor,
} from './executors/http.js';
export { OUTPUT_TAIL_BYTES } from './executors/output.js';
export {
  type Handler,
  type LeaseStore,
  type RunContext,
  Worker,
  type WorkerEvents,
  type WorkerOptions,
} from './worker.js';
