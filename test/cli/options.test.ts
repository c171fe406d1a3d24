/**
 * The options table (src/cli/options/table.ts) is the one source of the CLI's options: every
 * command has exactly its rows, in order, with the same flags, description, variable, default,
 * choices and parser; docs/cli.md lists every row in its command's section; and the options
 * object each action receives has the type the table says. No database, no binary.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command, InvalidArgumentError, type Option } from 'commander';
import { describe, expect, expectTypeOf, test } from 'vitest';
import type { OptionsFor } from '../../src/cli/command.js';
import { schedulerSettings } from '../../src/cli/commands/service.js';
import { workerSettings } from '../../src/cli/commands/worker.js';
import { buildProgram } from '../../src/cli/main.js';
import { addOptions, type OptionSpec, toOption } from '../../src/cli/options/spec.js';
import { OPTIONS } from '../../src/cli/options/table.js';
import { cliReference } from '../../src/cli/reference.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TABLE: [string, Record<string, OptionSpec>][] = Object.entries(OPTIONS);

function walk(cmd: Command): Command[] {
  return cmd.commands.flatMap((c) => [c, ...walk(c)]);
}

function pathOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** The cells of the option rows in the `## tock <command>` section of a reference page, by flags. */
function optionRows(page: string, command: string): Map<string, string[]> {
  const start = page.indexOf(`\n## tock ${command}\n`);
  if (start < 0) return new Map();
  const end = page.indexOf('\n## ', start + 1);
  const section = page.slice(start, end < 0 ? undefined : end);
  const rows = new Map<string, string[]>();
  for (const line of section.split('\n')) {
    if (!line.startsWith('| `-')) continue;
    const cells = line
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((c) => c.trim().replaceAll('\\|', '|'));
    rows.set(cells[0] ?? '', cells);
  }
  return rows;
}

/** The default cell a row should have: as `--help` shows it, `off` for a switch, empty for none. */
function defaultCell(spec: OptionSpec): string {
  if (spec.defaultText !== undefined) return `\`${spec.defaultText}\``;
  if (!('default' in spec) || spec.default === undefined) return '';
  if (spec.default === false) return 'off';
  return `\`${typeof spec.default === 'string' ? spec.default : JSON.stringify(spec.default)}\``;
}

/** Every row of the table that `page` leaves out or misstates, as `tock <command> <flags>: why`. */
function missingFromReference(page: string): string[] {
  const problems: string[] = [];
  for (const [command, table] of TABLE) {
    const rows = optionRows(page, command);
    for (const spec of Object.values(table)) {
      const where = `tock ${command} ${spec.flags}`;
      const cells = rows.get(`\`${spec.flags}\``);
      if (cells === undefined) {
        problems.push(`${where}: no row`);
        continue;
      }
      const [, env, def, meaning] = cells;
      if (env !== (spec.env ? `\`${spec.env}\`` : '')) problems.push(`${where}: env cell "${env}"`);
      if (def !== defaultCell(spec)) problems.push(`${where}: default cell "${def}"`);
      if (!meaning?.startsWith(spec.description)) problems.push(`${where}: meaning "${meaning}"`);
      for (const choice of spec.choices ?? [])
        if (!meaning?.includes(`\`${choice}\``)) problems.push(`${where}: choice ${choice} not listed`);
      if (spec.required && !meaning?.endsWith('(required)')) problems.push(`${where}: not marked required`);
      if (spec.env && !page.includes(`| \`${spec.env}\``)) problems.push(`${where}: ${spec.env} not listed`);
    }
  }
  return problems;
}

describe('the options table', () => {
  test('every command has exactly its rows, in order, as commander options', () => {
    const program = buildProgram();
    const withOptions = walk(program).filter((c) => c.options.length > 0);
    expect(withOptions.map(pathOf).sort()).toEqual(TABLE.map(([command]) => command).sort());
    for (const cmd of withOptions) {
      const table = OPTIONS[pathOf(cmd) as keyof typeof OPTIONS] as Record<string, OptionSpec>;
      expect(
        cmd.options.map((o) => o.attributeName()),
        pathOf(cmd),
      ).toEqual(Object.keys(table));
      for (const [name, spec] of Object.entries(table)) {
        const o = cmd.options.find((x) => x.attributeName() === name);
        const where = `tock ${pathOf(cmd)} ${spec.flags}`;
        expect(o?.flags, where).toBe(spec.flags);
        expect(o?.description, where).toBe(spec.description);
        expect(o?.envVar, where).toBe(spec.env);
        expect(o?.defaultValue, where).toBe(spec.default);
        expect(o?.defaultValueDescription, where).toBe(spec.defaultText);
        expect(o?.argChoices, where).toEqual(spec.choices === undefined ? undefined : [...spec.choices]);
        expect(o?.mandatory, where).toBe(spec.required === true);
        if (spec.parse) expect(o?.parseArg, where).toBe(spec.parse);
      }
    }
  });

  test('docs/cli.md, committed and generated, lists every option of every command in the table', () => {
    const committed = readFileSync(path.join(ROOT, 'docs/cli.md'), 'utf8');
    expect(missingFromReference(committed)).toEqual([]);
    expect(missingFromReference(cliReference(buildProgram()))).toEqual([]);
  });

  test('a page without one of the rows, or with a wrong cell, is caught', () => {
    const page = cliReference(buildProgram());
    const dropped = page.replace(/^\| `--idempotency-key <key>` .*\n/m, '');
    expect(missingFromReference(dropped)).toEqual(['tock jobs trigger --idempotency-key <key>: no row']);
    const wrongEnv = page.replace('| `--tick-batch <n>` | `TOCK_TICK_BATCH` |', '| `--tick-batch <n>` | |');
    expect(missingFromReference(wrongEnv)).toEqual(['tock dev --tick-batch <n>: env cell ""']);
  });

  test('a program built without one row of the table is caught', () => {
    const program = buildProgram();
    const dlqList = walk(program).find((c) => pathOf(c) === 'dlq list');
    const job = dlqList?.options.findIndex((o) => o.long === '--job') ?? -1;
    expect(job).toBeGreaterThanOrEqual(0);
    // commander's list of a command's options is a plain array behind its readonly type.
    (dlqList?.options as Option[] | undefined)?.splice(job, 1);
    expect(missingFromReference(cliReference(program))).toEqual(['tock dlq list --job <job_id>: no row']);
  });

  test('a row whose key is not the name commander gives its value is refused', () => {
    expect(() =>
      addOptions(new Command('x'), { maxAttempt: { flags: '--max-attempts <n>', description: 'd' } }),
    ).toThrow('options table: --max-attempts <n> gives "maxAttempts", not "maxAttempt"');
    expect(() =>
      toOption({ flags: '--a <b>', description: 'd', choices: ['x'], parse: (v: string) => v }),
    ).toThrow('has both choices and a parser');
  });

  test('a row becomes an option that parses, defaults and reads its variable as the table says', () => {
    const cmd = addOptions(new Command('x').exitOverride(), OPTIONS.worker);
    process.env.TOCK_TENANTS = 'a,b';
    try {
      cmd.parse(['--tenant', 'c', '--concurrency', '3'], { from: 'user' });
    } finally {
      delete process.env.TOCK_TENANTS;
    }
    const o = cmd.opts<OptionsFor<'worker'>>();
    expect(o.tenant).toEqual(['c']);
    expect(o.concurrency).toBe(3);
    expect(o.grace).toBe(30_000);
    expect(o.pool).toBe('default');
    expect(o.handlers).toBeUndefined();
    expect(() => OPTIONS.worker.concurrency.parse('0')).toThrow(InvalidArgumentError);
  });

  test('--aging-step (TOCK_AGING_STEP) is a duration from 1s to 1d on tock server, dev and worker', () => {
    for (const command of ['server', 'dev', 'worker'] as const) {
      const cmd = addOptions(new Command(command).exitOverride(), OPTIONS[command]);
      cmd.parse(['--aging-step', '90s'], { from: 'user' });
      expect(cmd.opts<OptionsFor<typeof command>>().agingStep, command).toBe(90_000);
      // The value the action gets is the step the runtime gives its store.
      const runtime =
        command === 'worker'
          ? workerSettings(cmd.opts<OptionsFor<'worker'>>())
          : schedulerSettings(cmd.opts<OptionsFor<typeof command>>());
      expect(runtime.agingStepMs, command).toBe(90_000);
      const byDefault = addOptions(new Command(command).exitOverride(), OPTIONS[command]);
      process.env.TOCK_AGING_STEP = '2m';
      try {
        byDefault.parse([], { from: 'user' });
      } finally {
        delete process.env.TOCK_AGING_STEP;
      }
      expect(byDefault.opts<OptionsFor<typeof command>>().agingStep, command).toBe(120_000);
    }
    expect(addOptions(new Command('x'), OPTIONS.server).parse([], { from: 'user' }).opts().agingStep).toBe(
      60_000,
    );
    for (const bad of ['0', '0s', '500ms', '2d', 'soon'])
      expect(() => OPTIONS.server.agingStep.parse(bad), bad).toThrow(InvalidArgumentError);
    expect(() => OPTIONS.server.agingStep.parse('0')).toThrow('expected a duration from 1s to 1d');
    expect(OPTIONS.worker.agingStep.parse('1d')).toBe(86_400_000);
  });

  test('--prefetch (TOCK_PREFETCH) is auto by default, or a count from 0 to 1000, on tock dev and worker', () => {
    const parse = (command: 'dev' | 'worker', args: string[], env?: string) => {
      const cmd = addOptions(new Command(command).exitOverride(), OPTIONS[command]).configureOutput({
        writeErr: () => {},
      });
      if (env !== undefined) process.env.TOCK_PREFETCH = env;
      try {
        cmd.parse(args, { from: 'user' });
      } finally {
        delete process.env.TOCK_PREFETCH;
      }
      return cmd.opts<OptionsFor<typeof command>>().prefetch;
    };
    for (const command of ['dev', 'worker'] as const) {
      expect(parse(command, []), command).toBe('auto');
      expect(parse(command, ['--prefetch', 'auto']), command).toBe('auto');
      expect(parse(command, ['--prefetch', '50']), command).toBe(50);
      expect(parse(command, ['--prefetch', '0']), command).toBe(0);
      expect(parse(command, ['--prefetch', '1000']), command).toBe(1000);
      expect(parse(command, [], '390'), command).toBe(390);
      expect(parse(command, [], 'auto'), command).toBe('auto');
      for (const bad of ['abc', '-1', '1001', '1.5', 'AUTO', ''])
        expect(() => parse(command, ['--prefetch', bad]), `${command} ${bad}`).toThrow(
          `option '--prefetch <n|auto>' argument '${bad}' is invalid. expected auto or an integer from 0 to 1000`,
        );
      expect(() => parse(command, [], 'abc'), command).toThrow('expected auto or an integer from 0 to 1000');
    }
    expect(
      workerSettings(
        addOptions(new Command('w'), OPTIONS.worker).parse([], { from: 'user' }).opts<OptionsFor<'worker'>>(),
      ).prefetch,
    ).toBe('auto');
  });
});

describe('the options types derived from the table', () => {
  test('an action gets each value as its parser, choices, flag and default make it', () => {
    expectTypeOf<OptionsFor<'dev'>['port']>().toEqualTypeOf<number>();
    expectTypeOf<OptionsFor<'dev'>['logFormat']>().toEqualTypeOf<'pretty' | 'json'>();
    expectTypeOf<OptionsFor<'dev'>['jobs']>().toEqualTypeOf<string>();
    expectTypeOf<OptionsFor<'dev'>['handlers']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<OptionsFor<'server'>['insecure']>().toEqualTypeOf<boolean>();
    expectTypeOf<OptionsFor<'server'>['metricsPort']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<OptionsFor<'worker'>['tenant']>().toEqualTypeOf<string[] | undefined>();
    expectTypeOf<OptionsFor<'worker'>['prefetch']>().toEqualTypeOf<number | 'auto'>();
    expectTypeOf<OptionsFor<'jobs put'>['payload']>().toEqualTypeOf<unknown>();
    expectTypeOf<OptionsFor<'jobs put'>['misfire']>().toEqualTypeOf<
      'skip' | 'fire_once' | 'catch_up' | undefined
    >();
    expectTypeOf<OptionsFor<'keys create'>['role']>().toEqualTypeOf<
      'cluster-admin' | 'admin' | 'operator' | 'worker' | 'reader'
    >();
    expectTypeOf<OptionsFor<'runs list'>['all']>().toEqualTypeOf<boolean>();
    expectTypeOf<OptionsFor<'runs list'>>().not.toHaveProperty('tenant');
  });
});
