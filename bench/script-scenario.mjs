// Runs one of the standalone benchmark scripts (bench/claim-complete.mjs, bench/drivers.mjs) as a
// scenario: in a child process, on a fresh database, passing --smoke and the rounds on.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { markdownTable, recreateDatabase } from './lib.mjs';

const bench = path.dirname(fileURLToPath(import.meta.url));

/** The scenario for `script`: its `loop: median N runs/s` lines become the table. */
export function scriptScenario({ name, script, description }) {
  return {
    name,
    description,
    async run(ctx) {
      const url = await recreateDatabase(ctx.databaseUrl, 'bench_tock');
      const args = [path.join(bench, script), '--repeat', String(ctx.rounds)];
      if (ctx.smoke) args.push('--smoke');
      ctx.log(`node bench/${script} ${args.slice(1).join(' ')}`);
      const lines = [];
      const code = await new Promise((resolve, reject) => {
        const child = spawn(process.execPath, args, {
          env: { ...process.env, DATABASE_URL: url },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let buffered = '';
        child.stdout.on('data', (chunk) => {
          buffered += chunk;
          const parts = buffered.split('\n');
          buffered = parts.pop();
          for (const line of parts) {
            lines.push(line);
            ctx.log(line.trim());
          }
        });
        child.on('error', reject);
        child.on('close', resolve);
      });
      if (code !== 0) throw new Error(`bench/${script} exited with ${code}`);
      const medians = lines
        .map((l) => /^(\S+): median (\d+) runs\/s(?: \((.*)\))?/.exec(l))
        .filter(Boolean)
        .map((m) => ({ name: m[1], median: Number(m[2]), rounds: m[3]?.split(', ').map(Number) ?? null }));
      if (medians.length === 0) throw new Error(`bench/${script} printed no median`);
      return {
        settings: { script: `bench/${script}`, args: args.slice(1) },
        systems: medians,
        output: lines,
        table: markdownTable(
          ['loop', 'runs/s (median)'],
          medians.map((m) => [m.name, m.median.toLocaleString('en-US')]),
        ),
      };
    },
  };
}
