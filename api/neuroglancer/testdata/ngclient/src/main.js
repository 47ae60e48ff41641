// The browser test's page: a stock Neuroglancer viewer whose state comes from
// the URL fragment (#!<JSON>) once, through the JS API. The URL-hash binding
// is left out on purpose: on a loaded machine its debounced save can read a
// layer before it is restored and drop it.
import "neuroglancer";
import { makeDefaultViewer } from "neuroglancer/unstable/ui/default_viewer.js";
import { setDefaultInputEventBindings } from "neuroglancer/unstable/ui/default_input_event_bindings.js";
import { columnSpecifications } from "neuroglancer/unstable/ui/statistics.js";

const viewer = makeDefaultViewer();
window.viewer = viewer;
setDefaultInputEventBindings(viewer.inputEventBindings);
if (location.hash.startsWith("#!")) {
  viewer.state.restoreState(JSON.parse(decodeURIComponent(location.hash.slice(2))));
}

// loadState sums the chunk statistics of every source (the columns of
// Neuroglancer's statistics panel) and reports each layer's data-source
// errors ("loading" while a source has not answered yet).
async function loadState() {
  const perSource = await viewer.chunkQueueManager.getStatistics();
  const chunks = {};
  for (const col of columnSpecifications) {
    chunks[col.key] = 0;
    for (const [, stats] of perSource) chunks[col.key] += col.getter(stats) || 0;
  }
  const layers = viewer.layerManager.managedLayers.map((managed) => {
    const sources = managed.layer?.dataSources ?? [];
    return {
      name: managed.name,
      loaded: managed.layer != null,
      errors: sources.map((s) => (s.loadState === undefined ? "loading" : (s.loadState.error?.message ?? null))),
    };
  });
  return { ready: viewer.isReady(), chunks, layers };
}

function loaded(s) {
  const c = s.chunks;
  return s.ready && s.layers.length > 0 &&
    s.layers.every((l) => l.loaded && l.errors.length > 0 && l.errors.every((e) => e === null)) &&
    c.visibleChunksTotal > 0 && c.visibleChunksDownloading === 0 && c.visibleChunksFailed === 0 &&
    c.visibleChunksGpuMemory + c.visibleChunksSystemMemory >= c.visibleChunksTotal;
}

// zvfWhenLoaded resolves with the load state once every layer's source has
// answered without error and every visible chunk is in memory, seen on two
// checks in a row (a layer may ask for more chunks after the first ones);
// it rejects with the last state when a source fails or time runs out.
window.zvfWhenLoaded = (timeoutMs) => new Promise((resolve, reject) => {
  const deadline = performance.now() + timeoutMs;
  let streak = 0;
  const check = async () => {
    const s = await loadState();
    const failed = s.layers.some((l) => l.errors.some((e) => e !== null && e !== "loading"));
    streak = loaded(s) ? streak + 1 : 0;
    if (streak >= 2) resolve(s);
    else if (failed || performance.now() > deadline) reject(new Error(JSON.stringify(s)));
    else setTimeout(check, 200);
  };
  check();
});
