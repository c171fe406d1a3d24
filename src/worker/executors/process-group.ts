/**
 * The process groups the command executor starts, and how they are stopped: SIGTERM to the whole
 * group, then SIGKILL after a grace to whatever is left. A group is tracked from its start until
 * its SIGKILL is sent (or it is found gone), so that if the worker process exits first (after a
 * graceful stop, or a crash) the exit hook kills it on the way out rather than leaving it running
 * with no one to report it.
 */

/** Signals a whole process group; one that is already gone is not an error. */
function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/**
 * Process groups started here that may still have members: those of running commands, and those
 * waiting for their SIGKILL.
 */
const liveGroups = new Set<number>();
let exitHook = false;

/** Tracks a group just started, so that it is killed if the worker exits before it is stopped. */
export function trackGroup(pgid: number): void {
  liveGroups.add(pgid);
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const group of liveGroups) signalGroup(group, 'SIGKILL');
  });
}

/**
 * SIGTERM now, SIGKILL after `graceMs` to whatever is left. The SIGKILL timer does not keep the
 * worker alive: if it exits first, the exit hook sends the SIGKILL at once. No pid (the command
 * never started): nothing to stop.
 */
export function stopGroup(pgid: number | undefined, graceMs: number): void {
  if (pgid === undefined) return;
  if (!signalGroup(pgid, 'SIGTERM')) {
    liveGroups.delete(pgid);
    return;
  }
  setTimeout(() => {
    signalGroup(pgid, 'SIGKILL');
    liveGroups.delete(pgid);
  }, graceMs).unref();
}
