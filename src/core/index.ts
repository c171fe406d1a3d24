/** The pure domain: no I/O, no imports from the rest of Tock. */
export * from './backoff.js';
export * from './clock.js';
export * from './duration.js';
export * from './errors.js';
export * from './jitter.js';
export * from './job.js';
export * from './keys.js';
export * from './lease.js';
export * from './misfire.js';
export * from './nodes.js';
export * from './periodic.js';
export * from './priority.js';
export * from './run-state.js';
export * from './schedule/schedule.js';
export { instantsOf, offsetAt, transitionsBetween, wallOf } from './schedule/timezone.js';
export * from './text.js';
export * from './wakeups.js';
