// The %%autograd live view: an anywidget ESM module.
//
// The kernel sends `data` (gradmagic.views.widget.payload): the DOT text of the graph, the drawn
// nodes' short and full values and explanations, the tabs (each {id, title, kind, payload}) and
// the backward steps. Graphviz (WebAssembly, from the shared VizLibrary model) lays the graph out
// here; selecting, hovering, panning, zooming and stepping never go back to the kernel. Tabs of
// kind "deferred" (Backward and the teaching views of a bigger run) are made by the kernel when
// first opened: the view asks with a custom message and the tab arrives in `opened`.
// Text is always set with textContent: names come from user code.

const VIZ_KEY = "__gradmagic_viz_1";
const LAYOUTS_KEY = "__gradmagic_layouts_1";
const MIN_TEXT_PX = 10; // never draw text smaller than this by default
const FONT_PT = 10; // the DOT's fontsize (graph units are points)
const MAX_HEIGHT = 560; // px: the graph's viewport height at most
const MIN_HEIGHT = 140;

// ------------------------------------------------------------------ helpers
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function capped(list, sep) {
  // {items, more} -> text nodes with "and N more"
  const items = list.items.slice();
  if (list.more) items.push(`and ${list.more} more`);
  return items.join(sep);
}

// Graphviz, loaded once per page from the VizLibrary model's code.
async function getViz(model) {
  if (!globalThis[VIZ_KEY]) {
    globalThis[VIZ_KEY] = (async () => {
      const ref = model.get("lib") || "";
      const id = ref.startsWith("IPY_MODEL_") ? ref.slice("IPY_MODEL_".length) : ref;
      const lib = await model.widget_manager.get_model(id);
      // the module travels gzipped and base64-encoded (a third of its size)
      const bytes = Uint8Array.from(atob(lib.get("code")), (c) => c.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      const code = await new Response(stream).text();
      const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
      try {
        const mod = await import(/* webpackIgnore: true */ url);
        return await mod.instance();
      } finally {
        URL.revokeObjectURL(url);
      }
    })();
    globalThis[VIZ_KEY].catch(() => { delete globalThis[VIZ_KEY]; });
  }
  return globalThis[VIZ_KEY];
}

// DOT -> SVG text, remembering the last few layouts (re-renders of an output are instant).
async function layout(model, dot) {
  const cache = (globalThis[LAYOUTS_KEY] ||= new Map());
  if (cache.has(dot)) {
    const svg = cache.get(dot);
    cache.delete(dot);
    cache.set(dot, svg);
    return svg;
  }
  const viz = await getViz(model);
  const svg = viz.renderString(dot, { format: "svg", engine: "dot" });
  cache.set(dot, svg);
  while (cache.size > 24) cache.delete(cache.keys().next().value);
  return svg;
}

// An error of any kind (an Error, Graphviz's list of messages, a thrown object or string) as a
// sentence for the reader, never "[object Object]".
function errorText(err) {
  if (err === null || err === undefined) return "an unknown error";
  if (typeof err === "string") return err;
  if (err instanceof Error) return err.message || err.name;
  if (Array.isArray(err)) return err.map(errorText).join("; ");
  if (typeof err === "object") {
    if (typeof err.message === "string") return err.message;
    if (Array.isArray(err.errors)) return errorText(err.errors);
    try { return JSON.stringify(err).slice(0, 300); } catch { /* fall through */ }
  }
  return String(err);
}

// The size of a drawing from Graphviz, in points (its width="..pt" height="..pt").
function svgSize(text) {
  const m = /<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"/.exec(text.slice(0, 600));
  return m ? { w: Number(m[1]), h: Number(m[2]) } : null;
}

function parseSvg(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const svg = document.importNode(doc.documentElement, true);
  return svg;
}

// "v12" -> {kind: "v", index: 12}
function key(title) {
  const m = /^([voh])(\d+)$/.exec(title.trim());
  return m ? { kind: m[1], index: Number(m[2]) } : null;
}

// ------------------------------------------------------------------ a drawn graph with pan/zoom
class GraphView {
  constructor(data, { onSelect, onHover, onGroup }) {
    this.data = data;
    this.onSelect = onSelect;
    this.onHover = onHover;
    this.onGroup = onGroup; // a picture grouped by the code: a box clicked is opened
    this.el = h("div", { class: "gm-graph" });
    this.toolbar = h("div", { class: "gm-toolbar" },
      h("button", { class: "gm-btn", title: "zoom out (-)", text: "−", onclick: () => this.zoomBy(1 / 1.25) }),
      h("button", { class: "gm-btn", title: "zoom in (+)", text: "+", onclick: () => this.zoomBy(1.25) }),
      h("button", { class: "gm-btn gm-fit", title: "fit to the view (0)", text: "fit", onclick: () => this.fit() }),
      h("span", { class: "gm-hint", text: "drag to pan · ctrl + wheel to zoom · click a node" }));
    this.port = h("div", { class: "gm-port", tabindex: "-1" });
    this.el.append(this.toolbar, this.port);
    this.svg = null;
    this.nodes = new Map(); // index -> {v: g, o: g}
    this.edges = []; // {g, from, to}
    this.view = null; // {x, y, s}
    this._bindPointer();
  }

  mount(svgText) {
    const svg = parseSvg(svgText);
    this.gw = svg.viewBox.baseVal.width;
    this.gh = svg.viewBox.baseVal.height;
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("class", "gm-svg");
    this.nodes = new Map();
    this.edges = [];
    svg.querySelectorAll("title").forEach((t) => {
      const g = t.parentNode;
      const k = key(t.textContent || "");
      const group = /^g:(.+)$/.exec((t.textContent || "").trim());
      if (g.classList.contains("node") && group) {
        g.dataset.group = group[1];
        g.classList.add("gm-group");
      } else if (g.classList.contains("node") && k) {
        g.dataset.kind = k.kind;
        g.dataset.index = k.index;
        if (!this.nodes.has(k.index)) this.nodes.set(k.index, {});
        this.nodes.get(k.index)[k.kind] = g;
      } else if (g.classList.contains("edge")) {
        const [a, b] = (t.textContent || "").split("->").map((s) => key(s));
        if (a && b) this.edges.push({ g, from: a, to: b });
      }
      t.remove(); // no "v12" browser tooltips
    });
    // Graphviz wraps nodes with tooltips in <a xlink:title>: drop those titles too
    svg.querySelectorAll("a").forEach((a) => a.removeAttribute("xlink:title"));
    this.svg = svg;
    this.root = svg.querySelector("g.graph");
    this.port.replaceChildren(svg);
  }

  // graph units (points) -> the viewport, keeping text >= MIN_TEXT_PX unless asked
  fitScale() {
    const w = Math.max(200, this.port.clientWidth || 800);
    return Math.min(w / this.gw, MAX_HEIGHT / this.gh, 4 / 3);
  }

  initialView(centerOn) {
    if (!this.svg) return;
    const w = Math.max(200, this.port.clientWidth || 800);
    const least = MIN_TEXT_PX / FONT_PT;
    let s = Math.min(w / this.gw, 4 / 3);
    let height = Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, this.gh * s + 8));
    s = Math.min(s, (height - 8) / this.gh);
    if (s < least) {
      s = least;
      height = Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, this.gh * s + 8));
    }
    this.port.style.height = `${Math.round(height)}px`;
    this.width = w;
    this.height = height;
    const fits = this.gw * s <= w + 1 && this.gh * s <= height + 1;
    if (!fits && centerOn === "start") {
      // a picture grouped by the code: its start, where the inputs and the first groups are
      this.view = { s, x: 0, y: (this.gh - height / s) / 2 };
      this.clamp();
      this.apply();
    } else if (fits || centerOn === undefined) {
      this.view = { s, x: (this.gw - w / s) / 2, y: (this.gh - height / s) / 2 };
      this.apply();
    } else {
      // too big to fit at a readable size: show the part nearest the target, the target at the
      // far end of the flow (right for LR, bottom for TB)
      const b = this.box(centerOn);
      this.view = { s, x: 0, y: 0 };
      if (!b) { this.apply(); return; }
      const lr = !/rankdir=TB/.test(this.dot || this.data.dot);
      this.view.x = lr ? b.x + b.w / 2 + 16 - w / s : b.x - w / 2 / s;
      this.view.y = lr ? b.y - height / 2 / s : b.y + b.h / 2 + 16 - height / s;
      this.clamp();
      this.apply();
    }
  }

  // graph-unit centre and size of node `index`'s record
  box(index) {
    const g = this.nodes.get(index)?.v || this.nodes.get(index)?.o;
    if (!g || !this.root) return null;
    const b = g.getBBox();
    const m = this.root.transform.baseVal.consolidate()?.matrix;
    const cx = b.x + b.width / 2;
    const cy = b.y + b.height / 2;
    const p = m ? { x: m.a * cx + m.c * cy + m.e, y: m.b * cx + m.d * cy + m.f } : { x: cx, y: cy };
    return { ...p, w: b.width, h: b.height };
  }

  fit() {
    const w = this.port.clientWidth || this.width;
    const hgt = this.port.clientHeight || this.height;
    const s = Math.min(w / this.gw, hgt / this.gh, 4 / 3);
    this.view = { s, x: (this.gw - w / s) / 2, y: (this.gh - hgt / s) / 2 };
    this.apply();
  }

  apply() {
    const w = this.port.clientWidth || this.width;
    const hgt = this.port.clientHeight || this.height;
    const { s, x, y } = this.view;
    this.svg.setAttribute("width", w);
    this.svg.setAttribute("height", hgt);
    this.svg.setAttribute("viewBox", `${x} ${y} ${w / s} ${hgt / s}`);
    this.el.dataset.scale = s.toFixed(4);
  }

  zoomBy(f, cx, cy) {
    if (!this.view) return;
    const w = this.port.clientWidth || this.width;
    const hgt = this.port.clientHeight || this.height;
    const px = cx === undefined ? w / 2 : cx;
    const py = cy === undefined ? hgt / 2 : cy;
    const { s, x, y } = this.view;
    const least = Math.min(this.fitScale(), MIN_TEXT_PX / FONT_PT) / 2;
    const ns = Math.max(least, Math.min(8, s * f));
    const gx = x + px / s;
    const gy = y + py / s;
    this.view = { s: ns, x: gx - px / ns, y: gy - py / ns };
    this.apply();
  }

  position(index) {
    return this.box(index);
  }

  centre(index) {
    const p = this.position(index);
    if (!p || !this.view) return;
    const w = this.port.clientWidth || this.width;
    const hgt = this.port.clientHeight || this.height;
    const { s } = this.view;
    this.view = { s, x: p.x - w / 2 / s, y: p.y - hgt / 2 / s };
    this.clamp();
    this.apply();
  }

  // keep the drawing in the viewport where it is bigger than it (no empty margins)
  clamp() {
    const w = this.port.clientWidth || this.width;
    const hgt = this.port.clientHeight || this.height;
    const { s } = this.view;
    const fit = (v, span, size) => (span > size ? Math.max(0, Math.min(v, span - size)) : (span - size) / 2);
    this.view.x = fit(this.view.x, this.gw, w / s);
    this.view.y = fit(this.view.y, this.gh, hgt / s);
  }

  visible(index) {
    const p = this.position(index);
    if (!p || !this.view) return false;
    const w = this.port.clientWidth || this.width;
    const hgt = this.port.clientHeight || this.height;
    const { s, x, y } = this.view;
    const sx = (p.x - x) * s;
    const sy = (p.y - y) * s;
    return sx > 20 && sy > 10 && sx < w - 20 && sy < hgt - 10;
  }

  _bindPointer() {
    let drag = null;
    this.port.addEventListener("pointerdown", (e) => {
      if (e.button !== 0 || !this.view) return;
      drag = { x: e.clientX, y: e.clientY, vx: this.view.x, vy: this.view.y, moved: false };
    });
    window.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      this.port.classList.add("gm-dragging");
      this.view = { ...this.view, x: drag.vx - dx / this.view.s, y: drag.vy - dy / this.view.s };
      this.apply();
    });
    window.addEventListener("pointerup", (e) => {
      if (!drag) return;
      const moved = drag.moved;
      drag = null;
      this.port.classList.remove("gm-dragging");
      if (moved) return;
      const g = e.target.closest && e.target.closest("g.node");
      if (g && this.port.contains(g) && g.dataset.group && this.onGroup) {
        this.onGroup(g.dataset.group);
      } else if (g && this.port.contains(g) && g.dataset.index !== undefined && g.dataset.kind !== "h") {
        this.onSelect(Number(g.dataset.index));
      }
    });
    this.port.addEventListener("wheel", (e) => {
      if (!(e.ctrlKey || e.metaKey) || !this.view) return; // plain wheel scrolls the page
      e.preventDefault();
      const r = this.port.getBoundingClientRect();
      this.zoomBy(Math.exp(-e.deltaY / 300), e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });
    this.port.addEventListener("mouseover", (e) => {
      const g = e.target.closest && e.target.closest("g.node");
      if (g && g.dataset.kind === "v") this.onHover(Number(g.dataset.index), e);
    });
    this.port.addEventListener("mousemove", (e) => {
      const g = e.target.closest && e.target.closest("g.node");
      if (!g || g.dataset.kind !== "v") this.onHover(null, e);
      else this.onHover(Number(g.dataset.index), e);
    });
    this.port.addEventListener("mouseleave", (e) => this.onHover(null, e));
  }

  // classes on nodes/edges: path highlight and the selected/current node
  mark(path, selected, cls = "gm-path") {
    for (const [i, g] of this.nodes) {
      const on = path.has(i);
      if (g.v) g.v.classList.toggle(cls, on);
      if (g.o) g.o.classList.toggle(cls, on && i !== selected);
      if (g.v) g.v.classList.toggle("gm-selected", i === selected);
    }
    for (const e of this.edges) {
      let on;
      if (e.from.kind === "o") on = path.has(e.to.index) && e.to.index !== selected; // op -> its value
      else on = path.has(e.from.index) && path.has(e.to.index);
      e.g.classList.toggle(cls, on);
    }
  }

  // the grad field of value `index` (the record's last text)
  setGrad(index, text, state) {
    const g = this.nodes.get(index)?.v;
    if (!g) return;
    const texts = g.querySelectorAll("text");
    const last = texts[texts.length - 1];
    if (!last) return;
    if (last.dataset.orig === undefined) last.dataset.orig = last.textContent;
    last.textContent = text === null ? last.dataset.orig : text;
    g.classList.toggle("gm-partial", state === "p");
    g.classList.toggle("gm-unknown", state === "u");
  }
}

// ------------------------------------------------------------------ tables
function table(payload) {
  const box = h("div", { class: "gm-tablebox" });
  for (const line of payload.head || []) box.append(h("p", { class: "gm-head", text: line }));
  const scroll = h("div", { class: "gm-scroll" });
  const tbl = h("table", { class: "gm-table" });
  const thead = h("thead");
  const tbody = h("tbody");
  const rows = payload.rows.map((cells, k) => ({ cells, k }));
  const numeric = payload.columns.map((_, c) => payload.rows.length > 0 &&
    payload.rows.every((r) => r[c] === "" || isFinite(Number(r[c]))));
  const magnitude = new Set(payload.magnitude || []);
  const descending = new Set(payload.descending || []);
  let sortCol = -1;
  let dir = 1;
  // |x| of a number as written (nan and inf largest, as the largest double); a cell that is
  // not one number (an array) has its key in payload.keys, else sorts below the numbers
  const size = (v) => {
    const x = Number(v);
    if (v !== "" && !Number.isNaN(x)) return Math.min(Math.abs(x), 1e308);
    return /^[+-]?(nan|inf|infinity)$/i.test(v) ? 1e308 : -Infinity;
  };
  const sortKey = (row, c) => {
    const k = payload.keys?.[row.k]?.[c];
    if (k !== null && k !== undefined) return k;
    const v = row.cells[c];
    if (magnitude.has(c)) return size(v);
    return numeric[c] ? (v === "" ? -Infinity : Number(v)) : v;
  };
  const draw = () => {
    tbody.replaceChildren(...rows.map((row) => {
      const tr = h("tr", { class: payload.classes?.[row.k] ? `gm-row-${payload.classes[row.k]}` : null });
      row.cells.forEach((c, i) => tr.append(h("td", { class: numeric[i] ? "gm-num" : null, text: c })));
      return tr;
    }));
  };
  const headRow = h("tr");
  payload.columns.forEach((name, c) => {
    const th = h("th", { title: "sort", text: name });
    th.addEventListener("click", () => {
      dir = sortCol === c ? -dir : (descending.has(c) || (Array.isArray(payload.keys) &&
        payload.keys[0]?.[c] !== undefined && payload.keys[0]?.[c] !== null) ? -1 : 1);
      sortCol = c;
      rows.sort((a, b) => {
        const x = sortKey(a, c);
        const y = sortKey(b, c);
        return x < y ? -dir : x > y ? dir : a.k - b.k;
      });
      headRow.querySelectorAll("th").forEach((t, i) => t.dataset.sort = i === c ? (dir > 0 ? "▲" : "▼") : "");
      draw();
    });
    headRow.append(th);
  });
  thead.append(headRow);
  tbl.append(thead, tbody);
  draw();
  scroll.append(tbl);
  box.append(scroll);
  if (payload.note) box.append(h("p", { class: "gm-note", text: payload.note }));
  return box;
}

// "run `x` now" -> ["run ", <code>x</code>, " now"]
function codeSpans(text) {
  return text.split("`").map((part, k) => (k % 2 ? h("code", { text: part }) : part));
}

function legend() {
  const item = (cls, text) => h("span", { class: "gm-key" }, h("span", { class: `gm-swatch ${cls}` }), text);
  return h("div", { class: "gm-legend" },
    item("gm-sw-leaf", "input (leaf)"), item("gm-sw-constant", "constant"), item("gm-sw-value", "value"), item("gm-sw-op", "operation"),
    item("gm-sw-target", "target"), item("gm-sw-fail", "fails the check"),
    item("gm-sw-kink", "kink"), item("gm-sw-nonfinite", "nan / inf"), item("gm-sw-path", "path to the target"));
}

// ------------------------------------------------------------------ the view
function render({ model, el }) {
  const data = JSON.parse(model.get("data"));
  const nodes = data.nodes;
  const root = h("div", { class: "gm-root", tabindex: "0", "data-lm-suppress-shortcuts": "true" });
  el.append(root);
  hideStatic(data.run);

  // children among drawn nodes, for the path to the target
  const children = new Map();
  for (const [i, n] of Object.entries(nodes)) {
    for (const p of n.parents) {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(Number(i));
    }
  }
  const pathFrom = (i) => {
    const seen = new Set([i]);
    const stack = [i];
    while (stack.length) for (const c of children.get(stack.pop()) || []) if (!seen.has(c)) { seen.add(c); stack.push(c); }
    return seen;
  };

  root.append(h("div", { class: "gm-headline", text: data.headline }));
  for (const note of data.notes) root.append(h("div", { class: "gm-warn", text: `⚠ ${note}` }));

  const tooltip = h("div", { class: "gm-tooltip", hidden: true });
  const bar = h("div", { class: "gm-tabs", role: "tablist" });
  const pages = h("div", { class: "gm-pages" });
  root.append(bar, pages, tooltip);

  const hover = (i, e) => {
    if (i === null || !nodes[i]) { tooltip.hidden = true; return; }
    const n = nodes[i];
    tooltip.replaceChildren(
      h("div", { class: "gm-tip-name", text: `${n.name}${n.shape ? "  " + n.shape : ""}${n.op ? "  (" + n.op + ")" : ""}` }),
      h("div", { class: "gm-tip-k", text: "data" }), h("pre", { text: n.dataFull }),
      h("div", { class: "gm-tip-k", text: "grad" }), h("pre", { text: n.gradFull }),
      ...n.flags.map((f) => h("div", { class: "gm-warn", text: `⚠ ${f}` })));
    tooltip.hidden = false;
    const r = root.getBoundingClientRect();
    const x = Math.min(e.clientX - r.left + 14, Math.max(0, r.width - 340));
    tooltip.style.left = `${x}px`;
    tooltip.style.top = `${e.clientY - r.top + 14}px`;
  };

  const tabs = data.tabs;
  const built = new Map();
  const buttons = new Map();
  const graphs = [];
  let current = null;

  // ---- graph tab
  const info = h("div", { class: "gm-info" });
  const picker = h("select", { class: "gm-picker", "aria-label": "node" },
    h("option", { value: "-1", text: "(pick a node, or click one in the graph)" }),
    ...data.order.map((i) => h("option", { value: String(i), text: `${nodes[i].name}${nodes[i].shape ? " " + nodes[i].shape : ""}  [${nodes[i].op || "leaf"}, #${i}]` })));
  picker.addEventListener("change", () => model.set("selected", Number(picker.value)) || model.save_changes());

  const showInfo = (i) => {
    if (i < 0 || !nodes[i]) {
      info.replaceChildren(h("p", { class: "gm-muted", text: "Click a node to see its local derivatives and the gradient flowing into it; hover one for its full value." }));
      return;
    }
    const n = nodes[i];
    const row = (k, v) => h("div", { class: "gm-row" }, h("span", { class: "gm-k", text: k }), h("span", { class: "gm-v", text: v }));
    const value = (k, full) => (full.includes("\n") || full.length > 60
      ? [h("div", { class: "gm-k", text: k }), h("pre", { class: "gm-full", text: full })]
      : [row(k, full)]);
    const incoming = capped(n.incoming, " + ");
    const sum = n.incoming.items.length > 1 || n.incoming.more ? ` = ${n.gradFull.length < 40 ? n.gradFull : n.grad}` : "";
    info.replaceChildren(...[
      h("div", { class: "gm-info-name", text: `${n.name}${n.shape ? "  " + n.shape : ""}   #${i}   ${n.op ? "made by " + n.op : "a leaf"}` }),
      ...value("data", n.dataFull),
      ...value("grad", n.gradFull),
      n.leaf ? null : row("local derivatives", capped(n.local, "; ")),
      n.rule ? row("rule", n.rule) : null,
      row(i === data.target ? "gradient" : "incoming gradient", incoming + sum),
      ...n.flags.map((f) => h("div", { class: "gm-warn", text: `⚠ ${f}` })),
    ].filter(Boolean));
  };

  const select = (i) => {
    picker.value = String(nodes[i] ? i : -1);
    showInfo(i);
    const path = i >= 0 && nodes[i] ? pathFrom(i) : new Set();
    for (const g of graphs) if (g.kind === "graph") {
      g.view.mark(path, i);
      if (i >= 0 && g.view.svg && !g.view.visible(i)) g.view.centre(i);
    }
    root.dataset.selected = String(i);
  };

  // A small graph comes in both directions (data.dots): left to right when its text is 10 px or
  // more at this view's width, else the direction drawn larger. Chosen once for every tab.
  let chosen = null;
  const chooseDot = () => {
    if (!data.dots) return Promise.resolve(data.dot);
    chosen ||= (async () => {
      const width = Math.max(200, root.clientWidth || 800);
      const scale = async (dot) => {
        const size = svgSize(await layout(model, dot));
        return size ? Math.min(width / size.w, MAX_HEIGHT / size.h, 4 / 3) : 0;
      };
      const lr = await scale(data.dots.LR);
      if (lr >= MIN_TEXT_PX / FONT_PT) return data.dots.LR;
      return (await scale(data.dots.TB)) > lr ? data.dots.TB : data.dots.LR;
    })();
    return chosen;
  };

  // the live view could not draw: say why in a sentence, and show the static copy again
  const failed = (view, err) => {
    root.classList.add("gm-failed");
    showStatic(data.run);
    view.port.style.height = "auto";
    view.port.replaceChildren(h("p", { class: "gm-warn", text: `The graph could not be drawn here: ${errorText(err)}. The static copy above and the tables still show the run.` }));
  };

  const makeGraph = (kind) => {
    const view = new GraphView(data, {
      onSelect: (i) => { model.set("selected", i); model.save_changes(); },
      onHover: hover,
      // the kernel opens the group and answers with the new picture in `opened.graph`
      onGroup: kind === "graph" ? (id) => model.send({ type: "open", tab: `group:${id}` }) : null,
    });
    const entry = { kind, view, ready: null };
    const started = performance.now();
    const saved = kind === "graph" ? openedTabs().graph : null; // groups opened before
    entry.ready = (saved && saved.dot ? Promise.resolve(saved.dot) : chooseDot()).then((dot) => {
      view.dot = dot;
      return layout(model, dot);
    }).then((svg) => {
      view.el.dataset.layoutMs = String(Math.round(performance.now() - started));
      view.mount(svg);
      return view;
    }).catch((err) => {
      failed(view, err);
      throw err;
    });
    graphs.push(entry);
    return entry;
  };

  const graphPage = () => {
    const page = h("div", { class: "gm-page" });
    if (data.summary) page.append(h("p", { class: "gm-summary" }, h("b", { text: data.summary.counts }), h("br"), ...codeSpans(data.summary.note)));
    const entry = makeGraph("graph");
    entry.view.toolbar.append(picker);
    page.append(entry.view.el, legend(), info);
    entry.show = () => entry.ready.then((v) => {
      if (!v.view) v.initialView(data.summary && data.summary.grouped ? "start" : data.target);
      const i = model.get("selected");
      select(i);
    });
    showInfo(-1);
    return { page, entry };
  };

  // ---- backward tab
  const backwardPage = (payload) => {
    const page = h("div", { class: "gm-page" });
    const total = payload.steps.length;
    const label = h("span", { class: "gm-stepno" });
    const slider = h("input", { type: "range", min: "0", max: String(total), value: "0", class: "gm-slider", "aria-label": "step" });
    const go = (k) => { k = Math.max(0, Math.min(total, k)); model.set("step", k); model.save_changes(); };
    const controls = h("div", { class: "gm-stepper" },
      h("button", { class: "gm-btn", title: "first step (Home)", text: "first", onclick: () => go(0) }),
      h("button", { class: "gm-btn gm-prev", title: "previous step (←)", text: "◀ prev", onclick: () => go(model.get("step") - 1) }),
      h("button", { class: "gm-btn gm-next", title: "next step (→)", text: "next ▶", onclick: () => go(model.get("step") + 1) }),
      h("button", { class: "gm-btn", title: "last step (End)", text: "last", onclick: () => go(total) }),
      slider, label);
    slider.addEventListener("input", () => go(Number(slider.value)));
    const text = h("div", { class: "gm-steptext" });
    const entry = makeGraph("backward");
    page.append(controls, h("p", { class: "gm-muted", text: "← / → step (click the view first) · grad fields fill in as backward runs: ? not yet known, yellow partial sum, green the node being processed." }), text, entry.view.el, legend());
    if (payload.note) page.append(h("p", { class: "gm-note", text: payload.note }));

    const showStep = (k) => {
      slider.value = String(k);
      label.textContent = `step ${k} of ${payload.total}`;
      // grad fields: unknown, then events up to step k
      const view = entry.view;
      if (view.svg) {
        for (const i of view.nodes.keys()) if (nodes[i]) view.setGrad(i, i === data.target ? null : "grad ?", i === data.target ? "f" : "u");
        for (let s = 0; s < k; s++) for (const [p, fig, st] of payload.steps[s].ev) view.setGrad(p, st === "f" ? null : `grad ${fig} so far`, st);
        const cur = k ? payload.steps[k - 1].n : data.target;
        const path = new Set(k ? [cur, ...(nodes[cur]?.parents || [])] : [cur]);
        view.mark(path, -1, "gm-path");
        for (const [i, g] of view.nodes) if (g.v) g.v.classList.toggle("gm-current", i === cur);
        for (const [i, g] of view.nodes) if (g.o) g.o.classList.toggle("gm-current", i === cur && k > 0);
        if (!view.visible(cur)) view.centre(cur);
      }
      text.replaceChildren(...stepText(k, payload, data));
    };
    entry.show = () => entry.ready.then((v) => {
      if (!v.view) v.initialView(data.summary && data.summary.grouped ? "start" : data.target);
      showStep(model.get("step"));
    });
    entry.showStep = showStep;
    entry.stepBy = (d) => go(model.get("step") + d);
    entry.stepTo = (k) => go(k < 0 ? total : k);
    return { page, entry };
  };

  // ---- a stepped teaching view (kind "steps"): frames of {n, path, html, ev}
  const stepsPage = (payload) => {
    const page = h("div", { class: "gm-page" });
    const head = h("div", { class: "gm-stephead" });
    head.innerHTML = payload.head || ""; // made by gradmagic's Python with every name escaped
    const frames = payload.frames || [];
    const total = frames.length;
    let k = 0;
    const label = h("span", { class: "gm-stepno" });
    const slider = h("input", { type: "range", min: "0", max: String(Math.max(0, total - 1)), value: "0", class: "gm-slider", "aria-label": "step" });
    const text = h("div", { class: "gm-steptext" });
    const entry = makeGraph("steps");
    const showFrame = (j) => {
      k = Math.max(0, Math.min(total - 1, j));
      slider.value = String(k);
      label.textContent = total ? `step ${k + 1} of ${payload.total}` : "no steps";
      const view = entry.view;
      const f = frames[k];
      if (view.svg && f) {
        for (const i of view.nodes.keys()) view.setGrad(i, null, "");
        for (let s = 0; s <= k; s++) for (const [p, t, st] of frames[s].ev) view.setGrad(p, t, st);
        view.mark(new Set([...(f.path || []), ...(f.n >= 0 ? [f.n] : [])]), -1, "gm-path");
        for (const [i, g] of view.nodes) {
          if (g.v) g.v.classList.toggle("gm-current", i === f.n);
        }
        if (f.n >= 0 && !view.visible(f.n)) view.centre(f.n);
      }
      text.innerHTML = f ? f.html : ""; // escaped by gradmagic's Python
    };
    slider.addEventListener("input", () => showFrame(Number(slider.value)));
    const controls = h("div", { class: "gm-stepper" },
      h("button", { class: "gm-btn", title: "first step (Home)", text: "first", onclick: () => showFrame(0) }),
      h("button", { class: "gm-btn gm-prev", title: "previous step (←)", text: "◀ prev", onclick: () => showFrame(k - 1) }),
      h("button", { class: "gm-btn gm-next", title: "next step (→)", text: "next ▶", onclick: () => showFrame(k + 1) }),
      h("button", { class: "gm-btn", title: "last step (End)", text: "last", onclick: () => showFrame(total - 1) }),
      slider, label);
    // (append() would write a null as the text "null")
    page.append(...[head, controls, payload.legend ? h("p", { class: "gm-muted", text: payload.legend }) : null,
      text, entry.view.el, legend(), payload.note ? h("p", { class: "gm-note", text: payload.note }) : null].filter(Boolean));
    entry.show = () => entry.ready.then((v) => {
      if (!v.view) v.initialView(data.summary && data.summary.grouped ? "start" : data.target);
      showFrame(k);
    });
    entry.stepBy = (d) => showFrame(k + d);
    entry.stepTo = (j) => showFrame(j < 0 ? total - 1 : j);
    return { page, entry };
  };

  const tablePage = (payload) => h("div", { class: "gm-page" }, table(payload));
  const htmlPage = (payload) => {
    const page = h("div", { class: "gm-page" });
    page.innerHTML = payload.html; // made by gradmagic's Python with every name escaped
    return page;
  };

  const kinds = { graph: graphPage, backward: backwardPage, steps: stepsPage, table: (p) => ({ page: tablePage(p) }), html: (p) => ({ page: htmlPage(p) }) };

  // A deferred tab (kind "deferred") is made by the kernel when first opened: ask for it, show
  // a line meanwhile; the answer arrives in `opened` (kept with the widget's state).
  const openedTabs = () => { try { return JSON.parse(model.get("opened") || "{}"); } catch { return {}; } };
  const resolve = (tab) => {
    if (tab.kind !== "deferred") return tab;
    const made = openedTabs()[tab.id];
    return made ? { ...made, id: tab.id, title: tab.title } : null;
  };
  const waitingPage = (tab) => {
    const page = h("div", { class: "gm-page gm-waiting" },
      h("p", { class: "gm-muted", text: `Making the ${tab.title} view in the kernel…` }));
    const unanswered = () => {
      if (!resolve(tab)) page.replaceChildren(h("p", { class: "gm-warn", text: `No kernel answered: the ${tab.title} view is made by the kernel when first opened. Run the cell again to see it.` }));
    };
    let timer = null;
    try {
      model.send({ type: "open", tab: tab.id });
      timer = setTimeout(unanswered, 20000);
    } catch (err) {
      unanswered(); // no live kernel (a saved notebook reopened with its widget state)
    }
    return { page, waiting: true, timer };
  };

  const show = (id) => {
    const tab = tabs.find((t) => t.id === id) || tabs[0];
    if (!tab) return;
    if (!built.has(tab.id)) {
      const real = resolve(tab);
      let made;
      if (!real) made = waitingPage(tab);
      else {
        const make = kinds[real.kind];
        made = make ? make(real.payload) : { page: h("p", { text: `(no view for ${real.kind})` }) };
      }
      made.page.dataset.tab = tab.id;
      pages.append(made.page);
      built.set(tab.id, made);
    }
    for (const [id2, made] of built) made.page.hidden = id2 !== tab.id;
    for (const [id2, b] of buttons) b.setAttribute("aria-selected", id2 === tab.id ? "true" : "false");
    current = tab.id;
    root.dataset.tab = tab.id;
    const made = built.get(tab.id);
    if (made.entry) made.entry.show().then(() => { root.dataset.drawn = "1"; }).catch(() => {});
  };

  for (const tab of tabs) {
    const b = h("button", { class: "gm-tab", role: "tab", text: tab.title });
    b.addEventListener("click", () => { model.set("tab", tab.id); model.save_changes(); });
    buttons.set(tab.id, b);
    bar.append(b);
  }

  root.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLInputElement && e.target.type !== "range") return;
    if (e.target instanceof HTMLSelectElement) return;
    const made = built.get(current);
    let handled = true;
    const stepper = made?.entry?.stepBy ? made.entry : null;
    if (stepper) {
      if (e.key === "ArrowRight" || e.key === "ArrowDown" || e.key === "j") stepper.stepBy(1);
      else if (e.key === "ArrowLeft" || e.key === "ArrowUp" || e.key === "k") stepper.stepBy(-1);
      else if (e.key === "Home") stepper.stepTo(0);
      else if (e.key === "End") stepper.stepTo(-1);
      else handled = false;
    } else handled = false;
    const g = made?.entry?.view;
    if (!handled && g) {
      if (e.key === "+" || e.key === "=") g.zoomBy(1.25);
      else if (e.key === "-" || e.key === "_") g.zoomBy(1 / 1.25);
      else if (e.key === "0") g.fit();
      else if (e.key === "Escape") { model.set("selected", -1); model.save_changes(); }
      else return;
      handled = true;
    }
    if (handled) { e.preventDefault(); e.stopPropagation(); }
  });
  // clicks inside the view give it the keyboard (not the notebook's command mode)
  root.addEventListener("pointerdown", (e) => {
    if (!(e.target instanceof HTMLSelectElement || e.target instanceof HTMLInputElement)) root.focus({ preventScroll: true });
  });

  const onSelected = () => { if (built.has("graph")) select(model.get("selected")); };
  const onStep = () => { const b = built.get("backward"); if (b?.entry?.view.svg) b.entry.showStep(model.get("step")); };
  const onTab = () => show(model.get("tab"));
  const onOpened = () => {
    const regrouped = openedTabs().graph;
    if (regrouped && regrouped.dot) for (const g of graphs) {
      if (g.kind !== "graph" || g.view.dot === regrouped.dot) continue;
      const view = g.view;
      view.dot = regrouped.dot;
      g.ready = layout(model, regrouped.dot).then((svg) => {
        view.mount(svg);
        view.view = null;
        view.initialView("start");
        select(model.get("selected"));
        return view;
      }).catch((err) => { failed(view, err); throw err; });
    }
    for (const [id, made] of [...built]) {
      if (!made.waiting) continue;
      const tab = tabs.find((t) => t.id === id);
      if (!tab || !resolve(tab)) continue;
      clearTimeout(made.timer);
      made.page.remove();
      built.delete(id);
      if (current === id) show(id);
    }
  };
  model.on("change:selected", onSelected);
  model.on("change:step", onStep);
  model.on("change:tab", onTab);
  model.on("change:opened", onOpened);
  show(model.get("tab"));
  return () => {
    model.off("change:selected", onSelected);
    model.off("change:step", onStep);
    model.off("change:tab", onTab);
    model.off("change:opened", onOpened);
  };
}

function stepText(k, payload, data) {
  const nodes = data.nodes;
  const code = (t) => h("code", { text: t });
  if (k === 0) {
    const t = nodes[data.target];
    return [h("p", {}, "Start: the target ", code(t ? t.name : "target"), " gets the seed gradient ",
      code(t ? t.gradFull : "1"), `. Step through the ${payload.total} operation node${payload.total === 1 ? "" : "s"} one at a time, from the target back to the leaves.`)];
  }
  const s = payload.steps[k - 1];
  const p = h("p", {}, `Step ${k} of ${payload.total}: `, code(s.name), ` (${s.op}) has its final gradient `, code(s.grad));
  if (s.tensor) {
    p.append(` and passes it to ${s.inputs.join(", ")} through the op's vector-Jacobian product.`);
    return [p, s.rule ? h("p", { class: "gm-rule", text: s.rule }) : null].filter(Boolean);
  }
  p.append(" and passes it to its inputs:");
  const list = h("ul", { class: "gm-terms" }, ...s.items.map(([name, g, local, prod, sofar, fin]) =>
    h("li", {}, code(name), ` += ${g} × ${local} = ${prod}  →  `, code(name), fin ? ` = ${sofar} (final)` : ` so far ${sofar}`)));
  if (s.more) list.append(h("li", { text: `and ${s.more} more` }));
  return [p, list, s.rule ? h("p", { class: "gm-rule", text: s.rule }) : null].filter(Boolean);
}

// The static copy again, when the live view could not draw.
function showStatic(run) {
  if (!run) return;
  for (const el of document.querySelectorAll(`[data-gm-run="${CSS.escape(run)}"]`)) {
    const box = el.closest(".jp-OutputArea-child") || el;
    box.style.display = "";
  }
}

// The static copy published just before this view (same run id): hidden once the live view exists.
function hideStatic(run) {
  if (!run) return;
  for (const el of document.querySelectorAll(`[data-gm-run="${CSS.escape(run)}"]`)) {
    const box = el.closest(".jp-OutputArea-child") || el;
    box.style.display = "none";
  }
}

export default { render };
