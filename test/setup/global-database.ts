/**
 * One PostgreSQL server for the whole test run: the one DATABASE_URL names, or else an embedded
 * server started here (data in a temporary directory, removed afterwards). Each test file then
 * isolates itself in its own schema (see database.ts).
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

export default async function setup(project: TestProject) {
  const given = process.env.DATABASE_URL;
  if (given) {
    project.provide('databaseUrl', given);
    return;
  }
  const dataDir = await mkdtemp(path.join(tmpdir(), 'tock-test-'));
  const db = await startEmbedded({ dataDir });
  project.provide('databaseUrl', db.url);
  return async () => {
    await db.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
}
