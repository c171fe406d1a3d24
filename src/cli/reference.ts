/**
 * The command-line reference (`docs/cli.md`), written from the commander definitions that parse
 * argv (whose options come from the table in options/table.ts), so the page cannot say something
 * the binary does not do. Deterministic: commands and
 * options in the order they are defined, defaults as `--help` shows them (a described default
 * such as `examples/jobs.yaml`, never a path of this machine), no dates. `npm run docs` writes the
 * page; `test/docs/reference.test.ts` fails when the committed page differs.
 */
import type { Argument, Command, Option } from 'commander';

const GENERATED = '<!-- Generated from src/cli (commander definitions) by `npm run docs`. Do not edit. -->';

/** A table cell: one line, pipes escaped. */
function cell(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replaceAll('|', '\\|');
}

function code(text: string): string {
  return `\`${text}\``;
}

function table(header: string[], rows: string[][]): string[] {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ];
}

/** The default as `--help` shows it: its description when it has one, else the value. */
function defaultOf(option: Option): string {
  if (option.defaultValueDescription !== undefined) return code(option.defaultValueDescription);
  const value: unknown = option.defaultValue;
  if (value === undefined) return '';
  if (value === false) return 'off';
  return code(typeof value === 'string' ? value : JSON.stringify(value));
}

function describeOption(option: Option): string {
  const parts = [option.description];
  if (option.argChoices) parts.push(`(one of ${option.argChoices.map(code).join(', ')})`);
  if (option.mandatory) parts.push('(required)');
  return parts.join(' ');
}

function describeArgument(arg: Argument): string {
  return `${arg.description}${arg.required ? '' : ' (optional)'}`;
}

/** The command's words after `tock`, e.g. `jobs put`. */
function pathOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

function walk(cmd: Command): Command[] {
  return cmd.commands.flatMap((c) => [c, ...walk(c)]);
}

/** The anchor GitHub gives a heading such as "tock jobs put". */
function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replaceAll(' ', '-');
}

function section(cmd: Command): string[] {
  const name = `tock ${pathOf(cmd)}`;
  const out = [`## ${name}`, '', cmd.description(), '', '```', `${name} ${cmd.usage()}`, '```', ''];
  if (cmd.commands.length > 0) {
    out.push(
      ...table(
        ['command', 'what it does'],
        cmd.commands.map((c) => [
          `[${code(`${name} ${c.name()}`)}](#${anchor(`tock ${pathOf(c)}`)})`,
          c.description(),
        ]),
      ),
      '',
    );
  }
  if (cmd.registeredArguments.length > 0) {
    out.push(
      ...table(
        ['argument', 'meaning'],
        cmd.registeredArguments.map((a) => [code(a.name()), describeArgument(a)]),
      ),
      '',
    );
  }
  const options = cmd.options.filter((o) => !o.hidden);
  if (options.length > 0) {
    out.push(
      ...table(
        ['option', 'env', 'default', 'meaning'],
        options.map((o) => [code(o.flags), o.envVar ? code(o.envVar) : '', defaultOf(o), describeOption(o)]),
      ),
      '',
    );
  }
  return out;
}

/** Every environment variable, with the options it sets and where. */
function environment(commands: Command[]): string[] {
  const byEnv = new Map<string, Map<string, string[]>>();
  for (const cmd of commands) {
    for (const o of cmd.options) {
      if (!o.envVar) continue;
      const flags = byEnv.get(o.envVar) ?? new Map<string, string[]>();
      byEnv.set(o.envVar, flags);
      const where = flags.get(o.long ?? o.flags) ?? [];
      flags.set(o.long ?? o.flags, where);
      where.push(pathOf(cmd));
    }
  }
  const rows = [...byEnv.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([env, flags]) => [
      code(env),
      [...flags.entries()]
        .map(([flag, where]) => `${code(flag)} of ${where.map(code).join(', ')}`)
        .join('; '),
    ]);
  return [
    '## Environment variables',
    '',
    'An option given on the command line wins over its environment variable, which wins over the default. An option',
    'whose `env` cell above is empty is set on the command line only.',
    '',
    ...table(['variable', 'sets'], rows),
    '',
  ];
}

/** `docs/cli.md`: every command of `program`, its arguments and options, and the environment variables. */
export function cliReference(program: Command): string {
  const commands = walk(program);
  const out = [
    GENERATED,
    '',
    '# The `tock` command',
    '',
    program.description(),
    '',
    'Run `tock <command> --help` for the same facts in the terminal. Durations are written `250ms`, `90s`, `5m`,',
    '`1h30m`, `2d`. How to get the command: [README](../README.md#install).',
    '',
    ...table(
      ['command', 'what it does'],
      commands.map((c) => [
        `[${code(`tock ${pathOf(c)}`)}](#${anchor(`tock ${pathOf(c)}`)})`,
        c.description(),
      ]),
    ),
    '',
    ...commands.flatMap(section),
    ...environment(commands),
  ];
  return `${out.join('\n').trimEnd()}\n`;
}
