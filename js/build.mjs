// Build the front-end into the Python package (the built files are committed: users need no node):
//   cd js && npm ci && npm run build
// gradmagic/views/static/widget.js   the view (src/widget.js), bundled and minified by esbuild
// gradmagic/views/static/widget.css  its styles
// gradmagic/views/static/viz.js.gz   Graphviz compiled to WebAssembly (@viz-js/viz's own ESM build,
//                                    wasm inlined), gzipped: the kernel sends it once, as it is
import { build } from "esbuild";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const out = new URL("../gradmagic/views/static/", import.meta.url).pathname;
await build({
  entryPoints: ["src/widget.js"], outfile: out + "widget.js",
  bundle: true, format: "esm", minify: true, target: "es2020", logLevel: "info",
});
copyFileSync("src/widget.css", out + "widget.css");
// only the form the kernel sends it in (one copy in the wheel), made here rather than at each
// kernel's first display; mtime 0 keeps the build reproducible
writeFileSync(out + "viz.js.gz", gzipSync(readFileSync("node_modules/@viz-js/viz/dist/viz.js"), { level: 9 }));
