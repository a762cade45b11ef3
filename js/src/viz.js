// Graphviz compiled to WebAssembly, loaded once per page from the shared VizLibrary model, and
// the layouts it made (kept across views: re-rendering an output is instant).

const VIZ_KEY = "__gradmagic_viz_1";
const LAYOUTS_KEY = "__gradmagic_layouts_1";
const KEPT_LAYOUTS = 24;

// The library's gzipped module as bytes. A live kernel sends a binary buffer (a DataView); a
// notebook saved with widget state restores it from base64 (an ArrayBuffer or a view on one,
// depending on the widget manager); a state saved by an older gradmagic holds a base64 string.
export function bytesOf(code) {
  if (typeof code === "string") return Uint8Array.from(atob(code), (c) => c.charCodeAt(0));
  if (code instanceof ArrayBuffer) return new Uint8Array(code);
  if (ArrayBuffer.isView(code)) return new Uint8Array(code.buffer, code.byteOffset, code.byteLength);
  throw new Error("the Graphviz module did not arrive from the kernel");
}

async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).text();
}

async function loadViz(model) {
  const ref = model.get("lib") || "";
  const id = ref.startsWith("IPY_MODEL_") ? ref.slice("IPY_MODEL_".length) : ref;
  const lib = await model.widget_manager.get_model(id);
  const code = await gunzip(bytesOf(lib.get("code")));
  const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
  try {
    const mod = await import(/* webpackIgnore: true */ url);
    return await mod.instance();
  } finally {
    URL.revokeObjectURL(url);
  }
}

// Graphviz, one instance per page (a failed load is tried again by the next view).
export function viz(model) {
  if (!globalThis[VIZ_KEY]) {
    globalThis[VIZ_KEY] = loadViz(model);
    globalThis[VIZ_KEY].catch(() => { delete globalThis[VIZ_KEY]; });
  }
  return globalThis[VIZ_KEY];
}

// DOT -> SVG text, remembering the last few layouts.
export async function layout(model, dot) {
  const cache = (globalThis[LAYOUTS_KEY] ||= new Map());
  if (cache.has(dot)) {
    const svg = cache.get(dot);
    cache.delete(dot); // most recently used last
    cache.set(dot, svg);
    return svg;
  }
  const svg = (await viz(model)).renderString(dot, { format: "svg", engine: "dot" });
  cache.set(dot, svg);
  while (cache.size > KEPT_LAYOUTS) cache.delete(cache.keys().next().value);
  return svg;
}

// The size of a drawing from Graphviz, in points (its width="..pt" height="..pt").
export function svgSize(text) {
  const m = /<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"/.exec(text.slice(0, 600));
  return m ? { w: Number(m[1]), h: Number(m[2]) } : null;
}
