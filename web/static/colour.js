// Colours of the layers: the palette layers take in turn, conversions for
// the colour picker and CSS, and the automatic range of a numeric
// colouring.

// One for each of the layers a page opens with (viewer.js
// MAX_DEFAULT_LAYERS), none of them white (box query hits) or magenta
// (the object found).
export const LAYER_COLORS = [[0.98, 0.62, 0.25], [0.35, 0.80, 0.95], [0.95, 0.86, 0.30], [0.86, 0.58, 0.78], [0.55, 0.90, 0.50], [0.70, 0.72, 1.00], [0.96, 0.42, 0.40], [0.25, 0.78, 0.66]];

// paletteColour: the palette's colour for the layer at position i of a
// page's list; a page opened from a URL gives each layer whose colour the
// URL does not name this one (urlstate.js writes the others).
export const paletteColour = (i) => LAYER_COLORS[i % LAYER_COLORS.length];

// freeColour: for a layer added to layers, the first palette colour none
// of them has, or when they have all, its place's.
export function freeColour(layers) {
  const used = new Set(layers.map((l) => hexOf(l.rgb)));
  return LAYER_COLORS.find((c) => !used.has(hexOf(c))) || paletteColour(layers.length);
}

export const rgbCss = (c) => `rgb(${c.map((v) => Math.round(v * 255)).join(',')})`;
export const hexOf = (c) => '#' + c.map((v) => Math.round(v * 255).toString(16).padStart(2, '0')).join('');
export const fromHex = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16) / 255);

// The automatic range spans the 2nd to the 98th percentile of the values
// seen: a few outliers (a skeleton's 12-unit root among 0.3-unit twigs)
// would otherwise squeeze everything else into one end of the colour bar.
const AUTO_LO = 0.02, AUTO_HI = 0.98;
// Beyond this many values, an even sample of them: the percentiles of a
// million float32s move by less than the four digits the range keeps.
const SAMPLE = 1 << 18;

// autoRange: the [AUTO_LO, AUTO_HI] percentiles of the finite values in
// arrays (each a {values, n}: its first n count), to four significant
// digits, or null when there are none. Percentiles interpolate between the
// sorted values at rank p·(n−1).
export function autoRange(arrays) {
  let total = 0;
  for (const a of arrays) total += a.n;
  if (!total) return null;
  const step = Math.max(1, total / SAMPLE);
  const vals = new Float64Array(Math.min(total, SAMPLE));
  let k = 0, next = 0, i = 0;
  for (const a of arrays) {
    for (let j = 0; j < a.n; j++, i++) {
      if (i < next) continue;
      next += step;
      const x = a.values[j];
      if (Number.isFinite(x) && k < vals.length) vals[k++] = x;
    }
  }
  if (!k) return null;
  const v = vals.subarray(0, k).sort();
  const at = (p) => {
    const r = p * (k - 1), lo = Math.floor(r), hi = Math.min(k - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (r - lo);
  };
  const round = (x) => Number(x.toPrecision(4));
  const a = round(at(AUTO_LO)), b = round(at(AUTO_HI));
  return [a, b === a ? a + 1 : b];
}
