// `text` as Biome formats a Markdown file at `file` (what `npm run format` leaves): shared by
// scripts/gen-docs.mjs, which writes the generated references, and the test that checks them.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/** @param {string} text @param {string} file @returns {string} */
export function formatMarkdown(text, file) {
  const biome = spawnSync(
    path.join(ROOT, 'node_modules/.bin/biome'),
    ['format', `--stdin-file-path=${file}`],
    {
      cwd: ROOT,
      input: text,
      encoding: 'utf8',
    },
  );
  if (biome.status !== 0) throw new Error(`biome format ${file} failed: ${biome.stderr}`);
  return biome.stdout;
}
