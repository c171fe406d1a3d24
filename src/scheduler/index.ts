/** Schedulers materialise runs and reclaim expired leases; they never run handlers. */
export { ClockSync, type ClockSyncEvents, type ClockSyncOptions } from './clock-sync.js';
export {
  type DeliveryAttempt,
  fetchSend,
  Notifier,
  type NotifierEvents,
  type NotifierOptions,
  type NotifierStore,
  signDelivery,
  type WebhookRequest,
  type WebhookSend,
} from './notifier.js';
export {
  PRUNE_LEASE,
  type PruneBatchEvent,
  Pruner,
  type PrunerEvents,
  type PrunerOptions,
  type PrunerStore,
} from './pruner.js';
export { Reaper, type ReaperEvents, type ReaperOptions } from './reaper.js';
export {
  ShardManager,
  type ShardManagerEvents,
  type ShardManagerOptions,
  type ShardStore,
} from './shards.js';
export { TickLoop, type TickLoopEvents, type TickLoopOptions } from './tick.js';
