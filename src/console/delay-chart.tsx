/**
 * A scheduling delay chart (`GET /v1/delay`): uPlot draws the chosen statistics of each bucket on a
 * canvas, and the same numbers are there to read without it: a legend with the newest bucket's
 * values, and the buckets with runs in a table under a `<details>`. uPlot styles its elements
 * through the CSSOM (`element.style`), which the Content-Security-Policy allows; its style sheet is
 * bundled into the console's (console.css imports it), never inlined.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { chartColumns, type DelayStat, latestBucket, seconds } from './delay.js';
import { localTime } from './format.js';
import type { DelayAnswer } from './types.js';

/** Each statistic's line colour (console.css gives the legend's swatches the same, by class). */
const STROKE: Record<DelayStat, string> = { p50: '#0a55c4', p99: '#8a1212', max: '#6b4a00' };
const LABEL: Record<DelayStat, string> = { p50: 'p50', p99: 'p99', max: 'max' };
const HEIGHT = 220;

interface Props {
  /** The chart's name; also the caption of its table. */
  caption: string;
  answer: DelayAnswer;
  stats: readonly DelayStat[];
  /** Names the figure for tests (`data-testid`). */
  testId: string;
}

export function DelayChart({ caption, answer, stats, testId }: Props) {
  const latest = latestBucket(answer);
  const withRuns = answer.buckets.filter((b) => b.runs > 0);
  return (
    <figure
      class="chart"
      data-testid={testId}
      data-from={answer.from}
      data-to={answer.to}
      data-step={answer.step_seconds}
    >
      <figcaption>{caption}</figcaption>
      <Plot answer={answer} stats={stats} label={caption} />
      <ul class="legend" aria-label="Newest bucket with runs">
        {stats.map((s) => (
          <li key={s}>
            <span class={`swatch swatch-${s}`} aria-hidden="true" /> {LABEL[s]}{' '}
            <strong data-stat={s} data-seconds={latest?.[s] ?? ''}>
              {seconds(latest?.[s] ?? null)}
            </strong>
          </li>
        ))}
        <li class="muted">
          {latest
            ? `newest bucket with runs: ${localTime(latest.start)}, ${latest.runs} runs`
            : 'no run ended in this range'}
        </li>
      </ul>
      <details>
        <summary>
          The numbers ({withRuns.length} {withRuns.length === 1 ? 'bucket' : 'buckets'} with runs)
        </summary>
        <div class="table-wrap">
          <table>
            <caption>
              {caption}: buckets of {answer.step_seconds} s of slots with ended runs
            </caption>
            <thead>
              <tr>
                <th scope="col">Slots from</th>
                <th scope="col">Runs</th>
                {stats.map((s) => (
                  <th scope="col" key={s}>
                    {LABEL[s]}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {withRuns.map((b) => (
                <tr key={b.start} data-bucket={b.start}>
                  <td>
                    <time dateTime={b.start}>{localTime(b.start)}</time>
                  </td>
                  <td>{b.runs}</td>
                  {stats.map((s) => (
                    <td key={s} data-stat={s} data-seconds={b[s] ?? ''}>
                      {seconds(b[s])}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}

/** The canvas: made once per set of statistics, given new data on each answer, resized with the window. */
function Plot({ answer, stats, label }: { answer: DelayAnswer; stats: readonly DelayStat[]; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const data = chartColumns(answer, stats) as uPlot.AlignedData;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(300, el.clientWidth);
    const u = new uPlot(
      {
        width: width(),
        height: HEIGHT,
        legend: { show: false },
        cursor: { show: false },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [{}, { values: (_u, ticks) => ticks.map((t) => `${t} s`), size: 60 }],
        series: [
          {},
          ...stats.map((s) => ({ label: LABEL[s], stroke: STROKE[s], width: 2, points: { show: true } })),
        ],
      },
      data,
      el,
    );
    plot.current = u;
    const resize = () => u.setSize({ width: width(), height: HEIGHT });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      u.destroy();
      plot.current = null;
    };
  }, [stats.join()]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [answer]);

  // The canvas says nothing to a screen reader; the legend and the table beside it do.
  return <div class="plot" ref={box} role="img" aria-label={`${label}: a chart; the numbers follow`} />;
}
