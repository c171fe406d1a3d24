// A worker thread of the metrics-scrape scenario: scrapes `${base}/metrics` `perSecond` times a
// second (open loop, at most `maxInFlight` in flight) until told 'stop', then posts its counts. A
// thread of its own, so that handling the scrapes' answers does not delay the event loop that times
// the tenant's requests.
import { parentPort, workerData } from 'node:worker_threads';

const { base, key, perSecond, maxInFlight } = workerData;
const headers = key ? { authorization: `Bearer ${key}` } : {};
const counts = { ok: 0, failed: 0, skipped: 0 };
let stopped = false;
let inFlight = 0;
parentPort.on('message', (m) => {
  if (m === 'stop') stopped = true;
});
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const t0 = performance.now();
for (let i = 0; !stopped; i++) {
  await sleep(t0 + (i * 1000) / perSecond - performance.now());
  if (inFlight >= maxInFlight) {
    counts.skipped += 1;
    continue;
  }
  inFlight += 1;
  fetch(`${base}/metrics`, { headers })
    .then(async (r) => {
      await r.text();
      counts[r.status === 200 ? 'ok' : 'failed'] += 1;
    })
    .catch(() => (counts.failed += 1))
    .finally(() => (inFlight -= 1));
}
while (inFlight > 0) await sleep(5);
parentPort.postMessage(counts);
