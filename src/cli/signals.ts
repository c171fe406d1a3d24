/** How the long-running commands (`tock dev`, `server`, `worker`) learn that they should stop. */

/**
 * Installs SIGINT/SIGTERM handling before anything starts, so a signal during start-up is not
 * lost: the returned promise resolves on the first signal; a second signal exits at once.
 */
export function stopSignal(log: (msg: string) => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (received) {
        log(`${signal} again: exiting now`);
        process.exit(130);
      }
      received = true;
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
