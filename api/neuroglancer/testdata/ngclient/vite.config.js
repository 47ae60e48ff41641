// Builds the harness page with only Neuroglancer's precomputed data source.
import fs from "node:fs";
import path from "node:path";
import { defineConfig } from "vite";

// neuroglancer 2.41.2 pins ikonate to a GitHub commit; package.json overrides
// it with the npm release, which lacks a few icons. Those resolve to an empty
// SVG so the build does not need the network beyond the npm registry.
function emptyMissingIcons() {
  const prefix = "\0zvf-empty-icon:";
  return {
    name: "zvf-empty-missing-icons",
    enforce: "pre",
    resolveId(id) {
      const m = /^ikonate\/icons\/([\w-]+\.svg)\?raw$/.exec(id);
      if (m === null || fs.existsSync(path.resolve("node_modules/ikonate/icons", m[1]))) return null;
      return prefix + m[1];
    },
    load(id) {
      return id.startsWith(prefix) ? 'export default "<svg xmlns=\\"http://www.w3.org/2000/svg\\"/>";' : null;
    },
  };
}

export default defineConfig({
  base: "",
  plugins: [emptyMissingIcons()],
  resolve: {
    conditions: ["neuroglancer/datasource:none_by_default", "neuroglancer/datasource/precomputed:enabled"],
  },
  worker: { format: "es", plugins: () => [emptyMissingIcons()] },
  build: { outDir: "dist", chunkSizeWarningLimit: 16 << 20 },
});
