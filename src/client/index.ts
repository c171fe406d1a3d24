/** The HTTP client: `TockClient` and the API's JSON shapes (the CLI and remote workers use it). */
export {
  type ClaimOptions,
  type CompleteOptions,
  DEFAULT_TIMEOUT_MS,
  type ListRunsOptions,
  type PageOptions,
  TockApiError,
  TockClient,
  type TockClientOptions,
  TockConnectionError,
  type TriggerOptions,
} from './client.js';
export type * from './types.js';
