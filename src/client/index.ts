/**
 * The HTTP client: `TockClient`, the API's JSON shapes (the CLI uses them) and `HttpLeaseSource`, the
 * lease contract over HTTP (remote workers use it).
 */
export {
  type BackfillOptions,
  type ClaimOptions,
  DEFAULT_TIMEOUT_MS,
  type DelayOptions,
  type ListJobsOptions,
  type ListRunsOptions,
  type PageOptions,
  type ReplayDeadOptions,
  TockClient,
  type TockClientOptions,
  type TriggerOptions,
} from './client.js';
export {
  CLAIM_RETRIES,
  CLAIM_RETRY_BACKOFF_MS,
  CLAIM_RETRY_WINDOW_MS,
  DEFAULT_CLAIM_TIMEOUT_MS,
  DEFAULT_RESULT_LINGER_MS,
  type HttpClaimParams,
  HttpLeaseSource,
  type HttpLeaseSourceOptions,
} from './lease-source.js';
export type { CompleteOptions, ResultOptions } from './results.js';
export { TockApiError, TockConnectionError } from './transport.js';
export type * from './types.js';
