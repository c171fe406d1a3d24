/** `tock schedule`: the next slots of a schedule expression, computed here, no database. */
import type { Command } from 'commander';
import { parseInstant, previewLines, SystemClock } from '../../core/index.js';
import { defineCommand, type OptionsFor } from '../command.js';

function schedule(expression: string, o: OptionsFor<'schedule'>): void {
  const fromMs = o.from === undefined ? new SystemClock().nowMs() : parseInstant(o.from, '--from');
  const lines = previewLines({ expression, timezone: o.timezone, count: o.count, fromMs });
  process.stdout.write(`${lines.join('\n')}\n`);
}

export function registerSchedule(program: Command): void {
  defineCommand(
    program,
    'schedule',
    'print the next slots of a schedule: the UTC instant, the local time with its offset, and where daylight saving moves or repeats a slot',
    [
      [
        '<expression>',
        'cron (5 or 6 fields), a macro such as @daily, "@every <duration>" or "@at <instant>"',
      ],
    ],
  ).action(schedule);
}
