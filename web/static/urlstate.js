// The page state in the query string: every change is written with
// history.replaceState, so a link reproduces the view (docs/viewer.md
// lists the parameters). Old #store=… links from the single-store viewer
// still open.
import { hexOf, fromHex, paletteColour } from './colour.js';
import { idOf } from './format.js';

export const DEFAULT_BUDGET = 1000000;
// The vertex budget is a whole number in [MIN_BUDGET, MAX_BUDGET]: it is
// the limit of box queries, which the server takes as a positive integer
// (a link's budget=Infinity or 1e30 made every box query a 400).
export const MIN_BUDGET = 1000;
export const MAX_BUDGET = 1e9;

// budgetOf: a budget from the URL or the panel; anything else is the default.
export function budgetOf(s) {
  const v = Math.round(Number(s));
  return Number.isFinite(v) && v > 0 ? Math.min(MAX_BUDGET, Math.max(MIN_BUDGET, v)) : DEFAULT_BUDGET;
}

// writeURL: s = {layers, budget, size, cam, box, blevel, find}.
export function writeURL(s) {
  const q = new URLSearchParams();
  q.set('stores', s.layers.map((l) => l.name).join(','));
  const hide = s.layers.filter((l) => !l.visible).map((l) => l.name);
  if (hide.length) q.set('hide', hide.join(','));
  s.layers.forEach((l, i) => {
    if (l.colour) q.set(`c.${l.name}`, l.colour);
    if (l.level !== 'auto') q.set(`lvl.${l.name}`, l.level);
    if (l.alpha !== 1) q.set(`op.${l.name}`, l.alpha);
    if (l.range) q.set(`range.${l.name}`, l.range.join(','));
    // A colour is left out when it is the one this place in the list
    // gets when the URL is opened (a layer added after one was removed
    // may have another).
    if (hexOf(l.rgb) !== hexOf(paletteColour(i))) q.set(`rgb.${l.name}`, hexOf(l.rgb).slice(1));
    if (l.filter) q.set(`f.${l.name}`, l.filter);
    if (l.sample !== 1) q.set(`s.${l.name}`, l.sample);
  });
  if (s.budget !== DEFAULT_BUDGET) q.set('budget', s.budget);
  if (s.size !== 1) q.set('size', s.size);
  const cam = s.cam;
  // The target to a millionth of the view's distance: 6 digits of a
  // coordinate at 10^6 (a store in nanometres) are a whole unit, which moved
  // a close view's link off what it showed.
  const digits = (v) => Math.min(17, Math.max(6, 6 + Math.ceil(Math.log10(Math.abs(v) / cam.dist)) || 6));
  q.set('cam', [cam.yaw, cam.pitch, cam.dist].map((v) => +v.toPrecision(6)).concat(cam.target.map((v) => +v.toPrecision(digits(v)))).join(','));
  if (s.box) q.set('box', s.box.flat().join(','));
  if (s.blevel !== '0') q.set('blevel', s.blevel);
  if (s.find) q.set('obj', `${s.find.store}:${s.find.id}`);
  history.replaceState(null, '', '?' + q.toString().replace(/%2C/g, ',').replace(/%3A/g, ':'));
}

// readURL parses the page's location: {layers: [{name, o}], budget, size,
// cam, box, blevel, find}; what is missing or malformed is null (or the
// default).
export function readURL(loc) {
  let q = new URLSearchParams(loc.search);
  // Links from the single-store viewer (#store=…&level=…) still open.
  if (!q.has('stores') && loc.hash.length > 1) {
    const h = new URLSearchParams(loc.hash.slice(1));
    q = new URLSearchParams();
    if (h.get('store')) q.set('stores', h.get('store'));
    if (h.get('level') && h.get('level') !== 'auto') q.set(`lvl.${h.get('store')}`, h.get('level'));
    if (h.get('color')) q.set(`c.${h.get('store')}`, h.get('color'));
    for (const k of ['budget', 'box']) if (h.get(k)) q.set(k, h.get(k));
    if (h.get('obj') && h.get('store')) q.set('obj', `${h.get('store')}:${h.get('obj')}`);
  }
  const nums = (s, n) => {
    const v = (s || '').split(',').map(Number);
    return v.length === n && v.every(Number.isFinite) ? v : null;
  };
  const hide = new Set((q.get('hide') || '').split(',').filter(Boolean));
  const layers = (q.get('stores') || '').split(',').filter(Boolean).map((name) => ({
    name,
    o: {
      visible: !hide.has(name),
      colour: q.get(`c.${name}`) || '',
      level: q.get(`lvl.${name}`) || 'auto',
      alpha: Math.min(1, Math.max(0.1, Number(q.get(`op.${name}`)) || 1)),
      range: nums(q.get(`range.${name}`), 2),
      rgb: /^[0-9a-f]{6}$/i.test(q.get(`rgb.${name}`) || '') ? fromHex('#' + q.get(`rgb.${name}`)) : undefined,
      filter: (q.get(`f.${name}`) || '').trim(),
      sample: sampleOf(q.get(`s.${name}`)),
    },
  }));
  const b = nums(q.get('box'), 6);
  const o = /^(.+):(\d+)$/.exec(q.get('obj') || '');
  // A camera must look at something: a distance above 0, a pitch the
  // mouse could give (View.apply also refuses one far from the scene).
  const cam = nums(q.get('cam'), 6);
  return {
    layers,
    budget: budgetOf(q.get('budget')),
    size: Math.min(4, Math.max(0.25, Number(q.get('size')) || 1)),
    cam: cam && cam[2] > 0 && Math.abs(cam[1]) <= Math.PI / 2 ? cam : null,
    box: b ? [b.slice(0, 3), b.slice(3)] : null,
    blevel: q.get('blevel') || null,
    // An id in digits, kept exactly (a Number rounds ids past 2^53); one
    // past int64 is no id the server knows.
    find: o && idOf(o[2]) !== null ? { store: o[1], id: idOf(o[2]) } : null,
  };
}

// sampleOf: a sample rate from the URL, in (0, 1]; anything else is 1 (all).
function sampleOf(s) {
  const v = Number(s);
  return s && v > 0 && v <= 1 ? v : 1;
}
