/**
 * One PostgreSQL server for the whole test run: the one DATABASE_URL names, or else an embedded
 * server started here (data in a temporary directory, removed afterwards). Each test file then
 * isolates itself in its own schema (see database.ts). Only the projects that need a database
 * (vitest.config.ts) run this setup; they share the one embedded server, stopped after the last.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbedded } from '../../src/store/embedded.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

interface Shared {
  url: Promise<string>;
  users: number;
  stop: () => Promise<void>;
}

/**
 * Vitest loads this file once per project, each time as a new module: the server is kept on
 * `globalThis` (one main process) so that the projects share it.
 */
const KEY = Symbol.for('tock.test.embeddedDatabase');
const registry = globalThis as { [KEY]?: Shared };

function startShared(): Shared {
  let stop = async () => {};
  const url = (async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'tock-test-'));
    const db = await startEmbedded({ dataDir });
    stop = async () => {
      await db.stop();
      await rm(dataDir, { recursive: true, force: true });
    };
    return db.url;
  })();
  return { url, users: 0, stop: () => stop() };
}

export default async function setup(project: TestProject) {
  const given = process.env.DATABASE_URL;
  if (given) {
    project.provide('databaseUrl', given);
    return;
  }
  registry[KEY] ??= startShared();
  const shared = registry[KEY];
  shared.users += 1;
  project.provide('databaseUrl', await shared.url);
  return async () => {
    shared.users -= 1;
    if (shared.users > 0) return;
    delete registry[KEY];
    await shared.stop();
  };
}
