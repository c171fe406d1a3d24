/**
 * Connection pools. Every pool has a connection timeout (node-postgres waits forever by default),
 * kills sessions left idle inside a transaction, plans prepared statements once, and may pin a
 * schema (tests isolate each file in its own schema).
 */
import pg from 'pg';

export interface PoolOptions {
  /** Connections; size it above the worker's concurrency so heartbeats never queue behind claims. Default 10. */
  max?: number;
  /** Schema for every table (created on migrate). Default: the server's `search_path`. */
  schema?: string;
  /** Application name shown in `pg_stat_activity`. Default `tock`. */
  applicationName?: string;
  /** Milliseconds to wait for a connection before failing. Default 10000. */
  connectionTimeoutMs?: number;
  /**
   * A session idle inside a transaction this long is ended by the server, releasing its locks (a
   * process frozen mid-tick must not hold its jobs for long), ms. Default 10000.
   */
  idleInTransactionMs?: number;
}

/** A schema Tock may use (and `migrate` create): a plain lower-case name, nothing to quote. */
export const PLAIN_SCHEMA = /^[a-z_][a-z0-9_]{0,62}$/;

export function createPool(connectionString: string, options: PoolOptions = {}): pg.Pool {
  const idle = options.idleInTransactionMs ?? 10_000;
  if (!Number.isInteger(idle) || idle < 100)
    throw new Error('idleInTransactionMs must be an integer of at least 100');
  // The hot path's statements are prepared per connection (claim, completion, heartbeat: named
  // queries) and planned once: left to choose, the server plans the claims anew on every call,
  // which costs more than running them (the gated claim of 50 runs: 4.8 ms against 3.2 ms).
  // The setting holds for unnamed statements too (every parameterised query is a prepared
  // statement to the server): each is planned without its parameters' values, so a statement
  // must not rely on them to find its index (`PageShape` in queries/run-reads.ts, issue 21).
  const settings = [
    `-c idle_in_transaction_session_timeout=${idle}`,
    '-c plan_cache_mode=force_generic_plan',
  ];
  if (options.schema !== undefined) {
    if (!PLAIN_SCHEMA.test(options.schema))
      throw new Error(`schema "${options.schema}" is not a plain lower-case name`);
    settings.push(`-c search_path=${options.schema}`);
  }
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName ?? 'tock',
    options: settings.join(' '),
  });
  // An idle client that loses its connection (database restart) emits here; the pool drops it and
  // the next query reconnects. Without a listener the process would crash.
  pool.on('error', () => {});
  return pool;
}

/** Runs `fn` in a transaction on one client; rolls back on any error. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // While a client is checked out the pool does not listen to it: a connection that dies mid-
  // transaction (database restart, idle-in-transaction timeout) would emit an unheard 'error' and
  // crash the process. Note it here; the failed query rejects on its own, and the client is
  // destroyed rather than returned to the pool.
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackErr: Error) => {
      broken ??= rollbackErr;
    });
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
