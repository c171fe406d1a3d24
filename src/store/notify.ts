/**
 * LISTEN/NOTIFY on the `tock_runs` channel: a write that may have made runs claimable (a tick that
 * materialised some, a trigger, a replay, a release) notifies; idle workers and waiting long-polls
 * listen and claim again. A notification carries nothing and may be lost (a listener reconnecting):
 * listeners also poll, so it only ever shortens a wait.
 */
import type pg from 'pg';
import { RUNS_CHANNEL, runNotify } from './queries/channel.js';
import type { Queryable } from './rows.js';

export { RUNS_CHANNEL };

/** Wakes every listener (in a transaction: at its commit). */
export async function notifyRuns(db: Queryable): Promise<void> {
  await db.query(runNotify);
}

/** Time before a lost or refused listening connection is tried again, ms. */
const RELISTEN_MS = 1000;

/**
 * Calls `onWake` whenever runs may have become claimable. Holds one connection of `pool` for LISTEN
 * (a pool, not a client: after a loss it connects again) and re-listens after a connection loss;
 * the returned function stops listening. `onListening` hears each change between listening (true)
 * and not (false: the connection is lost or could not be made, and a retry is pending).
 */
export async function listen(
  pool: pg.Pool,
  p: { onWake: () => void; onListening?: (up: boolean) => void },
): Promise<() => Promise<void>> {
  const { onWake, onListening = () => {} } = p;
  let stopped = false;
  let client: { c: pg.PoolClient; release: (destroy?: boolean) => void } | null = null;
  let retry: ReturnType<typeof setTimeout> | null = null;
  const again = () => {
    if (stopped) return;
    onListening(false);
    retry = setTimeout(() => void connect(), RELISTEN_MS);
  };
  const connect = async (): Promise<void> => {
    try {
      const c = await pool.connect();
      // Released exactly once, by whichever comes first: the stop, or the connection's loss
      // (which can also arrive after the stop, while the pool shuts down).
      let released = false;
      const release = (destroy?: boolean) => {
        if (released) return;
        released = true;
        c.off('error', onError);
        c.release(destroy);
      };
      const onError = () => {
        release(true);
        if (client?.c === c) client = null;
        again();
      };
      c.on('notification', () => onWake());
      c.on('error', onError);
      await c.query(`LISTEN ${RUNS_CHANNEL}`);
      if (stopped) {
        release();
        return;
      }
      client = { c, release };
      onListening(true);
      onWake(); // anything that arrived while not listening
    } catch {
      again();
    }
  };
  await connect();
  return async () => {
    stopped = true;
    if (retry) clearTimeout(retry);
    const held = client;
    client = null;
    if (held) {
      await held.c.query(`UNLISTEN ${RUNS_CHANNEL}`).catch(() => {});
      held.release();
    }
  };
}
