// The server's routes as URLs (relative to the page), and the paging of
// bbox answers. Every request the viewer makes is built here, so a new
// query parameter is one change.

const enc = encodeURIComponent;

// PAGE_LIMIT is the page size the viewer asks for; the server clamps it to
// its --max-vertices, and bboxPages follows the pages.
export const PAGE_LIMIT = 1000000;

export const catalogURL = () => 'api/v1/stores';
export const storeURL = (store) => `api/v1/stores/${enc(store)}`;

// dataURL is where the data of store s is asked for: s is a store's name
// (the version served now) or {name, version}, the version a descriptor
// named (its "version"): every answer there is of that version, so the
// browser may keep it for good, and once the store has changed it is a
// 410 store-changed (net.js tells the page, which reads the descriptor
// again). The builders below take either.
const dataURL = (s) => {
  if (typeof s === 'string') return storeURL(s);
  return s.version ? `${storeURL(s.name)}/v${enc(s.version)}` : storeURL(s.name);
};

// objectURL: an object's vertices (part ''), '/levels' or '/manifest';
// precision (store units, vertices only) asks for quantized coordinates.
export function objectURL(store, id, part = '', { level, precision } = {}) {
  const p = [];
  if (level !== undefined) p.push(`level=${enc(String(level))}`);
  if (precision > 0) p.push(`precision=${enc(String(precision))}`);
  return `${dataURL(store)}/objects/${enc(String(id))}${part}${p.length ? `?${p.join('&')}` : ''}`;
}

// bboxURL is a box query: q = {min, max, dims, level, limit, attributes,
// connectivity, format, filter, sample, precision, cursor}. The corners are cut to
// dims numbers (a 2-D store takes two; a 4-D one gets the whole of its
// fourth axis); attributes is a name, a list or
// '*'; filter is CQL2 text; sample a share in (0, 1], left out at 1 (the
// server's answer is the same); the rest are left out when undefined, so
// the server's defaults apply; precision (store units) asks for quantized
// coordinates. cursor comes last: a page's URL is the
// first page's with the cursor added.
export function bboxURL(store, q) {
  const p = boxParams(q);
  if (q.limit !== undefined) p.push(`limit=${enc(String(q.limit))}`);
  const attrs = Array.isArray(q.attributes) ? q.attributes.join(',') : q.attributes;
  if (attrs) p.push(`attributes=${enc(attrs)}`);
  if (q.connectivity === false) p.push('connectivity=false');
  if (q.format) p.push(`f=${enc(q.format)}`);
  // Coordinates within precision (store units): binary answers only.
  if (q.precision > 0) p.push(`precision=${enc(String(q.precision))}`);
  if (q.cursor) p.push(`cursor=${enc(q.cursor)}`);
  return `${dataURL(store)}/bbox?${p.join('&')}`;
}

// countURL: how many rows the box query q (its box, level, filter and
// sample) answers, all pages: {"count": N}.
export const countURL = (store, q) => `${dataURL(store)}/count?${boxParams(q).join('&')}`;

// densityURL: the rows of q counted in shape cells over its box, as JSON
// {"shape", "counts"} (x fastest).
export const densityURL = (store, q, shape) => `${dataURL(store)}/density?${boxParams(q).join('&')}&shape=${shape.join(',')}&f=json`;

// queryablesURL: the JSON Schema of what a filter may name.
export const queryablesURL = (store) => `${dataURL(store)}/queryables`;

// FAR: the largest coordinate a box may name (the server's bound).
const FAR = 1e300;

// boxParams: the box, level and selection that bbox, count and density
// share, in that order.
function boxParams(q) {
  const dims = q.dims ?? q.min.length;
  // A number per axis of the store: the page works in x, y, z, so an axis
  // beyond them (a 4-axis store) spans everything (FAR, the server's
  // limit). Each number encoded: String(1e21) is '1e+21', and a bare + is
  // a space.
  const corner = (c, far) => Array.from({ length: dims }, (_, i) => (i < c.length ? c[i] : far)).map((v) => enc(String(v))).join(',');
  const p = [`min=${corner(q.min, -FAR)}`, `max=${corner(q.max, FAR)}`];
  if (q.level !== undefined) p.push(`level=${enc(String(q.level))}`);
  if (q.filter) p.push(`filter=${enc(q.filter)}`);
  if (q.sample !== undefined && q.sample < 1) p.push(`sample=${q.sample}`);
  return p;
}

// bboxPages yields the parsed pages of a binary box query, following each
// answer's next cursor; the caller stops early by leaving the loop.
export async function* bboxPages(net, store, q, meta, signal) {
  let cursor;
  do {
    const page = await net.binary(bboxURL(store, { ...q, cursor }), meta, signal);
    yield page;
    cursor = page.trailer.next;
  } while (cursor);
}
