// The soak's picture: small multiples, one line chart per figure over the soak's elapsed time, as
// a hand-written SVG (no dependency). Each panel's y axis starts at 0 and ends at its largest
// value; a missing value (null) breaks the line.

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];
const W = 460;
const H = 210;
const PAD = { left: 58, right: 12, top: 26, bottom: 30 };

const esc = (s) => String(s).replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/** A number for an axis label: short. */
function short(n) {
  if (n === 0) return '0';
  const a = Math.abs(n);
  if (a >= 1e6) return `${(n / 1e6).toFixed(a >= 1e7 ? 0 : 1)}M`;
  if (a >= 1e4) return `${(n / 1e3).toFixed(0)}k`;
  if (a >= 100) return n.toFixed(0);
  if (a >= 1) return n.toFixed(1);
  return n.toPrecision(2);
}

/** One panel at (x0, y0): `title`, and `series` [{ name, values }] over `xs` (seconds). */
function panel({ x0, y0, title, unit, xs, series }) {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const xMax = Math.max(1, ...xs);
  const finite = series.flatMap((s) => s.values.filter((v) => v !== null && Number.isFinite(v)));
  const yMax = Math.max(1e-9, ...finite) * 1.05;
  const px = (x) => x0 + PAD.left + (x / xMax) * plotW;
  const py = (y) => y0 + PAD.top + plotH - (y / yMax) * plotH;
  const out = [
    `<text x="${x0 + PAD.left}" y="${y0 + 16}" font-size="13" font-weight="bold">${esc(title)}${unit ? ` (${esc(unit)})` : ''}</text>`,
    `<rect x="${x0 + PAD.left}" y="${y0 + PAD.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#bbb"/>`,
  ];
  for (const f of [0, 0.5, 1]) {
    const y = py(yMax * f);
    out.push(
      `<text x="${x0 + PAD.left - 4}" y="${y + 4}" font-size="10" text-anchor="end">${short(yMax * f)}</text>`,
      `<line x1="${x0 + PAD.left}" x2="${x0 + PAD.left + plotW}" y1="${y}" y2="${y}" stroke="#eee"/>`,
    );
  }
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const x = px(xMax * f);
    out.push(
      `<text x="${x}" y="${y0 + H - 14}" font-size="10" text-anchor="middle">${short((xMax * f) / 60)} min</text>`,
    );
  }
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    let d = '';
    let pen = 'M';
    s.values.forEach((v, j) => {
      if (v === null || !Number.isFinite(v)) {
        pen = 'M';
        return;
      }
      d += `${pen}${px(xs[j]).toFixed(1)},${py(v).toFixed(1)} `;
      pen = 'L';
    });
    if (d) out.push(`<path d="${d.trim()}" fill="none" stroke="${colour}" stroke-width="1.5"/>`);
    const lx = x0 + PAD.left + 6 + i * 100;
    out.push(
      `<line x1="${lx}" x2="${lx + 14}" y1="${y0 + H - 4}" y2="${y0 + H - 4}" stroke="${colour}" stroke-width="2"/>`,
      `<text x="${lx + 18}" y="${y0 + H}" font-size="10">${esc(s.name)}</text>`,
    );
  });
  return out.join('\n');
}

/** The SVG document of `panels` [{ title, unit, series }] over `xs`, two panels a row. */
export function smallMultiples({ title, xs, panels }) {
  const cols = 2;
  const rows = Math.ceil(panels.length / cols);
  const width = cols * W;
  const height = rows * (H + 12) + 30;
  const body = panels.map((p, i) =>
    panel({ x0: (i % cols) * W, y0: 30 + Math.floor(i / cols) * (H + 12), xs, ...p }),
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<title>${esc(title)}</title>`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">${esc(title)}</text>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}
