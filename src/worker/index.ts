/** Workers pull runs under leases and execute handlers. */
export { HttpLeaseStore, type HttpLeaseStoreOptions } from './http-store.js';
export {
  type Handler,
  type LeaseStore,
  type RunContext,
  Worker,
  type WorkerEvents,
  type WorkerOptions,
} from './worker.js';
