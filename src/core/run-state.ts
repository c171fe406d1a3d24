/**
 * The run state machine. `pending → running → succeeded | pending (retry) | dead`;
 * `dead → pending` only by an operator's replay; `pending → cancelled` when its job is deleted or
 * an operator cancels it, `running → cancelled` when an operator cancels it (its lease revoked);
 * `pending → skipped` when its slot arrived while an earlier run of a job with overlap `skip` ran.
 */
export const RUN_STATES = ['pending', 'running', 'succeeded', 'dead', 'cancelled', 'skipped'] as const;
export type RunState = (typeof RUN_STATES)[number];

export const RUN_TRANSITIONS: Readonly<Record<RunState, readonly RunState[]>> = {
  pending: ['running', 'cancelled', 'skipped'],
  running: ['succeeded', 'pending', 'dead', 'cancelled'],
  succeeded: [],
  dead: ['pending'],
  cancelled: [],
  skipped: [],
};

export function isRunState(value: string): value is RunState {
  return (RUN_STATES as readonly string[]).includes(value);
}

/**
 * How an attempt ended. `released` (worker shutdown), `lease_expired` and `cancelled` (an operator
 * cancelled the run while it ran) do not mean the handler failed.
 */
export type AttemptOutcome = 'succeeded' | 'failed' | 'lease_expired' | 'released' | 'cancelled';
