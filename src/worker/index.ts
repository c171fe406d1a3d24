/** Workers pull runs under leases and execute handlers. */
export { type Handler, type RunContext, Worker, type WorkerEvents, type WorkerOptions } from './worker.js';
