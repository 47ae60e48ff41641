// Colours of the layers: the palette layers take in turn, conversions for
// the colour picker and CSS, and the automatic range of a numeric
// colouring.

export const LAYER_COLORS = [[0.98, 0.62, 0.25], [0.35, 0.80, 0.95], [0.95, 0.86, 0.30], [0.86, 0.58, 0.78], [0.55, 0.90, 0.50], [0.70, 0.72, 1.00]];

export const rgbCss = (c) => `rgb(${c.map((v) => Math.round(v * 255)).join(',')})`;
export const hexOf = (c) => '#' + c.map((v) => Math.round(v * 255).toString(16).padStart(2, '0')).join('');
export const fromHex = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16) / 255);

// autoRange: the range of the values in arrays (each a {values, n}: its
// first n count), to four significant digits, or null when there are none.
export function autoRange(arrays) {
  let lo = Infinity, hi = -Infinity;
  for (const a of arrays) {
    for (let i = 0; i < a.n; i++) { const x = a.values[i]; if (x < lo) lo = x; if (x > hi) hi = x; }
  }
  if (!(lo <= hi)) return null;
  const p = (x) => Number(x.toPrecision(4));
  return [p(lo), p(hi) === p(lo) ? p(lo) + 1 : p(hi)];
}
