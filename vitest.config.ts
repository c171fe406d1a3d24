import { defineConfig } from 'vitest/config';

/**
 * Four projects, cheapest first (AGENTS.md, "Tests"): `unit` needs no database (pure code, and the
 * tests of other folders that need none); `store` is the store's contract against PostgreSQL;
 * `integration` runs the API, worker, scheduler, client, CLI and runtime against a database in the
 * test process; `e2e` starts real processes (`bin/tock.js`, `npm pack`, the example workers of
 * other languages). Only the last three get the
 * database of test/setup/global-database.ts.
 */
const UNIT = [
  'test/core/**/*.test.ts',
  'test/api/plugins/*.test.ts',
  // A pool pointed where nothing answers: the database is down on purpose.
  'test/api/database-down.test.ts',
  'test/cli/format/*.test.ts',
  'test/console/*.test.ts',
  'test/docs/*.test.ts',
  'test/runtime/handlers-module.test.ts',
  'test/runtime/logger.test.ts',
  'test/scheduler/clock-sync.test.ts',
  'test/scripts/*.test.ts',
  'test/worker/completer.test.ts',
  'test/worker/executor.test.ts',
  'test/worker/lease-keeper.test.ts',
  'test/worker/producer.test.ts',
  'test/worker/config.test.ts',
  'test/worker/define-job.test.ts',
  'test/worker/executors/*.test.ts',
];
const DATABASE = ['test/setup/global-database.ts'];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: more workers than that only adds contention on the shared PostgreSQL.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT } },
      { extends: true, test: { name: 'store', include: ['test/store/**/*.test.ts'], globalSetup: DATABASE } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...UNIT, 'test/store/**', 'test/e2e/**', 'test/examples/**', '**/node_modules/**'],
          globalSetup: DATABASE,
        },
      },
      {
        extends: true,
        // test/examples: the workers in other languages of examples/workers, against `tock server`.
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts', 'test/examples/**/*.test.ts'],
          globalSetup: DATABASE,
        },
      },
    ],
  },
});
