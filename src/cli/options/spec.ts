/**
 * One row of the options table (`table.ts`) and what is derived from it: commander's `Option`
 * (so `--help` and `docs/cli.md`, which src/cli/reference.ts writes from commander's definitions,
 * say what the table says) and, at compile time, the type of the options object an action
 * receives. A table is keyed by the name commander gives the value (`--max-attempts` →
 * `maxAttempts`); `addOptions` refuses a key that is not that name, so the derived type cannot
 * name a property the action never gets.
 */
import { type Command, Option } from 'commander';

export interface OptionSpec {
  /** commander's flags: `--port <port>`, `-f, --file <file>`, or `--json` for a switch. */
  readonly flags: string;
  readonly description: string;
  /** The environment variable that sets it when the flag is absent. */
  readonly env?: string;
  /** The value when neither the flag nor its variable gives one. */
  readonly default?: unknown;
  /** How `--help` and docs/cli.md show the default when not as the value itself (`30s` for 30000). */
  readonly defaultText?: string;
  /**
   * Turns the argument into the value, throwing commander's InvalidArgumentError; a repeated flag
   * gets the value so far as `previous`.
   */
  readonly parse?: (value: string, previous: never) => unknown;
  /** The only values accepted (not with `parse`). */
  readonly choices?: readonly string[];
  /** The option must be given. */
  readonly required?: true;
}

/** A command's options in the order `--help` lists them, keyed by the name of their value. */
export type OptionTable = Readonly<Record<string, OptionSpec>>;

/** The value an option gives: its parser's result, one of its choices, a string, or a switch's boolean. */
export type OptionValue<S extends OptionSpec> = S extends { parse: (...args: never[]) => infer R }
  ? R
  : S extends { choices: readonly (infer C)[] }
    ? C
    : S['flags'] extends `${string}<${string}>`
      ? string
      : boolean;

/** Whether the action always gets a value: the option has a default or must be given. */
type AlwaysSet<S extends OptionSpec> = S extends { default: unknown } | { required: true } ? true : false;

/** The options object of a command's action, derived from its table. */
export type OptionsOf<T extends OptionTable> = {
  -readonly [K in keyof T as AlwaysSet<T[K]> extends true ? K : never]: OptionValue<T[K]>;
} & {
  -readonly [K in keyof T as AlwaysSet<T[K]> extends true ? never : K]?: OptionValue<T[K]>;
};

/** commander's Option for one row. */
export function toOption(spec: OptionSpec): Option {
  const option = new Option(spec.flags, spec.description);
  if (spec.choices !== undefined) {
    if (spec.parse !== undefined)
      throw new Error(`options table: ${spec.flags} has both choices and a parser`);
    option.choices(spec.choices);
  }
  if (spec.env !== undefined) option.env(spec.env);
  if ('default' in spec) option.default(spec.default, spec.defaultText);
  // commander calls it with the value so far (undefined at first), which is what `previous` holds.
  if (spec.parse !== undefined) option.argParser(spec.parse as (value: string, previous: unknown) => unknown);
  if (spec.required) option.makeOptionMandatory();
  return option;
}

/** Adds every option of `table` to `cmd`, in the table's order. */
export function addOptions(cmd: Command, table: OptionTable): Command {
  for (const [name, spec] of Object.entries(table)) {
    const option = toOption(spec);
    if (option.attributeName() !== name)
      throw new Error(`options table: ${spec.flags} gives "${option.attributeName()}", not "${name}"`);
    cmd.addOption(option);
  }
  return cmd;
}
