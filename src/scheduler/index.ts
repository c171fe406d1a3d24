/** Schedulers materialise runs and reclaim expired leases; they never run handlers. */
export { Reaper, type ReaperEvents, type ReaperOptions } from './reaper.js';
export { TickLoop, type TickLoopEvents, type TickLoopOptions } from './tick.js';
