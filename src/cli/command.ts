/**
 * How each command file declares a command: its words, description and arguments here, its
 * options from the one table (options/table.ts), so no command adds an option the table (and so
 * docs/cli.md) does not have.
 */
import type { Command } from 'commander';
import { addOptions, type OptionsOf } from './options/spec.js';
import { type CommandPath, OPTIONS, type Options } from './options/table.js';

/** The options object the action of the command at `path` receives. */
export type OptionsFor<P extends CommandPath> = OptionsOf<Options[P]>;

/**
 * Adds the command `path` (`'jobs get'`: `get` under `parent`, which is `tock jobs`) with its
 * description, its arguments (`[['<job_id>', 'the job']]`) and its options from the table.
 */
export function defineCommand(
  parent: Command,
  path: CommandPath,
  description: string,
  args: readonly (readonly [name: string, description: string])[] = [],
): Command {
  const cmd = parent.command(path.split(' ').at(-1) ?? path).description(description);
  for (const [name, text] of args) cmd.argument(name, text);
  return addOptions(cmd, OPTIONS[path]);
}
