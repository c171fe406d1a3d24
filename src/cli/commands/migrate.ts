/** `tock migrate`: applies pending schema migrations and exits. */
import type { Command } from 'commander';
import { defineCommand, type OptionsFor } from '../command.js';

async function migrate(o: OptionsFor<'migrate'>): Promise<void> {
  const [{ createLogger }, { openDatabase }] = await Promise.all([
    import('../../runtime/logger.js'),
    import('../../runtime/database.js'),
  ]);
  const logger = createLogger(o.logFormat, o.logLevel);
  const db = await openDatabase({
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    schema: o.schema,
    logger,
    poolSize: 2,
  });
  await db.close();
  logger.info({ database: db.where }, 'schema is current');
}

export function registerMigrate(program: Command): void {
  defineCommand(program, 'migrate', 'apply pending schema migrations and exit').action(migrate);
}
