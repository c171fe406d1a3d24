/**
 * The optional metrics listener of `tock server --metrics-port`: `GET /metrics` alone, without a
 * key, on its own port on loopback (127.0.0.1), for a Prometheus on the same host (or behind a
 * proxy the operator controls). It serves the same registry and the same run sample as the API's
 * `/metrics`, so a scrape reads nothing from the database (the sample is at most one read per
 * METRICS_SAMPLE_MS, shared with the API's route).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Metrics, RunGaugeSampler } from '../api/index.js';

/** The listener's address: loopback only. */
export const METRICS_HOST = '127.0.0.1';

export async function startMetricsListener(o: {
  metrics: Metrics;
  sampler: RunGaugeSampler;
  port: number;
  logger: Logger;
}): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: only GET /metrics\n');
      return;
    }
    void (async () => {
      try {
        await o.sampler.refresh();
      } catch (err) {
        o.logger.warn({ err }, 'metrics: could not sample run counts; serving the last sample');
      }
      const body = await o.metrics.registry.metrics();
      response.writeHead(200, { 'content-type': o.metrics.registry.contentType }).end(body);
    })().catch((err: unknown) => {
      o.logger.error({ err }, 'metrics listener failed');
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, METRICS_HOST, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${METRICS_HOST}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
