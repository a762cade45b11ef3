// Build the front-end into the Python package (the built files are committed: users need no node):
//   cd js && npm ci && npm run build
// gradmagic/views/static/widget.js   the view (src/widget.js), bundled and minified by esbuild
// gradmagic/views/static/widget.css  its styles
// gradmagic/views/static/viz.js      Graphviz compiled to WebAssembly (@viz-js/viz's own ESM build,
//                                    wasm inlined): the kernel sends it once, gzipped
import { build } from "esbuild";
import { copyFileSync } from "node:fs";

const out = new URL("../gradmagic/views/static/", import.meta.url).pathname;
await build({
  entryPoints: ["src/widget.js"], outfile: out + "widget.js",
  bundle: true, format: "esm", minify: true, target: "es2020", logLevel: "info",
});
copyFileSync("src/widget.css", out + "widget.css");
copyFileSync("node_modules/@viz-js/viz/dist/viz.js", out + "viz.js");
