// The link from a layer's card to Neuroglancer, from the descriptor's
// neuroglancer member: its url, or its state opened in the public client.
// The server gives its sources as absolute URLs (--public-url, else the
// address the page was loaded from, or what a trusted proxy reports);
// they are used as they are. A relative one (a server that knew no
// address for itself) is made absolute against the page, since
// Neuroglancer runs on another origin.

const NG_APP = 'https://neuroglancer-demo.appspot.com/';

// neuroglancerURL: the link for a descriptor's member ng ('' for none),
// relative to the page at base (a URL or Location).
export function neuroglancerURL(ng, base) {
  if (!ng) return '';
  if (typeof ng === 'string') return webURL(ng, base);
  if (typeof ng.url === 'string') return webURL(ng.url, base);
  let state = ng.state;
  if (!state && ng.sources) {
    const src = Array.isArray(ng.sources) ? ng.sources : Object.values(ng.sources);
    // Annotation sources make annotation layers; skeletons and meshes
    // belong to segmentation layers.
    state = { layers: src.map((s, i) => {
      const source = typeof s === 'string' ? s : s.url;
      return { type: /\/annotations\/?$/.test(source) ? 'annotation' : 'segmentation', source, name: `layer${i}` };
    }) };
  }
  if (!state) return '';
  const origin = new URL(base.href).origin;
  const abs = JSON.parse(JSON.stringify(state), (k, v) => (typeof v === 'string' && /^precomputed:\/\/\//.test(v) ? `precomputed://${origin}${v.slice('precomputed://'.length)}` : v));
  return `${NG_APP}#!${encodeURIComponent(JSON.stringify(abs))}`;
}

// webURL: u made absolute against the page, if it is a web page's
// (http, https); '' otherwise: a javascript: or data: link would run in
// the viewer's origin when clicked.
function webURL(u, base) {
  let url;
  try { url = new URL(u, base.href); } catch { return ''; }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : '';
}

// neuroglancerSources: the sources a descriptor's member ng offers, as
// Neuroglancer takes them (precomputed://URL), to show beside the link.
export function neuroglancerSources(ng, base) {
  if (!ng || !ng.sources) return [];
  const src = Array.isArray(ng.sources) ? ng.sources : Object.values(ng.sources);
  return src.map((s) => `precomputed://${new URL(typeof s === 'string' ? s : s.url, base.href).href}`);
}
